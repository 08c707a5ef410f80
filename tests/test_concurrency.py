"""Concurrency: two builds, a build and an import or a profile, a build and a publish, started at once on
the same store and site. Each either finishes correctly or refuses with the documented conflict message;
the site is never mixed: it is byte-identical to a fresh build of exactly the runs its manifest lists.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from factories import chrome_trace, synthetic_run, write_synthetic
from hostile import tree_hash, write_trace

from reportgen.bundle import load_store
from reportgen.site import build_site, renderer_version

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


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out, err


def _manifest_runs(site: Path) -> list[str]:
    return [r["run_id"] for r in json.loads((site / "manifest.json").read_text())["runs"]]


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


def test_two_builds_at_once(world: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, site = world
    rng = random.Random(5)
    outcomes = []
    for _ in range(3):
        shutil.rmtree(site, ignore_errors=True)
        first = _start("build", "--runs", str(store), "--out", str(site))
        time.sleep(rng.uniform(0.0, 0.8))
        second = _start("build", "--runs", str(store), "--out", str(site))
        for code, out, err in (_finish(first), _finish(second)):
            outcomes.append(code)
            if code == 6:
                assert (out, err) == ("", CONFLICT_LINE.format(site=site))
            else:
                assert code == 0 and err == "", err
        assert 0 in outcomes[-2:]
        assert assert_site_is_a_fresh_build_of_its_runs(site, store, tmp_path / "scratch", monkeypatch) == [RUN_A, RUN_B]
        assert not [p for p in site.parent.iterdir() if p.name.startswith((".site-tmp-", ".site-old-"))]
    assert 6 in outcomes  # at least once the two really overlapped and the second refused


def test_build_while_runs_are_imported(world: tuple[Path, Path], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that reads the store while an import writes a bundle sees the old set of runs or the new one."""
    store, site = world
    traces = tmp_path / "traces"
    traces.mkdir()
    for i in range(6):
        write_trace(traces / f"r{i}.json", chrome_trace(steps=40))
    rng = random.Random(11)
    for i in range(3):
        before = {r.run_id for r in load_store(store)}
        imp = _start("import", str(traces / f"r{i}.json"), "--store", str(store), "--label", f"concurrent {i}")
        time.sleep(rng.uniform(0.0, 0.6))
        build = _start("build", "--runs", str(store), "--out", str(site))
        code_i, out_i, err_i = _finish(imp)
        code_b, _, err_b = _finish(build)
        assert (code_i, err_i) == (0, "") and code_b == 0, (err_i, err_b)
        new_id = out_i.split()[2]
        listed = set(assert_site_is_a_fresh_build_of_its_runs(site, store, tmp_path / "scratch", monkeypatch))
        assert listed in (before, before | {new_id})
    assert len(load_store(store)) == 5


def test_two_imports_at_once_store_two_runs(world: tuple[Path, Path], tmp_path: Path) -> None:
    store, _site = world
    trace = write_trace(tmp_path / "t.json", chrome_trace())
    procs = [_start("import", str(trace), "--store", str(store), "--label", "same") for _ in range(3)]
    results = [_finish(p) for p in procs]
    assert [r[0] for r in results] == [0, 0, 0], results
    ids = {r[1].split()[2] for r in results}
    assert len(ids) == 3 and ids <= {r.run_id for r in load_store(store)}
    assert not [p for p in store.iterdir() if p.name.startswith(".")]


def test_publish_while_building(world: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Publish during a build refuses (the build holds the lock) or publishes a whole site, old or new; a build
    that starts while the publish reads refuses (the publish holds the lock shared) and changes nothing."""
    store, site = world
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    gitconfig = {"GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig")}
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    only_a = tmp_path / "store-a"
    shutil.copytree(store / RUN_A, only_a / RUN_A)
    build_site(only_a, site, "/")
    trees = set()
    for source in (only_a, store):
        ref = tmp_path / f"ref-{source.name}"
        build_site(source, ref / "site", "/")
        ref_repo = tmp_path / f"repo-{source.name}"
        subprocess.run(["git", "init", "-q", "-b", "main", str(ref_repo)], check=True)
        code, _, err = _finish(_start("publish", "--site", str(ref / "site"), "--repo", str(ref_repo), env=gitconfig))
        assert code == 0, err
        trees.add(_tree(ref_repo))
    rng = random.Random(3)
    for _ in range(3):
        build = _start("build", "--runs", str(store), "--out", str(site))
        time.sleep(rng.uniform(0.0, 1.5))
        code_p, _, err_p = _finish(_start("publish", "--site", str(site), "--repo", str(repo), env=gitconfig))
        code_b, _, err_b = _finish(build)
        if code_b != 0:  # the publish took the lock first: the build refused and the publish saw the old site
            assert (code_b, err_b) == (6, CONFLICT_LINE.format(site=site)), err_b
            assert code_p == 0 and _tree(repo) in trees
            continue
        if code_p == 0:
            assert _tree(repo) in trees
        else:
            assert code_p == 3 and err_p.startswith("reportgen: error: ") and "build is in progress" in err_p, err_p
        shutil.rmtree(site)
        build_site(only_a, site, "/")


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
