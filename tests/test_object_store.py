"""Stores as URLs: a scheme reportgen cannot serve is refused before any work, and an ``s3://`` store on a real
S3-compatible server (moto's threaded server on 127.0.0.1) is written create-only, whole or not at all,
by many writers at once.

Writers in the concurrency tests are separate processes (spawned) that upload synthetic bundles through the
store writer API (``ObjectStore.put_bundle``), started together behind a ``multiprocessing.Event``.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli
from factories import synthetic_run, write_synthetic
from hostile import snapshot
from object_writers import (
    check_concurrent_writers_lose_no_run,
    check_killed_writer_leaves_no_run,
    check_second_write_is_refused,
)

from reportgen.cli import main
from reportgen.errors import ExitCode
from reportgen.store.objects import ObjectStore

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

STORE_COMMANDS = (["runs"], ["rm", "x", "--reason", "r"], ["build"], ["compare", "a", "b"],
                  ["import", "trace.json"], ["profile"], ["ab", "--base", "base", "--head", "head"])
TRACE = Path(__file__).parent / "data" / "traces" / "cpu_only.trace.json.gz"


def _store_flag(command: list[str], url: str) -> list[str]:
    return [*command, "--runs" if command[0] == "build" else "--store", url]


@pytest.mark.parametrize("url", ["abfs://container/runs", "http://example.com/runs", "ftp://h/x"])
@pytest.mark.parametrize("command", STORE_COMMANDS, ids=lambda c: c[0])
def test_store_url_with_an_unserved_scheme_is_refused(url: str, command: list[str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base").mkdir()
    (tmp_path / "head").mkdir()
    before = snapshot(tmp_path)
    assert main(_store_flag(command, url)) == ExitCode.USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and url.split(":")[0] + "://" in err and "s3://bucket/prefix" in err
    assert "gs://bucket/prefix" in err
    assert snapshot(tmp_path) == before  # no folder named 'abfs:' or 'http:' made


@pytest.mark.parametrize("where", ["env", "config"])
def test_store_url_from_environment_or_config_is_checked_too(where: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    if where == "env":
        monkeypatch.setenv("REPORTGEN_STORE", "abfs://container/runs")
    else:
        (tmp_path / "reportgen.toml").write_text('store = "abfs://container/runs"\n')
    before = snapshot(tmp_path)
    assert main(["runs"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert ("$REPORTGEN_STORE" if where == "env" else "reportgen.toml: store") in err and "abfs://" in err
    assert snapshot(tmp_path) == before


def test_store_url_credentials_are_refused_and_never_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("s3://AKIAEXAMPLE:s3cr3tkey@bucket/runs", "s3://bucket/runs?X-Amz-Signature=s3cr3tkey"):
        assert main(["runs", "--store", url]) == ExitCode.USAGE
        err = capsys.readouterr().err
        assert "s3cr3tkey" not in err and "AKIAEXAMPLE" not in err and "standard AWS chain" in err
    assert os.listdir(tmp_path) == []


def test_s3_store_without_the_extra_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if s3fs were not installed
    assert main(["runs", "--store", "s3://bucket/runs"]) == ExitCode.USAGE
    assert "pip install 'reportgen[s3]'" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_file_url_store_is_that_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "team" / "results"
    write_synthetic(store, synthetic_run())
    assert main(["runs", "--store", f"file://{store}"]) == ExitCode.OK
    assert synthetic_run().run_id in capsys.readouterr().out
    assert main(["runs", "--store", "file://team/results"]) == ExitCode.USAGE  # a host, not a folder
    assert "file:///absolute/folder" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["team"]


# --- a real S3-compatible server -------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 and a free port, for this module."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A fresh bucket; credentials and the endpoint reach s3fs through botocore's standard variables."""
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL_S3": s3_endpoint, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    name = "b-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    import boto3

    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return name


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "XDG_"))}


