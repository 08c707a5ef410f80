"""``reportgen publish`` against a real local git repository and a bare "remote" on disk."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from reportgen import __version__
from reportgen.cli import main
from reportgen.errors import ConflictError, SiteError
from reportgen.site.fs import shared_lock as site_read_lock
from reportgen.site.publish import check_site, publish_site

IDENTITY = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com"}


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No user or system git config leaks in; a fixed identity."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for k, val in IDENTITY.items():
        monkeypatch.setenv(k, val)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def make_repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository with one commit on main and a bare remote called origin; (repo, head sha)."""
    repo, remote = tmp_path / "repo", tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    (repo / "README.md").write_text("source\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "source")
    git(repo, "remote", "add", "origin", str(remote))
    return repo, git(repo, "rev-parse", "HEAD")


def make_site(root: Path, run_ids: list[str], index: str = "index") -> Path:
    """A built-looking site: index, one page per run, latest/, manifest.json, .nojekyll."""
    site = root / "site"
    site.mkdir(parents=True)
    (site / "index.html").write_text(f"<h1>{index}</h1>\n")
    (site / ".nojekyll").write_text("")
    for rid in run_ids:
        (site / "runs" / rid).mkdir(parents=True)
        (site / "runs" / rid / "index.html").write_text(f"<h1>{rid}</h1>\n")
    (site / "latest").mkdir()
    (site / "latest" / "index.html").write_text(f"<h1>{run_ids[-1]}</h1>\n")
    manifest = {"schema_version": 1, "runs": [{"run_id": r} for r in run_ids], "files": ["index.html"]}
    (site / "manifest.json").write_text(json.dumps(manifest))
    return site


def test_two_publishes_keep_the_first_runs_page_and_push_both_commits(tmp_path: Path) -> None:
    repo, sha = make_repo(tmp_path)
    status_before = git(repo, "status", "--porcelain")
    first = publish_site(make_site(tmp_path / "b1", ["run-1"], "first"), repo, push=True)
    assert (first.added, first.updated, first.unchanged, first.runs, first.pushed) == (5, 0, 0, 1, True)
    second = publish_site(make_site(tmp_path / "b2", ["run-2"], "second"), repo, push=True)
    assert (second.added, second.updated, second.unchanged, second.runs) == (1, 3, 1, 1)  # .nojekyll unchanged
    assert second.parent == first.commit

    tree = git(repo, "ls-tree", "-r", "--name-only", "gh-pages").splitlines()
    assert sorted(tree) == [".nojekyll", "index.html", "latest/index.html", "manifest.json",
                            "runs/run-1/index.html", "runs/run-2/index.html"]
    assert git(repo, "show", "gh-pages:runs/run-1/index.html") == "<h1>run-1</h1>"
    assert git(repo, "show", "gh-pages:index.html") == "<h1>second</h1>"
    log = git(repo, "log", "--format=%s", "gh-pages").splitlines()
    assert log == [f"reportgen {__version__}: site built from {sha} (1 runs)"] * 2
    remote = tmp_path / "remote.git"
    assert git(remote, "rev-parse", "gh-pages") == second.commit
    assert git(remote, "rev-list", "--count", "gh-pages") == "2"
    # the user's checkout is untouched
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main" and git(repo, "rev-parse", "HEAD") == sha
    assert git(repo, "status", "--porcelain") == status_before == ""


def test_republishing_the_same_site_commits_nothing(tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path)
    site = make_site(tmp_path, ["run-1"])
    first = publish_site(site, repo)
    again = publish_site(site, repo)
    assert again.commit is None and (again.added, again.updated, again.unchanged) == (0, 0, 5)
    assert git(repo, "rev-parse", "gh-pages") == first.commit
    assert "already holds this site" in again.summary()


def test_publish_continues_the_remotes_branch_when_no_local_one(tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path)
    first = publish_site(make_site(tmp_path / "b1", ["run-1"]), repo, push=True)
    git(repo, "branch", "-D", "gh-pages")
    git(repo, "fetch", "-q", "origin")
    second = publish_site(make_site(tmp_path / "b2", ["run-2"]), repo, push=True)
    assert second.parent == first.commit
    assert git(tmp_path / "remote.git", "rev-list", "--count", "gh-pages") == "2"


def test_cli_publish_and_identity_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    repo, _ = make_repo(tmp_path)
    for k in IDENTITY:
        monkeypatch.delenv(k)
    monkeypatch.setenv("EMAIL", "")
    (tmp_path / "gitconfig").write_text("[user]\n\tuseConfigOnly = true\n")
    site = make_site(tmp_path, ["run-1"])
    assert main(["publish", "--site", str(site), "--repo", str(repo), "--branch", "pages"]) == 0
    assert capsys.readouterr().out.startswith("committed ")
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", "pages") == (
        "reportgen <reportgen@localhost>|reportgen <reportgen@localhost>")


# --- refusals ----------------------------------------------------------------------------------------


