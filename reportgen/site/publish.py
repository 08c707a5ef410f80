"""``reportgen publish``: commit the built site to a ``gh-pages`` branch, adding and updating only.

Stages: check the site (built, clean, not being built) -> read the branch's current tree into
a temporary index (``GIT_INDEX_FILE``) -> hash the site's files into the object store and add
them to that index -> ``write-tree`` / ``commit-tree`` with the branch head as parent ->
``update-ref`` with the old value as a guard -> ``git push`` when asked.

Git plumbing never touches the user's working tree, index or checked-out branch, and files the
branch already holds (older run pages) are kept: publish only adds and updates.

A site is *dirty* (refused) when a build is in progress (the build's lock ``.<site>.lock`` next to
it is held) or was interrupted (a ``.site-tmp-*`` or ``.site-old-*`` folder next to it or inside it),
or when it does not match its ``manifest.json``: the manifest is not a JSON object, or a file or
run page it lists is missing. Publish holds a shared lock on ``.<site>.lock`` while it reads the
site, so a build cannot swap the folder under it.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from reportgen import __version__
from reportgen.errors import ConflictError, ExitCode, SiteError
from reportgen.site.fs import BUILD_PREFIXES, shared_lock
from reportgen.site.manifest import RUN_PAGE, RUNS_DIR, manifest_pages
from reportgen.store.files import file_kind, read_regular
from reportgen.store.layout import is_safe_relpath
from reportgen.store.outputs import MANIFEST_FILE, NOJEKYLL
from reportgen.text.terminal import terminal_safe

FALLBACK_IDENTITY = {
    "GIT_AUTHOR_NAME": "reportgen",
    "GIT_AUTHOR_EMAIL": "reportgen@localhost",
    "GIT_COMMITTER_NAME": "reportgen",
    "GIT_COMMITTER_EMAIL": "reportgen@localhost",
}
ZERO_OID = "0" * 40


@dataclass(frozen=True)
class PublishResult:
    """What a publish did to the branch."""

    branch: str
    commit: str | None  # None when the branch already held exactly this site
    parent: str | None
    added: int
    updated: int
    unchanged: int
    runs: int
    pushed: bool

    def summary(self) -> str:
        """One line for the terminal."""
        what = (f"committed {self.commit[:12]} to {self.branch}" if self.commit
                else f"{self.branch} already holds this site; nothing committed")
        push = "; pushed" if self.pushed else ""
        return f"{what} ({self.added} added, {self.updated} updated, {self.unchanged} unchanged files){push}"


# --- the site ----------------------------------------------------------------------------------


def check_site(site: Path) -> list[str]:
    """The site's files as POSIX paths relative to it; SiteError when missing, unbuilt or dirty."""
    if not site.is_dir():
        raise SiteError(f"{site}: no such site folder; run 'reportgen build --out {site}' first")
    for name in (MANIFEST_FILE, NOJEKYLL):
        if not (site / name).is_file() and os.path.lexists(site / name):
            raise SiteError(f"{site / name}: is {file_kind(os.lstat(site / name).st_mode)}, not a regular file; "
                            "a published site must hold only regular files, rebuild it")
        if not (site / name).is_file():
            raise SiteError(f"{site}: has no {name}, so it is not a site built by reportgen; run 'reportgen build'")
    _check_no_build_in_progress(site)
    files = list(_site_files(site))
    _check_manifest(site, set(files))
    return files


def _check_no_build_in_progress(site: Path) -> None:
    for folder in (site.resolve().parent, site):
        for p in folder.iterdir():
            if p.name.startswith(BUILD_PREFIXES):
                raise SiteError(f"{p}: a site build is in progress or was interrupted; wait for it or rebuild "
                                "the site, then publish")


def _site_files(site: Path) -> Iterator[str]:
    """Every regular file under ``site`` (symbolic links refused: they would point outside)."""
    for root, dirs, names in os.walk(site):
        dirs.sort()
        for name in sorted(dirs + names):
            p = Path(root) / name
            if p.is_symlink():
                raise SiteError(f"{p}: is a symbolic link; a published site must hold only real files")
        for name in names:
            mode = os.lstat(Path(root) / name).st_mode
            if not stat.S_ISREG(mode):  # git would block reading a FIFO
                raise SiteError(f"{Path(root) / name}: is {file_kind(mode)}, not a regular file; a published site "
                                "must hold only regular files, rebuild it")
        for name in sorted(names):
            rel = (Path(root) / name).relative_to(site).as_posix()
            if not is_safe_relpath(rel) or any(c in rel for c in "\n\r\t"):
                raise SiteError(f"{site / rel!r}: file name cannot be published safely; rebuild the site")
            yield rel


