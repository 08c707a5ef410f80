"""What the object-store tests check on any server (S3, GCS): writers in separate processes (spawned), started
together behind a ``multiprocessing.Event``, uploading synthetic bundles through ``ObjectStore.put_bundle``.

Each check takes the store's URL, its ``bucket/prefix`` as the filesystem names it, and the environment that
points a fresh process at the server."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from pathlib import Path

import pytest
from conftest import run_cli
from factories import synthetic_run, write_synthetic

from reportgen.errors import ConflictError, ExitCode
from reportgen.store.objects import ObjectStore

WRITERS = 8
RUNS_PER_WRITER = 50


def _writer(url: str, folder: str, go: mp.synchronize.Event, env: dict[str, str]) -> None:
    os.environ.update(env)
    go.wait()
    store = ObjectStore.open(url)
    for bundle in sorted(Path(folder).iterdir()):
        store.put_bundle(bundle)


def complete_run_ids(store: ObjectStore) -> list[str]:
    """The runs of ``store`` whose ``run.json`` is uploaded, from a listing of every object (what a reader takes as
    runs; :meth:`ObjectStore.listed_ids` lists uploads under way too)."""
    keys = set(store.fs.find(store.root))
    return [i for i in store.listed_ids() if f"{store.root}/{i}/run.json" in keys]


def _bundles(root: Path, writer: int) -> Path:
    folder = root / f"w{writer}"
    for i in range(RUNS_PER_WRITER):
        write_synthetic(folder, synthetic_run(run_id=f"20261130T000000Z-cpu-w{writer}-{i:03d}", label=f"w{writer}"))
    return folder


def check_concurrent_writers_lose_no_run(url: str, root: str, env: dict[str, str], tmp_path: Path) -> None:
    """``WRITERS`` processes writing ``RUNS_PER_WRITER`` runs each at once: every run listed, each ``run.json`` its
    writer's byte for byte, and ``reportgen runs`` lists them all."""
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(url, str(_bundles(tmp_path, w)), go, env)) for w in range(WRITERS)]
    try:
        for p in procs:
            p.start()
        go.set()  # all writers start uploading together
        for p in procs:
            p.join(300)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0] * WRITERS
    expected = sorted(f"20261130T000000Z-cpu-w{w}-{i:03d}" for w in range(WRITERS) for i in range(RUNS_PER_WRITER))
    store = ObjectStore.open(url)
    assert complete_run_ids(store) == expected
    for w in range(WRITERS):  # every run.json is its writer's, byte for byte
        run_id = f"20261130T000000Z-cpu-w{w}-007"
        assert store.fs.cat(f"{root}/{run_id}/run.json") == (tmp_path / f"w{w}" / run_id / "run.json").read_bytes()
    proc = run_cli("runs", "--store", url, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(line.split("\t")[0] for line in proc.stdout.splitlines()[1:]) == expected


def check_second_write_is_refused(url: str, root: str, tmp_path: Path) -> None:
    """A second bundle with the same run id: refused (exit 6), the first kept byte for byte."""
    first = write_synthetic(tmp_path / "a", synthetic_run(label="first"))
    second = write_synthetic(tmp_path / "b", synthetic_run(label="second"))  # the same run id, other content
    store = ObjectStore.open(url)
    store.put_bundle(first)
    with pytest.raises(ConflictError) as refused:
        store.put_bundle(second)
    assert refused.value.exit_code == ExitCode.CONFLICT and "never overwritten" in refused.value.message
    assert store.fs.cat(f"{root}/{first.name}/run.json") == (first / "run.json").read_bytes()


def _killed_writer(url: str, folder: str, uploading: mp.synchronize.Event, env: dict[str, str]) -> None:
    os.environ.update(env)

    def stop_before_run_json() -> None:
        uploading.set()
        signal.pause()  # killed here: every member is uploaded, run.json is not

    ObjectStore.open(url).put_bundle(Path(folder), before_run_json=stop_before_run_json)


def check_killed_writer_leaves_no_run(url: str, root: str, env: dict[str, str], tmp_path: Path) -> None:
    """A writer killed after every member but before ``run.json``: its objects exist, no run is listed."""
    bundle = write_synthetic(tmp_path / "staging", synthetic_run(with_traces=True))
    ctx = mp.get_context("spawn")
    uploading = ctx.Event()
    proc = ctx.Process(target=_killed_writer, args=(url, str(bundle), uploading, env))
    proc.start()
    try:
        assert uploading.wait(60)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # also when it never got there: no child left behind
        proc.join(30)
    store = ObjectStore.open(url)
    assert store.fs.find(f"{root}/{bundle.name}")  # the traces were uploaded ...
    assert complete_run_ids(store) == [] and store.listed_ids() == [bundle.name]  # ... but no run is visible
    listed = run_cli("runs", "--store", url, cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout.startswith(f"no runs in {url};"), listed.stderr
