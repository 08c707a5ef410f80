"""Crash safety: ``build``, ``profile``, ``import`` and ``publish`` killed with SIGKILL at many points.

After each kill the site is exactly the old one or exactly the new one, the gh-pages branch holds exactly
the old tree or the new one, no stored run is partial or lost, and the next run of the command succeeds
(and clears what the killed one left behind). Two kinds of kill: at seeded random delays over the whole
run of a real process, and at every file-system step (rename, rmtree, write) of the commit phase, where a
random delay rarely lands.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from factories import chrome_trace, synthetic_run, write_synthetic
from hostile import snapshot, stray_temp_entries, tree_hash, write_trace

from reportgen.bundle import load_run, load_store
from reportgen.publish import publish_site
from reportgen.site import build_site

ROOT = Path(__file__).resolve().parent.parent
EPOCH = {"SOURCE_DATE_EPOCH": "1800000000"}
RUN_A = "20261130T000000Z-cpu-test-abc123"
RUN_B = "20261201T000000Z-cpu-test-bbb222"
RUN_C = "20261129T000000Z-cpu-test-ccc333"
GIT_ENV = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1"}

# Runs the CLI with chosen file-system calls wrapped: the process SIGKILLs itself just before call number K
# (counted over all wrapped calls); K=0 never kills and prints the number of calls on stderr at exit.
_KILL_AT_STEP = r"""
import atexit, os, shutil, signal, sys
k = int(sys.argv[1]); calls = [0]
if sys.argv.pop(2) == "no-exchange":  # as on a file system without renameat2(RENAME_EXCHANGE)
    import reportgen.site.fs
    reportgen.site.fs.exchange = lambda a, b: False
def wrap(owner, name):
    real = getattr(owner, name)
    def step(*a, **kw):
        calls[0] += 1
        if calls[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **kw)
    setattr(owner, name, step)
for owner, name in [(os, "rename"), (os, "replace"), (os, "rmdir"), (os, "fsync"), (shutil, "rmtree"),
                    (shutil, "copyfile"), (shutil, "copytree")]:
    wrap(owner, name)
if k == 0:
    atexit.register(lambda: print(f"steps={calls[0]}", file=sys.stderr))
from reportgen.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **EPOCH, **GIT_ENV, **(extra or {})}


def _start(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "reportgen", *argv], env=_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def kill_after(argv: list[str], delay_s: float, env: dict[str, str] | None = None) -> bool:
    """Run the CLI and SIGKILL its whole process group after ``delay_s``; True when it was killed."""
    proc = _start(argv, env)
    try:
        proc.wait(timeout=delay_s)
        return False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return True
    finally:
        proc.communicate()


def timed_run(argv: list[str], env: dict[str, str] | None = None) -> float:
    """Run the CLI to completion (it must succeed) and return its wall time."""
    t0 = time.monotonic()
    proc = _start(argv, env)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return time.monotonic() - t0


