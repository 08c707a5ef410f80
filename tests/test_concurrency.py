"""Concurrency: two builds, a build and an import or a profile, a build and a publish, on the same store and
site. Each either finishes correctly or refuses with the documented conflict message; the site is never mixed:
it is byte-identical to a fresh build of exactly the runs its manifest lists.

The overlaps are forced, not hoped for: one process is started through ``_GATED``, which stops it at a chosen
function (inside the build's lock, inside publish's read, just before an import's bundle is renamed into the
store), says so on stdout, and goes on only when the test writes a line to its stdin. No sleeps, no luck.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from factories import chrome_trace, synthetic_run, write_synthetic
from hostile import tree_hash, write_trace

from reportgen.site import build_site, renderer_version
from reportgen.store.loader import load_store
from reportgen.store.writer import STAGING_DIR

ROOT = Path(__file__).resolve().parent.parent
EPOCH = "1800000000"
RUN_A = "20261130T000000Z-cpu-test-abc123"
RUN_B = "20261201T000000Z-cpu-test-bbb222"
CONFLICT_LINE = "reportgen: error: another reportgen build or publish is using {site}; wait for it to finish\n"
GIT_ENV = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1"}


def _start(*argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    full = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH, **GIT_ENV, **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "reportgen", *argv], env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


_GATED = r"""
import importlib, sys
module, name = importlib.import_module(sys.argv[1]), sys.argv[2]
real = getattr(module, name)
def gate(*args, **kwargs):
    setattr(module, name, real)  # once
    print("paused", flush=True)
    sys.stdin.readline()
    return real(*args, **kwargs)
