"""The run-bundle loader and writer: round trip, atomic write, and precise refusals."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from factories import synthetic_run, write_synthetic

from reportgen.errors import BundleError, ConflictError
from reportgen.model.run import SCHEMA_VERSION, DeviceKind, RunSource
from reportgen.store.layout import NewRunRequest, artifact_member, format_utc, new_run, safe_component, slug, trace_member
from reportgen.store.loader import load_run, load_store, resolve_run_dir
from reportgen.store.runjson import run_to_json


def test_round_trip_is_exact(tmp_path: Path) -> None:
    run = synthetic_run(with_traces=True)
    folder = write_synthetic(tmp_path, run)
    assert load_run(folder) == run
    assert (folder / "traces" / "naive.pt.trace.json.gz").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_the_bundle_names_its_members_and_times() -> None:
    assert trace_member("fused") == "traces/fused.pt.trace.json.gz"
    assert trace_member("a/b") == f"traces/{safe_component('a/b')}.pt.trace.json.gz" and "/" not in trace_member("a/b")[7:]
    assert artifact_member("v 1", "x.neff") == f"artifacts/{safe_component('v 1')}/x.neff"
    moment = datetime(2026, 11, 30, 6, 55, 0, 999, tzinfo=timezone(timedelta(hours=2)))
    assert format_utc(moment) == "2026-11-30T04:55:00Z"


def test_new_run_stamps_schema_id_and_time() -> None:
    template = synthetic_run()
    moment = datetime(2026, 11, 30, 4, 55, tzinfo=timezone.utc)
    run = new_run(NewRunRequest(moment, DeviceKind.CUDA, "my change", RunSource.IMPORT, "salt", git=template.git,
                                environment=template.environment, peak=template.peak, scenario=template.scenario,
                                variants=template.variants))
    assert run.schema_version == SCHEMA_VERSION and run.created_utc == "2026-11-30T04:55:00Z"
    assert run.run_id.startswith("20261130T045500Z-cuda-my-change-") and len(run.run_id.rsplit("-", 1)[1]) == 6
    assert (run.source, run.device, run.settings, run.notes) == (RunSource.IMPORT, DeviceKind.CUDA, None, ())


def test_existing_run_is_never_overwritten(tmp_path: Path) -> None:
    run = synthetic_run()
    folder = write_synthetic(tmp_path, run)
    before = (folder / "run.json").read_bytes()
    with pytest.raises(ConflictError, match="already exists"):
        write_synthetic(tmp_path, run)
    assert (folder / "run.json").read_bytes() == before


def _mutated(tmp_path: Path, mutate) -> Path:  # type: ignore[no-untyped-def]
    run = synthetic_run()
    folder = tmp_path / run.run_id
    folder.mkdir()
    data = json.loads(run_to_json(run))
    mutate(data)
    (folder / "run.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.update(schema_version=99), "field 'schema_version' is 99, newer than this reportgen reads (6); upgrade"),
        (lambda d: d.pop("schema_version"), "field 'schema_version' is missing"),
        (lambda d: d.update(schema_version="1"), "field 'schema_version' is '1', expected a positive integer"),
        (lambda d: d.pop("label"), "field 'label': is missing"),
        (lambda d: d["variants"][1].update(samples_us=[1.0, -2.0]), "field 'variants[1].samples_us': must not be negative"),
        (lambda d: d["variants"][0].update(status="great"), "field 'variants[0].status': expected one of"),
        (lambda d: d["variants"][0]["ops"][0].update(calls="3"), "field 'variants[0].ops[0].calls': expected an integer"),
        (lambda d: d["variants"][0].update(trace_path="../../etc/passwd"), "points outside the bundle"),
        (lambda d: d["variants"].append(d["variants"][0]), "duplicate names"),
        (lambda d: d.update(run_id="other"), "field 'run_id' is 'other' but the folder is"),
    ],
)
def test_corrupt_bundle_is_refused_naming_file_and_field(tmp_path: Path, mutate, expected: str) -> None:  # type: ignore[no-untyped-def]
    folder = _mutated(tmp_path, mutate)
    with pytest.raises(BundleError) as info:
        load_run(folder)
    assert str(folder / "run.json") in str(info.value)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_nan_and_truncated_json_are_refused(tmp_path: Path) -> None:
    run = synthetic_run()
    folder = tmp_path / run.run_id
    folder.mkdir()
    (folder / "run.json").write_text(run_to_json(run).replace('"compile_time_us": 900.0', '"compile_time_us": NaN', 1))
    with pytest.raises(BundleError, match="NaN is not allowed"):
        load_run(folder)
    (folder / "run.json").write_text(run_to_json(run)[:200])
    with pytest.raises(BundleError, match="not valid JSON"):
        load_run(folder)


def test_resolve_latest_and_store_order(tmp_path: Path) -> None:
    older = synthetic_run(run_id="r-old", created_utc="2026-01-01T00:00:00Z")
    newer = synthetic_run(run_id="r-new", created_utc="2026-02-01T00:00:00Z")
    write_synthetic(tmp_path, newer)
    write_synthetic(tmp_path, older)
    assert [r.run_id for r in load_store(tmp_path)] == ["r-old", "r-new"]
    assert resolve_run_dir(tmp_path, "latest").name == "r-new"
    assert resolve_run_dir(tmp_path, "latest~1").name == "r-old"
    with pytest.raises(BundleError, match="has 2 run"):
        resolve_run_dir(tmp_path, "latest~2")


def test_path_helpers_are_safe() -> None:
    assert slug("../My Change/<b>") == "my-change-b"
    assert "/" not in safe_component("a/../b") and ".." not in safe_component("../x")
    assert safe_component("naive") == "naive"
    assert safe_component("a/b") != safe_component("a_b")