def _check_manifest(site: Path, files: set[str]) -> None:
    """Every run page the manifest lists must be present."""
    path = site / MANIFEST_FILE
    try:
        data = json.loads(read_regular(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SiteError(f"{path}: cannot be read ({exc}); rebuild the site with 'reportgen build'") from None
    if not isinstance(data, dict):
        raise SiteError(f"{path}: expected a JSON object; rebuild the site with 'reportgen build'")
    for rel in manifest_pages(data):
        if rel not in files:
            raise SiteError(f"{path}: lists {rel!r} but the site has no such file; the site is dirty, "
                            "rebuild it with 'reportgen build'")


def count_runs(files: list[str]) -> int:
    """How many run pages (``runs/<id>/index.html``) the site holds."""
    return sum(1 for f in files if f.startswith(f"{RUNS_DIR}/") and f.count("/") == 2 and f.endswith(f"/{RUN_PAGE}"))


# --- git -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Git:
    """``git`` run in one repository with a fixed environment (identity, temporary index)."""

    repo: Path
    env: Mapping[str, str]

    def run(self, *args: str, input_text: str | None = None, index: Path | None = None, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        proc = subprocess.run(["git", "-C", str(self.repo), *args], input=input_text, capture_output=True,
                              text=True, env=env)
        if check and proc.returncode != 0:
            raise SiteError(f"{self.repo}: 'git {args[0]}' failed: {_first_error(proc.stderr)}")
        return proc

    def out(self, *args: str, **kw: object) -> str:
        return self.run(*args, **kw).stdout.strip()  # type: ignore[arg-type]

    def rev(self, ref: str) -> str | None:
        proc = self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return proc.stdout.strip() if proc.returncode == 0 else None


def _first_error(stderr: str) -> str:
    """git's first ``fatal:``/``error:``/``! [rejected]`` line, else its last line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("hint:")]
    errors = [ln for ln in lines if ln.startswith(("fatal:", "error:", "!"))]
    return (errors or lines or ["no message"])[0 if errors else -1]


def open_repo(repo: Path) -> _Git:
    """The repository at ``repo`` (its top level) with an identity to commit as."""
    try:
        proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"], capture_output=True,
                              text=True)
    except FileNotFoundError:
        raise SiteError("git: not found on PATH; install git to publish") from None
    if proc.returncode != 0:
        raise SiteError(f"{repo}: not a git repository; run publish inside one or pass --repo")
    env = dict(os.environ)
    git = _Git(Path(proc.stdout.strip()), env)
    if git.run("var", "GIT_COMMITTER_IDENT", check=False).returncode != 0 or \
            git.run("var", "GIT_AUTHOR_IDENT", check=False).returncode != 0:
        env.update(FALLBACK_IDENTITY)
    return git


def _check_branch(git: _Git, branch: str) -> str:
    """``refs/heads/<branch>``; refuse a bad name, a full ref name, or the branch checked out in the repository."""
    # git reads '-x' as an option and '@' / '@{-1}' as other branches; controls and bidi overrides hide the name
    plain = not branch.startswith("-") and branch != "@" and "@{" not in branch and branch.isprintable()
    if not plain or git.run("check-ref-format", "--branch", branch, check=False).returncode != 0:
        raise SiteError(f"branch {branch[:80]!r}: not a valid branch name", field="branch")
    if branch.startswith("refs/"):  # git would make refs/heads/refs/heads/main
        short = branch.removeprefix("refs/").removeprefix("heads/")
        raise SiteError(f"branch {branch[:80]!r}: a full ref name, not a branch name; give the branch name, "
                        f"e.g. {short[:80] or 'gh-pages'}", field="branch")
    ref = f"refs/heads/{branch}"
    head = git.run("symbolic-ref", "--quiet", "HEAD", check=False).stdout.strip()
    if head == ref:
        raise SiteError(f"{git.repo}: {branch} is the checked-out branch; switch to another branch, then publish")
    return ref


def _tree_files(git: _Git, commit: str | None) -> dict[str, str]:
    """Path -> blob id of every file in ``commit``'s tree (empty for none)."""
    if commit is None:
        return {}
    out: dict[str, str] = {}
    for entry in git.run("ls-tree", "-r", "-z", "--full-tree", commit).stdout.split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            out[path] = meta.split()[2]
    return out


def _hash_files(git: _Git, site: Path, files: list[str]) -> dict[str, str]:
    """Write every site file into the object store; path -> blob id."""
    if not files:
        return {}
    listing = "".join(f"{(site / f).resolve()}\n" for f in files)
    ids = git.out("hash-object", "-w", "--stdin-paths", input_text=listing).splitlines()
    return dict(zip(files, ids, strict=True))


def _mode(path: Path) -> str:
    return "100755" if os.access(path, os.X_OK) else "100644"


def publish_site(site: Path, repo: Path, branch: str = "gh-pages", remote: str = "origin",
                 push: bool = False) -> PublishResult:
    """Commit ``site`` onto ``branch`` of ``repo``, keeping what the branch holds; push if asked."""
    _check_remote(remote)
    git = open_repo(repo)
    ref = _check_branch(git, branch)
    with shared_lock(site):
        files = check_site(site)
        blobs = _hash_files(git, site, files)
        modes = {f: _mode(site / f) for f in files}
    parent = git.rev(ref)
    start = base_commit(git, parent, git.rev(f"refs/remotes/{remote}/{branch}"))
    old_files = _tree_files(git, start)
    added = sum(1 for f in files if f not in old_files)
    updated = sum(1 for f in files if f in old_files and old_files[f] != blobs[f])
    commit = None
    if start is None or added or updated:
        commit = _commit(git, modes, blobs, start, _message(git, count_runs(files)))
        _move_branch(git, ref, commit, parent)
    elif start is not None and start != parent:
        _move_branch(git, ref, start, parent)  # adopt the remote's branch locally so it can be pushed
    pushed = _push(git, remote, ref) if push else False
    return PublishResult(branch, commit, start, added, updated, len(files) - added - updated, count_runs(files), pushed)


def _check_remote(remote: str) -> None:
    """Refuse a remote that git would read as an option (``--upload-pack=...``) or that is empty."""
    if not remote or remote.startswith("-") or any(c in remote for c in "\0\n\r"):
        raise SiteError(f"remote {remote[:60]!r}: not a remote name or URL (it must not start with '-'); "
                        "pass the name of a remote, e.g. origin", field="remote")


def base_commit(git: _Git, local: str | None, remote_tip: str | None) -> str | None:
    """The commit to build on: the local branch, unless the fetched remote branch is ahead or has diverged.

    After a rejected push and a fetch, the remote's tip wins: the new commit carries the whole
    site anyway (old run pages included), so building on the remote keeps both sides' pages
    and the next push is a fast-forward. A local commit that was never pushed is left behind.
    """
    if local is None or remote_tip is None or local == remote_tip:
        return local or remote_tip
    is_ancestor = git.run("merge-base", "--is-ancestor", remote_tip, local, check=False).returncode == 0
    return local if is_ancestor else remote_tip


def _message(git: _Git, runs: int) -> str:
    """``reportgen <version>: site built from <source sha> (<n> runs)``."""
    sha = git.rev("HEAD") or "an unborn branch"
    return f"reportgen {__version__}: site built from {sha} ({runs} runs)"


def _commit(git: _Git, modes: dict[str, str], blobs: dict[str, str], start: str | None, message: str) -> str:
    """A commit whose tree is ``start``'s plus the site's files, built in a temporary index."""
    with tempfile.TemporaryDirectory(prefix="reportgen-publish-") as tmp:
        index = Path(tmp) / "index"
        if start is None:
            git.run("read-tree", "--empty", index=index)
        else:
            git.run("read-tree", start, index=index)
        info = "".join(f"{modes[f]} {blobs[f]}\t{f}\0" for f in modes)
        git.run("update-index", "--add", "--replace", "-z", "--index-info", input_text=info, index=index)
        tree = git.out("write-tree", index=index)
    args = ["commit-tree", tree, "-m", message] + (["-p", start] if start else [])
    return git.out(*args)


def _move_branch(git: _Git, ref: str, commit: str, parent: str | None) -> None:
    """Point ``ref`` at ``commit`` only if it still is where we started (no lost concurrent publish)."""
    proc = git.run("update-ref", "-m", "reportgen publish", ref, commit, parent or ZERO_OID, check=False)
    if proc.returncode != 0:
        raise ConflictError(f"{git.repo}: {ref} moved while publishing; run 'reportgen publish' again")


def _push(git: _Git, remote: str, ref: str) -> bool:
    """``git push <remote> <branch>``: a fast-forward, since each commit has the branch as parent."""
    git.run("push", "--quiet", remote, f"{ref}:{ref}")
    return True


@dataclass(frozen=True)
class PublishRequest:
    """What to publish where: the built site, the repository, its branch, and whether to push it to ``remote``."""

    site: Path
    repo: Path
    branch: str = "gh-pages"
    remote: str = "origin"
    push: bool = False


def run_publish_command(request: PublishRequest) -> int:
    """Publish ``request.site`` and print one line."""
    result = publish_site(request.site, request.repo, request.branch, request.remote, request.push)
    print(terminal_safe(result.summary()))
    return ExitCode.OK