def kill_at_step(argv: list[str], step: int, exchange: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a process that SIGKILLs itself just before file-system call number ``step``."""
    mode = "exchange" if exchange else "no-exchange"
    return subprocess.run([sys.executable, "-c", _KILL_AT_STEP, str(step), mode, *argv], env=_env({"REPORTGEN_JOBS": "1"}),
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_build_without_atomic_exchange_recovers_the_site_it_moved_aside(
        old_and_new_site: tuple[Path, Path, Path, str, str]) -> None:
    """Where the folders cannot be exchanged in one step, a kill between the two renames leaves the old site
    aside; the next build puts it back first (and so reuses its pages), then swaps in the new one."""
    store, site, pristine, old, new = old_and_new_site
    argv = ["build", "--runs", str(store), "--out", str(site)]
    dry = kill_at_step(argv, 0, exchange=False)
    assert dry.returncode == 0, dry.stderr
    steps = int(dry.stderr.rsplit("steps=", 1)[1])
    absent = 0
    for step in range(1, steps + 1):
        _restore(site, pristine)
        assert kill_at_step(argv, step, exchange=False).returncode == -signal.SIGKILL
        if site.exists():
            assert tree_hash(site) in (old, new), f"killed before file-system step {step} of {steps}"
            continue
        absent += 1
        (aside,) = [p for p in site.parent.iterdir() if p.name.startswith(".site-old-")]
        assert tree_hash(aside) == old
        proc = kill_at_step(argv, 0, exchange=False)  # the next build puts the old site back, then builds
        assert proc.returncode == 0, proc.stderr
        assert tree_hash(site) == new and stray_temp_entries(site.parent, site) == []
    assert absent >= 1  # the kill between the two renames was hit (leftover clean-up shifts step numbers)


def _two_run_store(root: Path) -> Path:
    """Run A (with traces, its page reused by the next build) and run B (no traces: a quick page)."""
    store = root / "store"
    write_synthetic(store, synthetic_run(run_id=RUN_A, with_traces=True))
    return store


def _add_run_b(store: Path) -> None:
    write_synthetic(store, synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z"))


@pytest.fixture()
def old_and_new_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path, str, str]:
    """(store with A and B, the site of A and C, a pristine copy of that site, old hash, new hash).

    Run C has left the store since the old site was built: the new site keeps its page only if the build
    starts from the old site, so a build that lost the old site (and started afresh) is caught.
    """
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH["SOURCE_DATE_EPOCH"])
    work = tmp_path / "work"
    store = _two_run_store(work)
    gone = write_synthetic(store, synthetic_run(run_id=RUN_C, created_utc="2026-11-29T00:00:00Z"))
    site = work / "site"
    build_site(store, site, "/")
    shutil.rmtree(gone)
    pristine = tmp_path / "pristine-site"
    shutil.copytree(site, pristine)
    _add_run_b(store)
    reference = tmp_path / "ref" / "site"
    shutil.copytree(pristine, reference)
    build_site(store, reference, "/")
    old, new = tree_hash(pristine), tree_hash(reference)
    assert old != new
    return store, site, pristine, old, new


def _restore(site: Path, pristine: Path) -> None:
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(pristine, site)


def test_build_killed_at_random_moments(old_and_new_site: tuple[Path, Path, Path, str, str]) -> None:
    store, site, pristine, old, new = old_and_new_site
    argv = ["build", "--runs", str(store), "--out", str(site)]
    store_before = snapshot(store, listing=False)
    duration = timed_run(argv)
    assert tree_hash(site) == new
    rng = random.Random(20261130)
    outcomes = []
    for _ in range(20):
        _restore(site, pristine)
        killed = kill_after(argv, rng.uniform(0.0, duration * 1.1))
        outcomes.append((killed, tree_hash(site)))
        assert tree_hash(site) in (old, new)
        assert snapshot(store, listing=False) == store_before
        build_site(store, site, "/")  # the next build succeeds and clears what the killed one left
        assert tree_hash(site) == new
        assert stray_temp_entries(site.parent, site) == []
    assert sum(k for k, _ in outcomes) >= 10, outcomes  # most runs really were killed mid-way


def test_build_killed_at_every_file_system_step(old_and_new_site: tuple[Path, Path, Path, str, str]) -> None:
    store, site, pristine, old, new = old_and_new_site
    argv = ["build", "--runs", str(store), "--out", str(site)]
    dry = kill_at_step(argv, 0)
    assert dry.returncode == 0, dry.stderr
    steps = int(dry.stderr.rsplit("steps=", 1)[1])
    assert tree_hash(site) == new and steps >= 5
    for step in range(1, steps + 1):
        _restore(site, pristine)
        proc = kill_at_step(argv, step)
        assert proc.returncode == -signal.SIGKILL, (step, proc.stderr)
        assert tree_hash(site) in (old, new), f"killed before file-system step {step} of {steps}"
    build_site(store, site, "/")
    assert tree_hash(site) == new
    assert stray_temp_entries(site.parent, site) == []


def test_import_killed_at_every_file_system_step(tmp_path: Path) -> None:
    store = _two_run_store(tmp_path)
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank in range(3):
        write_trace(folder / f"rank{rank}.json", chrome_trace(steps=3), compress=rank == 1)
    argv = ["import", str(folder), "--store", str(store)]
    dry = kill_at_step(argv, 0)
    assert dry.returncode == 0, dry.stderr
    steps = int(dry.stderr.rsplit("steps=", 1)[1])
    shutil.rmtree(store / dry.stdout.split()[2])
    assert steps >= 4
    for step in range(1, steps + 1):
        proc = kill_at_step(argv, step)
        assert proc.returncode == -signal.SIGKILL, (step, proc.stderr)
        new = [r.run_id for r in load_store(store) if r.run_id != RUN_A]
        for run_id in new:  # a run that made it is whole
            run = load_run(store / run_id)
            assert len(run.variants) == 3 and all((store / run_id / v.trace_path).is_file() for v in run.variants)
            shutil.rmtree(store / run_id)
        assert [r.run_id for r in load_store(store)] == [RUN_A]
    proc = kill_at_step(argv, 0)  # the next import succeeds and clears the killed ones' temporary folders
    assert proc.returncode == 0, proc.stderr
    assert len(load_store(store)) == 2
    assert stray_temp_entries(store) == []


@pytest.mark.slow
def test_profile_killed_at_random_moments(tmp_path: Path) -> None:
    store = _two_run_store(tmp_path)
    argv = ["profile", "--device", "cpu", "--shape", "4,8", "--variants", "naive,fused", "--samples", "2",
            "--warmup", "0", "--quiet", "--store", str(store)]
    env = {"TORCHINDUCTOR_CACHE_DIR": str(ROOT / ".cache" / "inductor")}
    duration = timed_run(argv, env)
    (first,) = [r.run_id for r in load_store(store) if r.run_id != RUN_A]
    rng = random.Random(7)
    kills = 0
    for _ in range(8):
        kills += kill_after(argv, rng.uniform(0.3, duration * 1.05), env)
        runs = load_store(store)  # never fails: a killed profile leaves no partial run
        for run in runs:
            assert load_run(store / run.run_id) == run
            assert all(v.trace_path is None or (store / run.run_id / v.trace_path).is_file() for v in run.variants)
            if run.run_id not in (RUN_A, first):
                assert [v.name for v in run.variants] == ["naive", "fused"]
    assert kills >= 5
    timed_run(argv, env)  # the next profile succeeds and clears the killed ones' temporary folders
    assert stray_temp_entries(store) == []


# ---------------------------------------------------------------------------------------------
# publish


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=_env()).stdout.strip()


def test_publish_killed_at_random_moments(old_and_new_site: tuple[Path, Path, Path, str, str], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store, site, pristine, _old, _new = old_and_new_site
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    publish_site(pristine, repo)
    old_commit = _git(repo, "rev-parse", "gh-pages")
    old_tree = _git(repo, "rev-parse", "gh-pages^{tree}")
    build_site(store, site, "/")
    site_before = snapshot(site)
    argv = ["publish", "--site", str(site), "--repo", str(repo)]
    env = {"GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig")}
    duration = timed_run(argv, env)
    new_tree = _git(repo, "rev-parse", "gh-pages^{tree}")
    assert new_tree != old_tree
    rng = random.Random(99)
    seen = set()
    for _ in range(20):
        _git(repo, "update-ref", "refs/heads/gh-pages", old_commit)
        kill_after(argv, rng.uniform(0.0, duration * 1.1), env)
        tree = _git(repo, "rev-parse", "gh-pages^{tree}")
        assert tree in (old_tree, new_tree)
        seen.add(tree)
        assert snapshot(site) == site_before
        assert not (repo / ".git" / "refs" / "heads" / "gh-pages.lock").exists()
        publish_site(site, repo)  # the next publish succeeds
        assert _git(repo, "rev-parse", "gh-pages^{tree}") == new_tree
    assert _git(repo, "fsck", "--no-dangling") == ""


def test_only_dead_processes_temporary_folders_on_this_host_are_removed(tmp_path: Path) -> None:
    from reportgen.bundle import make_temp_dir, remove_stale_temp_dirs, temp_owner_tag

    host = temp_owner_tag().rsplit("-p", 1)[0]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    mine = make_temp_dir(tmp_path, "20261130T000000Z-cpu-x")
    names = {"dead": f".tmp-{host}-p{dead}-run-abcd", "other host": f".tmp-otherhost-p{dead}-run-abcd",
             "old style": ".tmp-import-abcd", "not ours": f".site-tmp-{host}-p{dead}-site-abcd"}
    for name in names.values():
        (tmp_path / name).mkdir()
    (tmp_path / "run").mkdir()
    assert remove_stale_temp_dirs(tmp_path, dry_run=True) == [tmp_path / names["dead"]]
    assert (tmp_path / names["dead"]).is_dir()
    assert remove_stale_temp_dirs(tmp_path) == [tmp_path / names["dead"]]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([mine.name, "run", *(v for k, v in names.items() if k != "dead")])
    assert remove_stale_temp_dirs(tmp_path, ".site-tmp-") == [tmp_path / names["not ours"]]
