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


def test_a_write_lists_the_staging_folder_not_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Storing a run looks for what killed writers left in ``<store>/.tmp`` only: a listing of the store would cost
    every write into a 100,000-run store 50 ms. A dead writer's folder there is removed, a live one's kept."""
    import os

    from reportgen.store import writer

    store = tmp_path / "results"
    write_synthetic(store, synthetic_run(run_id="20261130T000000Z-cpu-a-000001"))
    (store / writer.STAGING_DIR).mkdir()
    host = writer.temp_owner_tag().rsplit("-p", 1)[0]
    dead, live = f".tmp-{host}-p{2**22 + 7}-x-abcd", f".tmp-{host}-p{os.getpid()}-x-abcd"
    for name in (dead, live):
        (store / writer.STAGING_DIR / name).mkdir()
    listed: list[str] = []
    for name in ("listdir", "scandir"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda path=".", _real=real: _real(path) if isinstance(path, int)  # rmtree's
                            else listed.append(os.fspath(path)) or _real(path))
    write_synthetic(store, synthetic_run(run_id="20261130T000000Z-cpu-a-000002"))
    monkeypatch.undo()
    assert listed == [str(store / writer.STAGING_DIR)]
    assert sorted(p.name for p in (store / writer.STAGING_DIR).iterdir()) == [live]
    assert sorted(p.name for p in store.iterdir()) == [writer.STAGING_DIR, "20261130T000000Z-cpu-a-000001",
                                                      "20261130T000000Z-cpu-a-000002"]


def test_a_writer_makes_the_staging_folder_again_when_a_finishing_writer_removed_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each writer removes the staging folder when it leaves it empty; one that made it just before finds it gone
    when it makes its own folder there, makes it again, and stores its run."""
    from reportgen.store import writer

    store = tmp_path / "results"
    made = writer.make_folders
    removed: list[int] = []

    def made_then_removed(folder: Path) -> None:
        made(folder)
        if folder.name == writer.STAGING_DIR and len(removed) < 3:  # another writer finishes between this one's
            removed.append(folder)  # mkdir and its temporary folder, 3 times
            writer.release_staging(store)
            assert not folder.exists()

    monkeypatch.setattr(writer, "make_folders", made_then_removed)
    folder = write_synthetic(store, synthetic_run())
    assert load_run(folder) == synthetic_run() and len(removed) == 3
    assert [p.name for p in store.iterdir()] == [folder.name]  # the staging folder removed after, empty


def test_a_writer_that_never_keeps_the_staging_folder_stops_with_one_line(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Finishing writers that remove the staging folder every time, STAGING_ATTEMPTS times in a row: the write stops
    with one line naming the folder, and the store is left as it was."""
    from reportgen.store import writer

    store = tmp_path / "results"
    write_synthetic(store, synthetic_run(run_id="20261130T000000Z-cpu-a-000001"))
    made, attempts = writer.make_folders, []

    def always_removed(folder: Path) -> None:
        made(folder)
        if folder.name == writer.STAGING_DIR:
            attempts.append(folder)
            writer.release_staging(store)

    monkeypatch.setattr(writer, "make_folders", always_removed)
    with pytest.raises(BundleError, match=f"^{store}/{writer.STAGING_DIR}/.*: cannot write \\(No such file or "
                                          "directory\\); choose another folder$"):
        write_synthetic(store, synthetic_run(run_id="20261130T000000Z-cpu-a-000002"))
    assert len(attempts) == writer.STAGING_ATTEMPTS
    assert sorted(p.name for p in store.iterdir()) == ["20261130T000000Z-cpu-a-000001"]


def test_a_write_is_stored_when_another_writer_removes_the_emptied_staging_folder_after_its_rename(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a writer has renamed its bundle into the store, the staging folder may be empty, and another writer that
    finishes then removes it: the first writer's fsync of the staging folder finds nothing, and its write succeeded."""
    from reportgen.store import writer

    store = tmp_path / "results"
    fsync_dir = writer._fsync_dir

    def store_synced_then_staging_removed(path: Path) -> None:
        fsync_dir(path)
        if path == store:  # after the rename: another writer leaves the staging folder empty and removes it
            writer.release_staging(store)

    monkeypatch.setattr(writer, "_fsync_dir", store_synced_then_staging_removed)
    folder = write_synthetic(store, synthetic_run())
    assert load_run(folder) == synthetic_run() and [p.name for p in store.iterdir()] == [folder.name]
