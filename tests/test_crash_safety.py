"""Crash safety: ``build``, ``profile``, ``import`` and ``publish`` killed with SIGKILL at many points.

After each kill the site is exactly the old one or exactly the new one, the gh-pages branch holds exactly
the old tree or the new one, no stored run is partial or lost, and the next run of the command succeeds
(and clears what the killed one left behind). Two kinds of kill, both deterministic (no timing decides
where a kill lands): at seeded random Python calls over the whole run of a real process, and at every
file-system step (rename, rmtree, write) of the commit phase, where a random call rarely lands.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from factories import chrome_trace, synthetic_run, write_synthetic
from hostile import snapshot, stray_temp_entries, tree_hash, write_trace

from reportgen.site import build_site
from reportgen.site.publish import publish_site
from reportgen.store.loader import load_run, load_store

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


# Runs the CLI and SIGKILLs its process group just before the K-th call of a function of the reportgen
# package (counted with a profile hook, in every thread); K=0 never kills and prints the number of calls.
_KILL_AT_CALL = r"""
import atexit, os, signal, sys, threading
import reportgen
k = int(sys.argv[1]); calls = [0]; home = os.path.dirname(reportgen.__file__)
def hook(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.startswith(home):
        calls[0] += 1
        if calls[0] == k:
            os.killpg(os.getpgrp(), signal.SIGKILL)
sys.setprofile(hook)
threading.setprofile(hook)
if k == 0:
    atexit.register(lambda: print(f"calls={calls[0]}", file=sys.stderr))
from reportgen.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **EPOCH, **GIT_ENV, **(extra or {})}


def _start(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "reportgen", *argv], env=_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def kill_at_call(argv: list[str], call: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI in its own process group, SIGKILLed just before its ``call``-th reportgen function call.

    One worker process and a fixed hash seed make the sequence of calls the same from run to run.
    """
    fixed = {"REPORTGEN_JOBS": "1", "PYTHONHASHSEED": "0", **(env or {})}
    return subprocess.run([sys.executable, "-c", _KILL_AT_CALL, str(call), *argv], env=_env(fixed),
                          capture_output=True, text=True, timeout=600, cwd=ROOT, start_new_session=True)


def count_calls(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Run the CLI to completion (it must succeed) and return how many reportgen calls it made."""
    proc = kill_at_call(argv, 0, env)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.rsplit("calls=", 1)[1])


def seeded_calls(total: int, seed: int, count: int) -> list[int]:
    """``count`` distinct call numbers spread over the run (the last 2 % left out, where it exits)."""
    return sorted(random.Random(seed).sample(range(1, max(2, int(total * 0.98))), count))


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
    absent = runs_aside = 0
    for step in range(1, steps + 1):
        _restore(site, pristine)
        for stray in stray_temp_entries(site.parent):  # each step a trial of its own: the same step numbers
            shutil.rmtree(stray)
        assert kill_at_step(argv, step, exchange=False).returncode == -signal.SIGKILL
        if site.exists():
            if killed_site_state(site, old, new) == "runs-aside":
                runs_aside += 1
                assert kill_at_step(argv, 0, exchange=False).returncode == 0
                assert tree_hash(site) == new and stray_temp_entries(site.parent, site) == []
            continue
        absent += 1
        (aside,) = [p for p in site.parent.iterdir() if p.name.startswith(".site-old-")]
        (carried,) = [p / "runs" for p in site.parent.iterdir() if p.name.startswith(".site-tmp-") and (p / "runs").is_dir()]
        shutil.copytree(carried, aside / "runs")  # the old site is aside, its run folders in the new one
        assert killed_site_state(aside, old, new) in ("old", "old+unlisted")
        shutil.rmtree(aside / "runs")
        proc = kill_at_step(argv, 0, exchange=False)  # the next build puts the old site back, then builds
        assert proc.returncode == 0, proc.stderr
        assert tree_hash(site) == new and stray_temp_entries(site.parent, site) == []
    assert absent >= 1 and runs_aside >= 1  # the kills between the renames of the commit and of the swap were hit


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