def test_missing_site_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SiteError) as info:
        check_site(tmp_path / "nope")
    assert info.value.message == f"{tmp_path / 'nope'}: no such site folder; run 'reportgen build --out " \
        f"{tmp_path / 'nope'}' first"


@pytest.mark.parametrize("name", ["manifest.json", ".nojekyll"])
def test_folder_that_is_not_a_built_site_is_refused(tmp_path: Path, name: str) -> None:
    site = make_site(tmp_path, ["run-1"])
    (site / name).unlink()
    with pytest.raises(SiteError) as info:
        check_site(site)
    assert info.value.message == f"{site}: has no {name}, so it is not a site built by reportgen; run 'reportgen build'"


def test_site_missing_a_run_page_its_manifest_lists_is_dirty(tmp_path: Path) -> None:
    site = make_site(tmp_path, ["run-1", "run-2"])
    (site / "runs" / "run-1" / "index.html").unlink()
    with pytest.raises(SiteError) as info:
        check_site(site)
    assert info.value.message == (f"{site / 'manifest.json'}: lists 'runs/run-1/index.html' but the site has no "
                                  "such file; the site is dirty, rebuild it with 'reportgen build'")


@pytest.mark.parametrize("where", ["next", "inside"])
def test_build_in_progress_is_refused(tmp_path: Path, where: str) -> None:
    site = make_site(tmp_path, ["run-1"])
    tmp = (site.parent if where == "next" else site) / ".site-tmp-abc"
    tmp.mkdir()
    with pytest.raises(SiteError, match=r"\.site-tmp-abc: a site build is in progress or was interrupted"):
        check_site(site)


def test_build_holding_the_lock_is_refused_and_publish_holds_it_shared(tmp_path: Path) -> None:
    import fcntl

    site = make_site(tmp_path, ["run-1"])
    with open(tmp_path / ".site.lock", "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # what reportgen build holds
        with pytest.raises(SiteError, match=r": a site build is in progress \(.*\.site\.lock is locked\)"):
            publish_site(site, make_repo(tmp_path)[0])
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        with site_read_lock(site):
            with pytest.raises(BlockingIOError):
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # a build cannot start meanwhile


def test_publish_refuses_while_the_builds_own_lock_is_held(tmp_path: Path) -> None:
    """One home for the lock: the lock a build takes (reportgen.site.fs) is the one publish checks."""
    from reportgen.site.fs import exclusive_lock

    site = make_site(tmp_path, ["run-1"])
    with exclusive_lock(site), pytest.raises(SiteError, match="a site build is in progress"):
        publish_site(site, make_repo(tmp_path)[0])


def test_a_moved_aside_site_beside_it_is_an_interrupted_build(tmp_path: Path) -> None:
    from reportgen.site.fs import OLD_PREFIX

    site = make_site(tmp_path, ["run-1"])
    (tmp_path / f"{OLD_PREFIX}host-p1-tag-x").mkdir()
    with pytest.raises(SiteError, match="a site build is in progress or was interrupted"):
        publish_site(site, make_repo(tmp_path)[0])


@pytest.mark.parametrize("remote", ["--upload-pack=touch pwned", "-o", "", "--receive-pack=x"])
def test_a_remote_that_git_would_read_as_an_option_is_refused(tmp_path: Path, remote: str) -> None:
    site = make_site(tmp_path, ["run-1"])
    repo = make_repo(tmp_path)[0]
    with pytest.raises(SiteError, match="must not start with '-'"):
        publish_site(site, repo, remote=remote, push=True)
    assert subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "gh-pages"],
                          capture_output=True).returncode != 0  # nothing committed either


def test_corrupt_manifest_is_refused(tmp_path: Path) -> None:
    site = make_site(tmp_path, ["run-1"])
    (site / "manifest.json").write_text("[1, 2]")
    with pytest.raises(SiteError, match=r"manifest\.json: expected a JSON object; rebuild the site"):
        check_site(site)


def test_symlink_in_site_is_refused(tmp_path: Path) -> None:
    site = make_site(tmp_path, ["run-1"])
    os.symlink("/etc/passwd", site / "passwd")
    with pytest.raises(SiteError, match=r"passwd: is a symbolic link"):
        check_site(site)


def test_not_a_repository_is_refused(tmp_path: Path) -> None:
    site = make_site(tmp_path, ["run-1"])
    (tmp_path / "plain").mkdir()
    with pytest.raises(SiteError) as info:
        publish_site(site, tmp_path / "plain")
    assert info.value.message == f"{tmp_path / 'plain'}: not a git repository; run publish inside one or pass --repo"


def test_checked_out_branch_is_refused(tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path)
    with pytest.raises(SiteError, match=r": main is the checked-out branch; switch to another branch, then publish$"):
        publish_site(make_site(tmp_path, ["run-1"]), repo, branch="main")


def test_bad_branch_name_is_refused(tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path)
    with pytest.raises(SiteError, match=r"^branch 'a\.\.b': not a valid branch name$") as err:
        publish_site(make_site(tmp_path, ["run-1"]), repo, branch="a..b")
    assert err.value.as_flag_message() == "--branch 'a..b': not a valid branch name"