setattr(module, name, gate)
from reportgen.cli import main
sys.exit(main(sys.argv[3:]))
"""


def _start_paused(where: str, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start the CLI stopped at ``where`` (``module:function``); returns once it is there."""
    module, name = where.split(":")
    full = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH, **GIT_ENV, **(env or {})}
    proc = subprocess.Popen([sys.executable, "-c", _GATED, module, name, *argv], env=full, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "paused\n", proc.stderr.read() if proc.stderr else ""
    return proc


def _resume(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate("go\n", timeout=600)
    return proc.returncode, out, err


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out, err


def _manifest_runs(site: Path) -> list[str]:
    return list(json.loads((site / "manifest.json").read_text())["runs"]["run_id"])


_FRESH: dict[tuple[str, ...], str] = {}
"""Tree hash of a fresh build, by renderer version (the tree may change under a long run) and run.json digests."""


def assert_site_is_a_fresh_build_of_its_runs(site: Path, store: Path, scratch: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The site equals, byte for byte, a fresh build of a store holding exactly the runs its manifest lists."""
    listed = _manifest_runs(site)
    key = (renderer_version(), *(f"{r}:{hashlib.sha256((store / r / 'run.json').read_bytes()).hexdigest()}"
                                 for r in listed))
    if key not in _FRESH:
        fresh_store = scratch / "fresh-store"
        shutil.rmtree(scratch, ignore_errors=True)
        fresh_store.mkdir(parents=True)
        for run_id in listed:
            shutil.copytree(store / run_id, fresh_store / run_id)
        monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
        build_site(fresh_store, scratch / "site", "/")
        _FRESH[key] = tree_hash(scratch / "site")
    assert tree_hash(site) == _FRESH[key], f"mixed site: manifest lists {listed}"
    return listed


@pytest.fixture()
def world(tmp_path: Path) -> tuple[Path, Path]:
    """A store with runs A and B and no site yet."""
    store = tmp_path / "store"
    write_synthetic(store, synthetic_run(run_id=RUN_A, with_traces=True))
    write_synthetic(store, synthetic_run(run_id=RUN_B, created_utc="2026-12-01T00:00:00Z"))
    return store, tmp_path / "site"


IN_BUILD_LOCK = "reportgen.site.build:gather"
"""A build stopped here holds the site's lock and has read the old manifest, but written nothing."""


def test_two_builds_at_once(world: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build started while another holds the lock refuses and changes nothing; the first then finishes."""
    store, site = world
    for existing in (False, True):  # into a new folder, then over the site the first round built
        before = assert_site_is_a_fresh_build_of_its_runs(site, store, tmp_path / "scratch", monkeypatch) \
            if existing else None
        first = _start_paused(IN_BUILD_LOCK, "build", "--runs", str(store), "--out", str(site))
        code, out, err = _finish(_start("build", "--runs", str(store), "--out", str(site)))
        assert (code, out, err) == (6, "", CONFLICT_LINE.format(site=site))
        if existing:
            assert _manifest_runs(site) == before
        else:
            assert not site.exists()
        code, out, err = _resume(first)
        assert code == 0 and err == "" and out.startswith(f"built {site}: "), err
        assert assert_site_is_a_fresh_build_of_its_runs(site, store, tmp_path / "scratch", monkeypatch) == [RUN_A, RUN_B]
        assert not [p for p in site.parent.iterdir() if p.name.startswith((".site-tmp-", ".site-old-"))]


def test_a_build_waits_for_nobody_when_the_test_holds_the_lock(world: tuple[Path, Path]) -> None:
    """The lock a build takes is the one beside the site: holding it from here makes every build refuse."""
    from reportgen.site.fs import exclusive_lock

    store, site = world
    site.mkdir()
    with exclusive_lock(site):
        for _ in range(2):
            assert _finish(_start("build", "--runs", str(store), "--out", str(site))) == \
                (6, "", CONFLICT_LINE.format(site=site))
    assert list(site.iterdir()) == []
    assert _finish(_start("build", "--runs", str(store), "--out", str(site)))[0] == 0


def test_build_while_runs_are_imported(world: tuple[Path, Path], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that runs while an import has written its bundle but not yet renamed it into the store sees the old
    set of runs; a build that planned before an import finished lists the old set too; then the next sees both."""
    store, site = world
    traces = tmp_path / "traces"
    traces.mkdir()
    for i in range(2):
        write_trace(traces / f"r{i}.json", chrome_trace(steps=40))
    before = {r.run_id for r in load_store(store)}
    # 1. the import stopped just before its bundle is renamed into place (its temporary folder is in the store)
    imp = _start_paused("reportgen.store.writer:_fsync_dir", "import", str(traces / "r0.json"), "--store", str(store),
                        "--label", "concurrent 0")
    assert [p for p in (store / STAGING_DIR).iterdir() if p.name.startswith(".tmp-")]
    code_b, _, err_b = _finish(_start("build", "--runs", str(store), "--out", str(site)))
    assert code_b == 0, err_b
    assert set(assert_site_is_a_fresh_build_of_its_runs(site, store, tmp_path / "scratch", monkeypatch)) == before
    code_i, out_i, err_i = _resume(imp)
    assert (code_i, err_i) == (0, ""), err_i
    first_new = out_i.split()[2]
    # 2. the build stopped inside its lock, before planning; the import finishes meanwhile: the build lists it
    build = _start_paused(IN_BUILD_LOCK, "build", "--runs", str(store), "--out", str(site))
    code_i, out_i, err_i = _finish(_start("import", str(traces / "r1.json"), "--store", str(store), "--label", "c1"))
    assert (code_i, err_i) == (0, ""), err_i
    code_b, _, err_b = _resume(build)
    assert code_b == 0, err_b
    listed = set(assert_site_is_a_fresh_build_of_its_runs(site, store, tmp_path / "scratch", monkeypatch))
    assert listed == before | {first_new, out_i.split()[2]}
    assert len(load_store(store)) == 4


def test_a_build_that_waited_for_the_lock_plans_from_the_site_the_other_build_left(
        world: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest is read before the lock (to refuse a folder that is not a site) and again under it when it
    changed: a build that read it, then waited while another build added a run, reuses that run's page."""
    store, site = world
    assert _finish(_start("build", "--runs", str(store), "--out", str(site)))[0] == 0
    waiting = _start_paused("reportgen.site.fs:exclusive_lock", "build", "--runs", str(store), "--out", str(site))
    run_c = "20261202T000000Z-cpu-test-ccc333"
    write_synthetic(store, synthetic_run(run_id=run_c, created_utc="2026-12-02T00:00:00Z"))
    code, out, err = _finish(_start("build", "--runs", str(store), "--out", str(site)))
    assert (code, err) == (0, "") and "(1 rendered, 2 unchanged" in out, out
    code, out, err = _resume(waiting)
    assert (code, err) == (0, "") and "(0 rendered, 3 unchanged" in out, out  # a stale manifest: C rendered again
    assert set(assert_site_is_a_fresh_build_of_its_runs(site, store, tmp_path / "scratch", monkeypatch)) == {
        RUN_A, RUN_B, run_c}


def test_two_imports_at_once_store_two_runs(world: tuple[Path, Path], tmp_path: Path) -> None:
    store, _site = world
    trace = write_trace(tmp_path / "t.json", chrome_trace())
    procs = [_start("import", str(trace), "--store", str(store), "--label", "same") for _ in range(3)]
    results = [_finish(p) for p in procs]
    assert [r[0] for r in results] == [0, 0, 0], results
    ids = {r[1].split()[2] for r in results}
    assert len(ids) == 3 and ids <= {r.run_id for r in load_store(store)}
    assert not [p for p in store.iterdir() if p.name.startswith(".") and p.name != ".catalog"]  # no temporary folder
    assert not [p for p in (store / ".catalog").iterdir() if p.name.startswith(".")]


def test_publish_while_building(world: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Publish during a build refuses (the build holds the lock) and commits nothing; a build that starts while a
    publish reads refuses (the publish holds the lock shared) and changes nothing; each then finishes whole."""
    store, site = world
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    gitconfig = {"GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig")}
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    only_a = tmp_path / "store-a"
    shutil.copytree(store / RUN_A, only_a / RUN_A)
    build_site(only_a, site, "/")
    trees = {}
    for source in (only_a, store):
        ref = tmp_path / f"ref-{source.name}"
        build_site(source, ref / "site", "/")
        ref_repo = tmp_path / f"repo-{source.name}"
        subprocess.run(["git", "init", "-q", "-b", "main", str(ref_repo)], check=True)
        code, _, err = _finish(_start("publish", "--site", str(ref / "site"), "--repo", str(ref_repo), env=gitconfig))
        assert code == 0, err
        trees[source.name] = _tree(ref_repo)
    # 1. the build holds the lock: publish refuses, nothing is committed; the build finishes
    build = _start_paused(IN_BUILD_LOCK, "build", "--runs", str(store), "--out", str(site))
    code_p, out_p, err_p = _finish(_start("publish", "--site", str(site), "--repo", str(repo), env=gitconfig))
    assert code_p == 3 and out_p == "" and "build is in progress" in err_p, err_p
    assert subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "gh-pages"]).returncode != 0
    assert _resume(build)[0] == 0
    # 2. publish holds the lock shared while it reads: a build refuses; the publish commits the whole new site
    publish = _start_paused("reportgen.site.publish:_hash_files", "publish", "--site", str(site), "--repo", str(repo),
                            env=gitconfig)
    before = sorted(str(p) for p in site.rglob("*"))
    assert _finish(_start("build", "--runs", str(only_a), "--out", str(site))) == \
        (6, "", CONFLICT_LINE.format(site=site))
    assert sorted(str(p) for p in site.rglob("*")) == before
    code_p, _, err_p = _resume(publish)
    assert code_p == 0, err_p
    assert _tree(repo) == trees[store.name]


def _tree(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "gh-pages^{tree}"], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.slow
def test_build_while_profiling(world: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real profile and builds started during it: every build shows the old runs or the new set, whole."""
    store, site = world
    before = {r.run_id for r in load_store(store)}
    profile = _start("profile", "--device", "cpu", "--shape", "4,8", "--variants", "naive,fused", "--samples", "2",
                     "--warmup", "0", "--quiet", "--store", str(store),
                     env={"TORCHINDUCTOR_CACHE_DIR": str(ROOT / ".cache" / "inductor")})
    states = []
    while profile.poll() is None:
        code, _, err = _finish(_start("build", "--runs", str(store), "--out", str(site)))
        assert code == 0, err
        listed = set(assert_site_is_a_fresh_build_of_its_runs(site, store, tmp_path / "scratch", monkeypatch))
        states.append(listed == before)
        assert listed == before or (listed > before and len(listed) == len(before) + 1)
    code, _, err = _finish(profile)
    assert code == 0, err
    assert len(load_store(store)) == 3


def _store_runs(store: str, writer: int, runs: int, go: object) -> list[str]:
    """One writer of ``test_writers_sharing_one_store_lose_no_run``: waits at the barrier, then stores its runs."""
    go.wait()  # type: ignore[attr-defined]
    failed = []
    for i in range(runs):
        try:
            write_synthetic(Path(store), synthetic_run(run_id=f"20261130T000000Z-cpu-w{writer:02d}-{i:04d}"))
        except Exception as exc:  # noqa: BLE001 - any failure is the test's finding, named
            failed.append(f"{type(exc).__name__}: {exc}")
    return failed


def test_writers_sharing_one_store_lose_no_run(tmp_path: Path) -> None:
    """8 processes, released together by a barrier, store 40 runs each in one folder store, through its one staging
    folder that each writer removes when it leaves it empty: every write succeeds, every run is stored whole, and no
    staging folder is left."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    writers, runs = 8, 40
    store = tmp_path / "results"
    with ctx.Manager() as manager:
        go = manager.Barrier(writers)
        with ctx.Pool(writers) as pool:
            failed = pool.starmap(_store_runs, [(str(store), w, runs, go) for w in range(writers)])
    assert failed == [[]] * writers
    stored = load_store(store)
    assert sorted(r.run_id for r in stored) == sorted(f"20261130T000000Z-cpu-w{w:02d}-{i:04d}" for w in range(writers)
                                                       for i in range(runs))
    assert not (store / STAGING_DIR).exists()