def killed_site_state(site: Path, old: str, new: str) -> str:
    """What a killed build left at ``site``: "old", "new", "old+unlisted" (the old site, plus run folders of the
    new build that no list of it names yet), or "runs-aside" (killed between the two renames of the commit: the
    old site without its run folders, which wait in the build's own temporary folder for the next build).
    Anything else fails the test: the site's lists and every page they name are exactly old or new."""
    h = tree_hash(site)
    if h in (old, new):
        return "old" if h == old else "new"
    listed = set(json.loads((site / "manifest.json").read_text())["runs"]["run_id"])
    runs = site / "runs"
    if runs.is_dir():
        with tempfile.TemporaryDirectory() as scratch:
            copy = Path(scratch) / "site"
            shutil.copytree(site, copy, symlinks=True)
            extra = [p for p in (copy / "runs").iterdir() if p.name not in listed]
            for p in extra:
                shutil.rmtree(p)
            assert extra and tree_hash(copy) == old, "a killed build changed what the old site lists"
        return "old+unlisted"
    aside = [p for p in site.parent.iterdir() if p.name.startswith(".site-tmp-") and (p / "runs").is_dir()]
    assert len(aside) == 1, "the site lost its run folders"
    return "runs-aside"


def _restore(site: Path, pristine: Path) -> None:
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(pristine, site)


def test_build_killed_at_random_moments(old_and_new_site: tuple[Path, Path, Path, str, str]) -> None:
    store, site, pristine, old, new = old_and_new_site
    argv = ["build", "--runs", str(store), "--out", str(site)]
    store_before = snapshot(store, listing=False)
    _restore(site, pristine)
    total = count_calls(argv)
    assert tree_hash(site) == new and total > 100
    for call in seeded_calls(total, 20261130, 20):
        _restore(site, pristine)
        proc = kill_at_call(argv, call)
        assert proc.returncode == -signal.SIGKILL, (call, total, proc.stderr)  # really killed mid-way
        killed_site_state(site, old, new)
        assert snapshot(store, listing=False) == store_before
        build_site(store, site, "/")  # the next build succeeds and clears what the killed one left
        assert tree_hash(site) == new
        assert stray_temp_entries(site.parent, site) == []


def test_build_killed_at_every_file_system_step(old_and_new_site: tuple[Path, Path, Path, str, str]) -> None:
    store, site, pristine, old, new = old_and_new_site
    argv = ["build", "--runs", str(store), "--out", str(site)]
    dry = kill_at_step(argv, 0)
    assert dry.returncode == 0, dry.stderr
    steps = int(dry.stderr.rsplit("steps=", 1)[1])
    assert tree_hash(site) == new and steps >= 5
    seen: set[str] = set()
    for step in range(1, steps + 1):
        _restore(site, pristine)
        proc = kill_at_step(argv, step)
        assert proc.returncode == -signal.SIGKILL, (step, proc.stderr)
        seen.add(killed_site_state(site, old, new))
        build_site(store, site, "/")  # the next build succeeds (putting run folders back) and clears the rest
        assert tree_hash(site) == new and stray_temp_entries(site.parent, site) == [], f"after step {step}"
    # every state the commit passes through between wrapped calls (with the exchange, the run folders move and the
    # site is exchanged with no wrapped call between: "runs-aside" is the no-exchange test's)
    assert seen == {"old", "old+unlisted", "new"}


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
    total = count_calls(argv, env)
    (first,) = [r.run_id for r in load_store(store) if r.run_id != RUN_A]
    for call in seeded_calls(total, 7, 8):
        proc = kill_at_call(argv, call, env)
        assert proc.returncode == -signal.SIGKILL, (call, total, proc.stderr)
        runs = load_store(store)  # never fails: a killed profile leaves no partial run
        for run in runs:
            assert load_run(store / run.run_id) == run
            assert all(v.trace_path is None or (store / run.run_id / v.trace_path).is_file() for v in run.variants)
            if run.run_id not in (RUN_A, first):
                assert [v.name for v in run.variants] == ["naive", "fused"]
    count_calls(argv, env)  # the next profile succeeds and clears the killed ones' temporary folders
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
    total = count_calls(argv, env)
    new_tree = _git(repo, "rev-parse", "gh-pages^{tree}")
    assert new_tree != old_tree
    seen = set()
    for call in seeded_calls(total, 99, 20):
        _git(repo, "update-ref", "refs/heads/gh-pages", old_commit)
        proc = kill_at_call(argv, call, env)
        assert proc.returncode == -signal.SIGKILL, (call, total, proc.stderr)
        tree = _git(repo, "rev-parse", "gh-pages^{tree}")
        assert tree in (old_tree, new_tree)
        seen.add(tree)
        assert snapshot(site) == site_before
        assert not (repo / ".git" / "refs" / "heads" / "gh-pages.lock").exists()
        publish_site(site, repo)  # the next publish succeeds
        assert _git(repo, "rev-parse", "gh-pages^{tree}") == new_tree
    assert _git(repo, "fsck", "--no-dangling") == ""


def test_only_dead_processes_temporary_folders_on_this_host_are_removed(tmp_path: Path) -> None:
    from reportgen.store.writer import make_temp_dir, remove_stale_temp_dirs, temp_owner_tag

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
