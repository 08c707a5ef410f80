"""The store's and the site's files as reportgen alone writes them: no output flag writes into them, no two ``rm``
lose a withdrawal, no FIFO among them hangs a command, no linked profile folder brings outside files in, and
``build --strict`` fails on a warning with the old site untouched.

Every command runs as a user runs it (a subprocess, with a timeout so a hang fails instead of blocking the suite).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from factories import chrome_trace, synthetic_run, write_synthetic
from hostile import snapshot, write_trace

from reportgen.errors import ConflictError
from reportgen.site import build_site
from reportgen.store.withdrawn import Withdrawal, read_withdrawn, write_withdrawn

RUN_A = "20261130T000000Z-cpu-test-abc123"
RUN_B = "20261201T000000Z-cpu-test-bbb222"
HANG_LIMIT_S = 60
"""A command that has not answered by then is hanging: the test fails instead of waiting for ever."""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store with runs A and B and the site built from it (copied per test by ``world``)."""
    root = tmp_path_factory.mktemp("built")
    store = root / "results"
    write_synthetic(store, synthetic_run(run_id=RUN_A, with_traces=True))
    write_synthetic(store, synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z"))
    build_site(store, root / "site", "/", jobs=1)
    return store, root / "site"


@pytest.fixture()
def world(built: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    import shutil

    store, site = tmp_path / "results", tmp_path / "site"
    shutil.copytree(built[0], store, symlinks=True)
    shutil.copytree(built[1], site, symlinks=True)
    return store, site


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, timeout=HANG_LIMIT_S)


def _listing(folder: Path) -> set[str]:
    return set(os.listdir(folder))


# --- item 4: one output guard --------------------------------------------------------------------------------


OUTPUTS = {
    "a bundle's run.json": ("results/{a}/run.json", "inside the results folder results"),
    "the site's front page": ("site/index.html", "inside the site {t}/site"),
    "a new file in the store": ("results/comment.md", "inside the results folder results"),
    "a new file in a run page's folder": ("site/runs/{a}/x.md", "inside the site {t}/site"),
    "a path through ..": ("elsewhere/../site/index.html", "inside the site {t}/site"),
    "a link to the front page": ("link.html", "inside the site {t}/site"),
    "a path through a linked folder": ("sitelink/index.md", "inside the site {t}/site"),
}


@pytest.mark.parametrize("case", sorted(OUTPUTS))
def test_compare_output_never_lands_in_the_store_or_a_site(world: tuple[Path, Path], tmp_path: Path,
                                                            case: str) -> None:
    store, site = world
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link.html").symlink_to(site / "index.html")
    (tmp_path / "sitelink").symlink_to(site, target_is_directory=True)
    before = snapshot(store, site)
    rel, where = OUTPUTS[case]
    output = rel.format(a=RUN_A)
    proc = _cli("compare", RUN_A, RUN_B, "--store", "results", "--output", output, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"reportgen: error: --output {output}: is {where.format(t=tmp_path)}, which only "
                           "reportgen writes; write it outside (nothing was changed)\n")
    assert proc.stdout == ""
    assert snapshot(store, site) == before


def test_output_in_another_stores_bundle_is_refused_by_its_run_json(world: tuple[Path, Path],
                                                                    tmp_path: Path) -> None:
    """A bundle is recognised by its run.json even when --store names another folder."""
    store, site = world
    before = snapshot(store, site)
    target = store / RUN_B / "run.json"
    proc = _cli("compare", str(store / RUN_A), str(store / RUN_B), "--store", str(tmp_path / "other"),
                "--output", str(target))
    assert proc.returncode == 2
    assert proc.stderr == (f"reportgen: error: --output {target}: is inside the run bundle {store / RUN_B}, which only "
                           "reportgen writes; write it outside (nothing was changed)\n")
    assert snapshot(store, site) == before


def test_compare_output_outside_is_still_written(world: tuple[Path, Path], tmp_path: Path) -> None:
    store, _site = world
    proc = _cli("compare", RUN_A, RUN_B, "--store", str(store), "--output", str(tmp_path / "comment.md"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "comment.md").read_text().startswith("<!-- reportgen-compare -->")


def test_output_path_a_thousand_folders_deep_is_written_not_an_internal_error(tmp_path: Path) -> None:
    """`--output d/d/.../x` (2,000 levels, under PATH_MAX): its folders are made one level at a time, not by a
    recursion per level (that was RecursionError, exit 70); the store is unchanged."""
    store = tmp_path / "results"
    write_synthetic(store, synthetic_run(run_id=RUN_A))
    write_synthetic(store, synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z"))
    before = snapshot(store, listing=False)
    deep = "d/" * 2000 + "comment.md"
    try:
        proc = _cli("compare", RUN_A, RUN_B, "--store", str(store), "--output", deep, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-500:]
        assert (tmp_path / deep).read_text().startswith("<!-- reportgen-compare -->")
        assert snapshot(store, listing=False) == before
    finally:  # bottom up, in a loop: pytest's recursive clean-up would hit the same recursion limit
        level = tmp_path / deep
        level.unlink(missing_ok=True)
        for level in (tmp_path / deep).parents:
            if level == tmp_path:
                break
            if level.exists():
                level.rmdir()


def test_ab_and_doctor_outputs_never_land_in_the_store_or_a_site(world: tuple[Path, Path], tmp_path: Path) -> None:
    store, site = world
    (tmp_path / "base").mkdir()
    (tmp_path / "head").mkdir()
    before = snapshot(store, site)
    proc = _cli("ab", "--base", "base", "--head", "head", "--store", "results", "--output", "site/index.md",
                cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, f"reportgen: error: --output site/index.md: is inside the site "
                                                 f"{site}, which only reportgen writes; write it outside (nothing "
                                                 "was changed)\n")
    proc = _cli("doctor", "--device", "neuron", "--out", "results/diag", cwd=tmp_path,)
    assert (proc.returncode, proc.stderr) == (2, "reportgen: error: --out results/diag: is inside the results folder "
                                                 "results, which only reportgen writes; write it outside (nothing was "
                                                 "changed)\n")
    proc = _cli("doctor", "--device", "neuron", "--out", str(site / "runs" / "diag"))
    assert proc.returncode == 2 and f"is inside the site {site}," in proc.stderr
    assert snapshot(store, site) == before


@pytest.mark.parametrize("kind", ["file", "link"])
def test_doctor_never_replaces_or_writes_through_its_archive(tmp_path: Path, kind: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    archive = tmp_path / "diag.tar.gz"
    if kind == "file":
        archive.write_text("an earlier archive")
    else:
        archive.symlink_to(victim)
    before = snapshot(tmp_path)
    proc = _cli("doctor", "--device", "neuron", "--out", str(tmp_path / "diag"))
    assert proc.returncode == 6
    assert proc.stderr == (f"reportgen: error: --out {tmp_path / 'diag'}: {archive} already exists; move it away or "
                           "pick a new folder (nothing was changed)\n")
    assert snapshot(tmp_path) == before


def test_doctor_archive_appearing_during_the_run_is_left_alone(tmp_path: Path) -> None:
    """The archive is created O_EXCL | O_NOFOLLOW: a link that appears after the check is not written through."""
    from reportgen.devices.neuron import doctor

    out = tmp_path / "diag"
    out.mkdir()
    (out / "diagnostics.json").write_text("{}")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "diag.tar.gz").symlink_to(victim)
    with pytest.raises(ConflictError, match="appeared while the doctor ran"):
        doctor._write_archive(out, tmp_path / "diag.tar.gz")
    assert victim.read_text() == "keep me" and (tmp_path / "diag.tar.gz").is_symlink()


# --- item 5: concurrent withdrawals ---------------------------------------------------------------------------


_GATED = r"""
import importlib, sys
module, name = importlib.import_module(sys.argv[1]), sys.argv[2]
real = getattr(module, name)
def gate(*args, **kwargs):
    print("paused", flush=True)
    sys.stdin.readline()
    return real(*args, **kwargs)
setattr(module, name, gate)
from reportgen.cli import main
sys.exit(main(sys.argv[3:]))
"""
BEFORE_THE_UPDATE = ("reportgen.store.runs", "load_run")
"""``rm`` has found its run and is about to load it, then read, change and write withdrawn.json."""


def test_concurrent_withdrawals_are_never_lost(tmp_path: Path) -> None:
    """Twelve ``rm`` of twelve runs, all held at a barrier just before their update and released together, on a
    withdrawn.json of 20,000 entries: every one exits 0 and every withdrawal is there afterwards."""
    store = tmp_path / "results"
    ids = [f"20261130T0000{i:02d}Z-cpu-test-{i:06x}" for i in range(12)]
    for i, run_id in enumerate(ids):
        write_synthetic(store, synthetic_run(run_id=run_id, created_utc=f"2026-11-30T00:00:{i:02d}Z"))
    old = {f"old-{i}": Withdrawal(f"old-{i}", "2026-01-01T00:00:00Z", "earlier") for i in range(20_000)}
    write_withdrawn(store, old)
    procs = [subprocess.Popen([sys.executable, "-c", _GATED, *BEFORE_THE_UPDATE, "rm", run_id, "--reason", "bad",
                               "--store", str(store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for run_id in ids]
    for p in procs:  # the barrier: every process is at the gate before any goes on
        assert p.stdout is not None and p.stdout.readline() == "paused\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [p.communicate(timeout=HANG_LIMIT_S) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(ids), [err for _out, err in results]
    withdrawn = read_withdrawn(store)
    assert sorted(set(withdrawn) - set(old)) == ids
    assert len(withdrawn) == len(old) + len(ids)


# --- item 7: a FIFO among the store's or the site's files ------------------------------------------------------


FIFO_CASES = {
    "build: withdrawn.json": ("results/withdrawn.json", ["build", "--runs", "results", "--out", "site"]),
    "compare: withdrawn.json": ("results/withdrawn.json", ["compare", RUN_A, RUN_B, "--store", "results"]),
    "compare latest: withdrawn.json": ("results/withdrawn.json", ["compare", "latest~1", "latest",
                                                                  "--store", "results"]),
    "runs: withdrawn.json": ("results/withdrawn.json", ["runs", "--store", "results"]),
    "rm: withdrawn.json": ("results/withdrawn.json", ["rm", RUN_A, "--reason", "x", "--store", "results"]),
    "rm: its lock file": ("results/.withdrawn.lock", ["rm", RUN_A, "--reason", "x", "--store", "results"]),
    "build: manifest.json": ("site/manifest.json", ["build", "--runs", "results", "--out", "site"]),
    "publish: manifest.json": ("site/manifest.json", ["publish", "--site", "site", "--repo", "repo"]),
    "publish: a page": ("site/runs/extra.html", ["publish", "--site", "site", "--repo", "repo"]),
}
FIFO_MESSAGES = {
    "results/withdrawn.json": "results/withdrawn.json: is a FIFO, not a regular file; delete it, or restore it "
                              "from git",
    "results/.withdrawn.lock": "results/.withdrawn.lock: is a FIFO, not a regular file; delete it",
    "site/manifest.json": "site/manifest.json: is a FIFO, not a regular file; delete it, or restore the site "
                          "(nothing was changed)",
}


@pytest.mark.parametrize("case", sorted(FIFO_CASES))
def test_a_fifo_among_store_or_site_files_is_refused_not_waited_on(world: tuple[Path, Path], tmp_path: Path,
                                                                   case: str) -> None:
    store, site = world
    rel, argv = FIFO_CASES[case]
    (tmp_path / rel).unlink(missing_ok=True)
    os.mkfifo(tmp_path / rel)
    if "publish" in case:
        subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    before = snapshot(store, site, listing=False)
    proc = _cli(*argv, cwd=tmp_path)  # a hang is a TimeoutExpired: the test fails
    assert proc.returncode == 3, proc.stderr
    (line,) = proc.stderr.splitlines()
    if "publish" in case:
        assert line == f"reportgen: error: {rel}: is a FIFO, not a regular file; a published site must hold only " \
                       "regular files, rebuild it"
    else:
        assert line == f"reportgen: error: {FIFO_MESSAGES[rel]}"
    assert snapshot(store, site, listing=False) == before
    assert _listing(tmp_path) <= {"results", "site", "repo", ".site.lock"}  # a build's lock beside the site


# --- item 8: linked folders in a profile_output/ ---------------------------------------------------------------


def _session(folder: Path, op: str) -> Path:
    folder.mkdir(parents=True)
    write_trace(folder / "trace.json", chrome_trace(ops=(op,)))
    for name in ("neff_1_vnc_0.neff", "profile_nc_0_session_0.ntff"):
        (folder / name).write_bytes(f"{op} {name}".encode())
    return folder


@pytest.mark.parametrize("linked", ["pid folder", "session folder", "file"])
def test_a_linked_folder_in_profile_output_brings_nothing_from_outside(tmp_path: Path, linked: str) -> None:
    outside = tmp_path / "outside"
    capture = tmp_path / "profile_output"
    _session(capture / "i-0abc_pid_1" / "20261130_000000", "aten::real_op")
    secret = _session(outside / "i-0abc_pid_9" / "20261130_000000", "secret_op")
    if linked == "pid folder":
        link = capture / "i-0abc_pid_9"
        link.symlink_to(outside / "i-0abc_pid_9", target_is_directory=True)
    elif linked == "session folder":
        link = capture / "i-0abc_pid_1" / "20261130_000009"
        link.symlink_to(secret, target_is_directory=True)
    else:
        link = capture / "i-0abc_pid_1" / "20261130_000000" / "neff_9_vnc_0.neff"
        link.symlink_to(secret / "neff_1_vnc_0.neff")
    store, site = tmp_path / "results", tmp_path / "site"
    proc = _cli("import", str(capture), "--store", str(store))
    assert proc.returncode == 0, proc.stderr
    (bundle,) = [p for p in store.iterdir() if not p.name.startswith(".")]
    run = json.loads((bundle / "run.json").read_text())
    assert [v["name"] for v in run["variants"]] == ["i-0abc_pid_1-20261130_000000"]
    assert f"skipped symbolic links in the profile folder: {link.relative_to(capture)}" in run["notes"]
    proc = _cli("build", "--runs", str(store), "--out", str(site))
    assert proc.returncode == 0, proc.stderr
    leaked = [p for root in (store, site) for p in root.rglob("*") if p.is_file() and b"secret_op" in p.read_bytes()]
    assert leaked == []


def test_a_profile_output_reached_only_through_links_is_refused(tmp_path: Path) -> None:
    outside = _session(tmp_path / "outside" / "i-0abc_pid_9" / "20261130_000000", "secret_op").parent
    capture = tmp_path / "profile_output"
    capture.mkdir()
    (capture / "i-0abc_pid_9").symlink_to(outside, target_is_directory=True)
    store = tmp_path / "results"
    proc = _cli("import", str(capture), "--store", str(store))
    assert proc.returncode == 3
    assert proc.stderr == (f"reportgen: error: {capture}: no trace files (*.json, *.json.gz) and no TorchNeuron "
                           "profile_output/ (*_pid_*/*/trace.json) in this folder (symbolic links are not followed: "
                           "i-0abc_pid_9); pass a trace file or a profile_output/ folder\n")
    assert not store.exists()


# --- item 12: build --strict -----------------------------------------------------------------------------------


def test_build_strict_fails_on_a_warning_and_keeps_the_old_site(world: tuple[Path, Path], tmp_path: Path) -> None:
    """A bundle broken after its page was published: a build trusts it (bundles are written once) unless told to
    ``--verify``; then ``--strict`` turns the warning into exit 3 and the site is left as it was."""
    store, site = world
    (store / RUN_B / "run.json").write_text("{ not json")
    proc = _cli("build", "--strict", "--runs", str(store), "--out", str(site))
    assert (proc.returncode, proc.stderr) == (0, "") and "(0 rendered, 2 unchanged" in proc.stdout
    before = snapshot(site, listing=False)
    proc = _cli("build", "--strict", "--verify", "--runs", str(store), "--out", str(site))
    assert proc.returncode == 3 and proc.stdout == ""
    warning, error = proc.stderr.splitlines()
    assert warning.startswith(f"reportgen: warning: {store / RUN_B / 'run.json'}: ") and warning.endswith(
        f"(run {RUN_B})")
    assert error == (f"reportgen: error: {site}: not changed: --strict and 1 warning(s) above (first: run {RUN_B}); "
                     "fix or withdraw the run, or build without --strict")
    assert snapshot(site, listing=False) == before
    assert _listing(tmp_path) == {"results", "site", ".site.lock"}  # no temporary folder left, only the lock
    proc = _cli("build", "--verify", "--runs", str(store), "--out", str(site))  # without --strict: a warning, exit 0
    assert proc.returncode == 0 and f"(run {RUN_B} left out of this build)" in proc.stderr


def test_written_files_get_the_mode_a_new_file_gets_not_a_temporary_files(world: tuple[Path, Path],
                                                                         tmp_path: Path) -> None:
    """compare --output, withdrawn.json and the other atomic writes: 0666 less the umask (0644 under 022), not the
    0600 of the temporary file they are renamed from (which a colleague or a web server could not read)."""
    import stat
    import subprocess
    import sys

    store, _site = world
    script = ("import os, sys; os.umask(0o022); from reportgen.cli import main; sys.exit(main(sys.argv[1:]))")
    for argv in (["compare", RUN_A, RUN_B, "--store", str(store), "--output", str(tmp_path / "comment.md")],
                 ["rm", RUN_A, "--reason", "test", "--store", str(store)]):
        proc = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    for path in (tmp_path / "comment.md", store / "withdrawn.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_a_folder_that_is_not_a_store_is_one_line_not_an_error_per_subfolder(world: tuple[Path, Path],
                                                                            tmp_path: Path) -> None:
    """`runs --store docs/` used to print one 'is not a run bundle' line per subfolder; `build --runs BUNDLE` built an
    empty site with warnings. Each is one line naming the fix, exit 3, and the site is unchanged."""
    store, site = world
    docs = tmp_path / "docs"
    for name in ("images", "guide", "api"):
        (docs / name).mkdir(parents=True)
    proc = _cli("runs", "--store", str(docs))
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1, proc.stderr
    assert "not a results store (none of its 3 folder(s) holds a run.json)" in proc.stderr
    before = snapshot(site)
    proc = _cli("build", "--runs", str(store / RUN_A), "--out", str(site))
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{store / RUN_A}: is a run bundle, not a store; pass the folder that holds it ({store})" in proc.stderr
    proc = _cli("build", "--runs", str(docs), "--out", str(site))  # the build reads only until a bundle: all 3 here
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1, proc.stderr
    assert "not a results store (none of its 3 folder(s) holds a run.json)" in proc.stderr
    assert snapshot(site) == before


def test_a_run_id_is_checked_whole() -> None:
    """A run id is a folder name and a URL path segment as it is: no newline anywhere (a ``$`` matched before a
    final one), no dots in a row, no leading dash, at most 160 characters, ASCII letters, digits and ``._-`` only."""
    from reportgen.store.layout import is_valid_run_id

    good = ["abc", "a" * 160, "x.y_z-1", "20261130T045500Z-cpu-1a2b3c"]
    bad = ["abc\n", "\nabc", "ab\ncd", "a..b", "-a", "a" * 161, "", "a b", "a/b", "ä"]
    assert [i for i in good if not is_valid_run_id(i)] == [] and [i for i in bad if is_valid_run_id(i)] == []