def test_concurrent_writers_to_s3_lose_no_run(bucket: str, tmp_path: Path) -> None:
    check_concurrent_writers_lose_no_run(f"s3://{bucket}/runs", f"{bucket}/runs", _env(), tmp_path)


def test_second_write_of_a_run_id_to_s3_is_refused(bucket: str, tmp_path: Path) -> None:
    check_second_write_is_refused(f"s3://{bucket}/runs", f"{bucket}/runs", tmp_path)


def test_writer_killed_mid_upload_leaves_no_run_visible(bucket: str, tmp_path: Path) -> None:
    check_killed_writer_leaves_no_run(f"s3://{bucket}/runs", f"{bucket}/runs", _env(), tmp_path)


def test_import_rm_and_runs_through_an_s3_store(bucket: str, tmp_path: Path) -> None:
    url = f"s3://{bucket}/runs"
    imported = run_cli("import", str(TRACE), "--store", url, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    run_id = ObjectStore.open(url).listed_ids()[0]
    assert f"uploaded {run_id} to {url}/{run_id}" in imported.stdout
    removed = run_cli("rm", run_id, "--reason", "bad host", "--store", url, cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr
    listed = run_cli("runs", "--all", "--store", url, cwd=tmp_path)
    assert "WITHDRAWN (bad host)" in listed.stdout, listed.stderr
    assert not any(p.name.endswith(":") for p in tmp_path.iterdir())  # nothing written to a local 's3:' folder


def test_unreachable_s3_store_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "s3cr3tkey", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}", "AWS_MAX_ATTEMPTS": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("runs", "--store", "s3://bucket/runs", env=env, cwd=tmp_path)
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stderr
    assert proc.stderr.count("\n") == 1 and "s3://bucket/runs: cannot list the runs" in proc.stderr
    assert "s3cr3tkey" not in proc.stderr + proc.stdout


def test_build_and_compare_read_an_s3_store(bucket: str, tmp_path: Path) -> None:
    url = f"s3://{bucket}/runs"
    store = ObjectStore.open(url)
    base = synthetic_run(run_id="20261130T000000Z-cpu-test-aaa111", with_traces=True)
    head = synthetic_run(run_id="20261201T000000Z-cpu-test-bbb222", created_utc="2026-12-01T00:00:00Z",
                         times_us={"naive": 100.0, "fused": 60.0, "compiled": 60.0}, with_traces=True)
    for run in (base, head):
        store.put_bundle(write_synthetic(tmp_path / "staging", run))
    built = run_cli("build", "--runs", url, "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert all(r.run_id in (tmp_path / "site" / "manifest.json").read_text() for r in (base, head))
    compared = run_cli("compare", base.run_id, head.run_id, "--store", url, cwd=tmp_path)
    assert compared.returncode == 0 and "compiled" in compared.stdout, compared.stderr
    cached = next((tmp_path / "cache" / "reportgen" / "stores").iterdir())
    assert sorted(p.name for p in cached.iterdir() if p.is_dir() and not p.name.startswith(".")) == [base.run_id, head.run_id]
    assert (cached / head.run_id / "traces" / "compiled.pt.trace.json.gz").is_file()  # whole bundles mirrored


def test_a_build_fetches_the_traces_of_only_the_pages_it_draws_with_them(bucket: str, tmp_path: Path) -> None:
    """A build mirrors each run's run.json; the other members only of the runs whose pages it draws with their
    traces (--keep-traces 1: the newest of the series). Its pages are those a build from the whole bundles draws, and
    any other reading command completes the mirror."""
    url = f"s3://{bucket}/runs"
    store = ObjectStore.open(url)
    runs = [synthetic_run(run_id=f"2026112{i}T000000Z-cpu-test-aaa11{i}", created_utc=f"2026-11-2{i}T00:00:00Z",
                          with_traces=True) for i in range(3)]
    for run in runs:
        store.put_bundle(write_synthetic(tmp_path / "whole", run))
    built = run_cli("build", "--runs", url, "--out", str(tmp_path / "site"), "--keep-traces", "1", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    cached = next((tmp_path / "cache" / "reportgen" / "stores").iterdir())
    assert all((cached / r.run_id / "run.json").is_file() for r in runs)
    assert [(cached / r.run_id / "traces").is_dir() for r in runs] == [False, False, True]
    assert sorted(os.listdir(cached / ".members-pending")) == [runs[0].run_id, runs[1].run_id]
    local = run_cli("build", "--runs", str(tmp_path / "whole"), "--out", str(tmp_path / "site-local"),
                    "--keep-traces", "1", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    for run in runs:
        page = Path("runs") / run.run_id / "index.html"
        assert (tmp_path / "site" / page).read_bytes() == (tmp_path / "site-local" / page).read_bytes()
    assert (tmp_path / "site" / "runs" / runs[2].run_id / "data" / "traces").is_dir()
    listed = run_cli("runs", "--store", url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert all((cached / r.run_id / "traces" / "compiled.pt.trace.json.gz").is_file() for r in runs)
    assert os.listdir(cached / ".members-pending") == []


def test_run_jsons_are_mirrored_in_batches_and_an_unreadable_one_is_named(bucket: str, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A build's mirror fetches run.json files a batch at a time (2 here: batches of 2 and 1). A listed run whose
    run.json is not there (an upload under way: its traces are) is left out until it is; one that cannot be read
    for another reason is an error naming it, not a run left out."""
    from reportgen.store import objects

    url = f"s3://{bucket}/runs"
    store = ObjectStore.open(url)
    runs = [synthetic_run(run_id=f"2026112{i}T000000Z-cpu-test-bbb11{i}", with_traces=True) for i in range(3)]
    for run in runs:
        store.put_bundle(write_synthetic(tmp_path / "whole", run))
    uploading = synthetic_run(run_id="20261130T000000Z-cpu-test-ccc333", with_traces=True)
    bundle = write_synthetic(tmp_path / "whole", uploading)

    def killed() -> None:
        raise RuntimeError("the writer stops before its run.json")

    with pytest.raises(RuntimeError):
        store.put_bundle(bundle, before_run_json=killed)
    monkeypatch.setattr(objects, "RUN_JSON_BATCH", 2)
    cache = tmp_path / "mirror"
    assert store.listed_ids() == sorted([*(r.run_id for r in runs), uploading.run_id])
    assert objects.sync_store(store, cache, members=False) == [r.run_id for r in runs]
    assert sorted(os.listdir(cache / objects.PENDING_DIR)) == [r.run_id for r in runs]
    assert all(os.listdir(cache / r.run_id) == ["run.json"] for r in runs)
    assert not (cache / uploading.run_id).exists()
    cat, read = store.fs.cat, []
    monkeypatch.setattr(store.fs, "cat", lambda keys, **kw: read.extend([keys] if isinstance(keys, str) else keys)
                        or cat(keys, **kw))
    assert objects.sync_store(store, cache) == []  # a reader that fetches whole bundles leaves it out too ...
    assert not (cache / uploading.run_id).exists()
    assert not [k for k in read if f"/{uploading.run_id}/" in k]  # ... without reading its objects, each time
    monkeypatch.setattr(store.fs, "cat", cat)

    store.fs.pipe_file(f"{bucket}/runs/{uploading.run_id}/run.json", (bundle / "run.json").read_bytes())
    later = synthetic_run(run_id="20261130T010000Z-cpu-test-ddd444")
    store.put_bundle(write_synthetic(tmp_path / "whole", later))

    def refused(keys: list[str], **kwargs: object) -> dict[str, object]:  # the server refuses one read (not a 404)
        out = cat(keys, **kwargs)
        key = f"{bucket}/runs/{later.run_id}/run.json"
        return {**out, key: PermissionError("Access Denied")} if key in out else out

    monkeypatch.setattr(store.fs, "cat", refused)
    assert store.read_run_jsons([later.run_id, uploading.run_id], skip_unreadable=True).keys() == {uploading.run_id}
    with pytest.raises(objects.ObjectStoreError, match=f"cannot read {later.run_id}/run.json \\(1 run\\(s\\)\\) "
                                                        "\\(PermissionError: Access Denied\\)"):
        objects.sync_store(store, cache, members=False)
    assert not (cache / later.run_id).exists()
    monkeypatch.undo()
    assert objects.sync_store(store, cache, members=False) == [uploading.run_id, later.run_id]  # once it is there


def test_corrupt_withdrawal_object_is_one_line_not_a_crash(bucket: str, tmp_path: Path) -> None:
    url = f"s3://{bucket}/runs"
    store = ObjectStore.open(url)
    store.put_bundle(write_synthetic(tmp_path / "staging", synthetic_run()))
    store.fs.pipe_file(f"{bucket}/runs/.withdrawn/{synthetic_run().run_id}/x.json", b"{not json")
    proc = run_cli("runs", "--store", url, cwd=tmp_path)
    assert proc.returncode == ExitCode.BAD_INPUT and proc.stderr.count("\n") == 1, proc.stderr
    assert ".withdrawn/" in proc.stderr and "delete that object" in proc.stderr


def test_failed_upload_keeps_the_new_run_and_names_it(tmp_path: Path, s3_endpoint: str) -> None:
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL_S3": s3_endpoint, "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    proc = run_cli("import", str(TRACE), "--store", "s3://no-such-bucket-here/runs", env=env, cwd=tmp_path)
    assert proc.returncode == ExitCode.BAD_INPUT and proc.stderr.count("\n") == 1, proc.stderr
    kept = proc.stderr.strip().rsplit("the new run is kept in ", 1)[1]
    assert Path(kept).parent == tmp_path / "tmp" and any(Path(kept).glob("*/run.json"))


def test_a_pair_finds_the_runners_calibration_in_an_s3_store(bucket: str, tmp_path: Path) -> None:
    """The calibration lookup of a pair uploaded to S3 searches the store by listing: only the run.json of pairs' base
    runs on the pair's device, newest first, and the partner of the one that is a calibration."""
    from dataclasses import replace

    from test_ab_calibration import calibrate
    from test_ab_coordinator import COMMITS, pair

    from reportgen.ab import calibration
    from reportgen.ab.bundles import store_pair
    from reportgen.ab.settings import AbSettings
    from reportgen.store.loader import load_run

    staging = tmp_path / "staging"
    calibrated = store_pair(calibrate().result, COMMITS, staging)
    for i in range(3):  # plain runs and a plain pair, newer than the calibration
        write_synthetic(staging, synthetic_run(run_id=f"20991231T00000{i}Z-cpu-run-{i:06x}"))
    later = store_pair(pair({"naive": 100.0, "fused": 50.0}, {"naive": 100.0, "fused": 55.0}).result, COMMITS, staging)
    store = ObjectStore.open(f"s3://{bucket}/runs")
    for folder in sorted(p for p in staging.iterdir() if p.is_dir() and not p.name.startswith(".")):
        store.put_bundle(folder)
    read: list[str] = []

    def reading(ids: object) -> dict[str, bytes]:
        read.extend(ids)  # type: ignore[call-overload]
        return store.read_run_jsons(ids)  # type: ignore[arg-type]

    base = load_run(staging / later["base"])
    gate = AbSettings(threshold_pct=5.0, max_seconds=300.0)
    found = calibration.find_listed_calibration(store.listed_ids(), reading, store.url, base, gate)
    local = calibration.find_calibration(staging, base, gate)
    assert found is not None and found == local and found.base_run_id == calibrated["base"]
    assert set(read) == {later["base"], calibrated["base"], calibrated["head"]}  # no plain run, no head side read
    other = replace(base, scenario=replace(base.scenario, name="another"))  # no calibration of this scenario
    assert calibration.find_listed_calibration(store.listed_ids(), store.read_run_jsons, store.url, other, gate) is None