@pytest.mark.parametrize(("branch", "fix"), [("refs/heads/main", "main"), ("refs/heads/gh-pages", "gh-pages"),
                                           ("refs/gh-pages", "gh-pages")])
def test_publish_branch_is_a_branch_name_not_a_ref(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   branch: str, fix: str) -> None:
    """`--branch refs/heads/main` would make a branch literally named so: refused with the fix, nothing changed."""
    repo, _ = make_repo(tmp_path)
    site = make_site(tmp_path, ["run-1"])
    refs = git(repo, "for-each-ref")
    assert main(["publish", "--site", str(site), "--repo", str(repo), "--branch", branch]) == 3
    assert capsys.readouterr().err == (f"reportgen: error: --branch {branch!r}: a full ref name, not a branch name; "
                                       f"give the branch name, e.g. {fix}\n")
    assert git(repo, "for-each-ref") == refs


@pytest.mark.parametrize("branch", ["-b", "--upload-pack=x", "@{-1}", "@", "HEAD", "a\x00b", "main\n", "gh-pages\u202e"])
def test_publish_branch_never_read_as_an_option(tmp_path: Path, branch: str) -> None:
    repo, _ = make_repo(tmp_path)
    refs = git(repo, "for-each-ref")
    with pytest.raises(SiteError, match=r": not a valid branch name$"):
        publish_site(make_site(tmp_path, ["run-1"]), repo, branch=branch)
    assert git(repo, "for-each-ref") == refs


def test_push_to_a_missing_remote_fails_with_one_line(tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path)
    with pytest.raises(SiteError, match=r"'git push' failed: .*nowhere"):
        publish_site(make_site(tmp_path, ["run-1"]), repo, remote="nowhere", push=True)
    assert git(repo, "rev-list", "--count", "gh-pages") == "1"  # the local commit stands; push can be retried


def test_push_rejected_when_the_remote_moved_on(tmp_path: Path) -> None:
    repo, sha = make_repo(tmp_path)
    publish_site(make_site(tmp_path / "b1", ["run-1"]), repo, push=True)
    other = tmp_path / "elsewhere"
    subprocess.run(["git", "clone", "-q", str(tmp_path / "remote.git"), str(other)], check=True)
    git(other, "checkout", "-q", "--orphan", "rewrite")
    git(other, "commit", "-q", "--allow-empty", "-m", "rewritten elsewhere")
    git(other, "push", "-q", "--force", "origin", "rewrite:refs/heads/gh-pages")  # history rewritten elsewhere
    with pytest.raises(SiteError, match=r"'git push' failed: ! \[rejected\] +gh-pages -> gh-pages"):
        publish_site(make_site(tmp_path / "b2", ["run-2"]), repo, push=True)


def test_rejected_push_recovers_after_a_fetch_keeping_both_sides_pages(tmp_path: Path) -> None:
    repo_a, _ = make_repo(tmp_path)
    repo_b = tmp_path / "clone-b"
    subprocess.run(["git", "clone", "-q", str(tmp_path / "remote.git"), str(repo_b)], check=True)
    publish_site(make_site(tmp_path / "a1", ["run-a1"]), repo_a, push=True)
    git(repo_b, "fetch", "-q", "origin")
    publish_site(make_site(tmp_path / "b1", ["run-a1", "run-b1"]), repo_b, push=True)
    with pytest.raises(SiteError, match=r"'git push' failed"):
        publish_site(make_site(tmp_path / "a2", ["run-a1", "run-a2"]), repo_a, push=True)
    git(repo_a, "fetch", "-q", "origin")  # the documented recovery: fetch, then publish again
    result = publish_site(make_site(tmp_path / "a3", ["run-a1", "run-a2"]), repo_a, push=True)
    assert result.pushed
    remote_files = git(tmp_path / "remote.git", "ls-tree", "-r", "--name-only", "gh-pages").splitlines()
    assert {"runs/run-a1/index.html", "runs/run-b1/index.html", "runs/run-a2/index.html"} <= set(remote_files)
    assert git(repo_a, "rev-parse", "gh-pages") == git(tmp_path / "remote.git", "rev-parse", "gh-pages")


def test_branch_moved_during_publish_is_a_conflict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import reportgen.site.publish as publish

    repo, sha = make_repo(tmp_path)
    publish_site(make_site(tmp_path / "b1", ["run-1"]), repo)
    real_commit = publish._commit

    def racing_commit(*args, **kw):  # type: ignore[no-untyped-def]
        git(repo, "update-ref", "refs/heads/gh-pages", sha)  # someone else moves the branch meanwhile
        return real_commit(*args, **kw)

    monkeypatch.setattr(publish, "_commit", racing_commit)
    with pytest.raises(ConflictError, match=r"refs/heads/gh-pages moved while publishing; run 'reportgen publish'"):
        publish_site(make_site(tmp_path / "b2", ["run-2"]), repo)
    assert git(repo, "rev-parse", "gh-pages") == sha
