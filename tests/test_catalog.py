"""The catalog of runs: one Parquet table beside the bundles, true to the store, read without the rest."""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import random
import shutil
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from factories import synthetic_run, write_synthetic

from reportgen import catalog
from reportgen.analysis.history import GroupPoint, digest, groups_from_points, history, run_counts
from reportgen.catalog import table
from reportgen.catalog.sync import MAX_PARTS
from reportgen.store.layout import RUN_FILE
from reportgen.store.loader import load_run, load_store

SYNC = importlib.import_module("reportgen.catalog.sync")  # the module: the package's `sync` is its function


def _run(i: int, fused_us: float = 60.0, shape: str = "4,64"):  # type: ignore[no-untyped-def]
    return synthetic_run(run_id=f"20261130T{i // 60:02d}{i % 60:02d}00Z-cpu-cat-{i:06d}",
                         created_utc=f"2026-11-30T{i // 60:02d}:{i % 60:02d}:00Z",
                         times_us={"naive": 100.0 + i, "fused": fused_us, "compiled": 30.0}, shape=shape)


def _store(tmp_path: Path, n: int, record: bool = True) -> Path:
    store = tmp_path / "results"
    for i in range(n):
        bundle = write_synthetic(store, _run(i, shape="4,64" if i % 2 else "8,128"))
        if record:
            catalog.record(store, load_run(bundle), bundle)
    return store


def _parts(store: Path) -> list[table.Part]:
    return table.list_parts(catalog.catalog_folder(store))


def test_the_catalogs_history_is_the_history_of_the_bundles(tmp_path: Path) -> None:
    store = _store(tmp_path, 6)
    expected = history([digest(r) for r in load_store(store)])
    cat = catalog.sync(store)
    assert cat.groups() == expected
    assert len(expected) == 2  # two shapes: two groups, each read by its key alone
    for group in expected:
        assert cat.groups(group.key) == (group,)
    assert cat.digests() == [digest(r) for r in load_store(store)]


def test_the_latest_points_of_a_window_make_the_same_history_as_every_point(tmp_path: Path) -> None:
    """The index reads only each group's latest runs, yet shows the same charts and the same run counts."""
    store = _store(tmp_path, 13)  # two groups of 6 and 7 runs, spread over 13 parts
    cat = catalog.sync(store)
    every = groups_from_points(cat.points(), 4)
    wanted = set(cat.entries) - {sorted(cat.entries)[-1]}  # the newest run's points come from elsewhere (a digest)
    points, totals = cat.latest_points(wanted, 4)
    assert len({p.run_id for p in points}) == 8  # 4 per group, not 12
    assert totals == {g.key: g.runs_total - (1 if sorted(cat.entries)[-1] in g.run_ids else 0) for g in every}
    newest = [p for p in cat.points() if p.run_id == sorted(cat.entries)[-1]]
    for key, count in run_counts(newest).items():
        totals[key] += count
    assert groups_from_points(points + newest, 4, totals) == every
    assert [g.runs_total for g in every] == [7, 6] or [g.runs_total for g in every] == [6, 7]


def test_a_window_without_a_few_runs_of_a_big_part_leaves_out_their_points(tmp_path: Path) -> None:
    """Runs the build draws now, or withdrew, are not read from the catalog: a part holding them with many others is
    filtered by the few left out, and their points must not reach the window or its counts."""
    store = _store(tmp_path, 20)
    catalog.sync(store)  # merges the 20 parts into one
    cat = catalog.sync(store)  # reads it
    assert len(_parts(store)) == 1
    ids = sorted(cat.entries)
    left_out = {ids[-1], ids[-2], ids[3]}
    points, totals = cat.latest_points(set(ids) - left_out, 100)
    assert not left_out & {p.run_id for p in points}
    assert {p.run_id for p in points} == set(ids) - left_out and sum(totals.values()) == 17
    every = [p for p in cat.points() if p.run_id not in left_out]
    assert groups_from_points(points, 100, totals) == groups_from_points(every, 100)


def test_a_run_twice_in_one_group_counts_once_in_its_window(tmp_path: Path) -> None:
    """A swept shape equal to the run's own but for the seed puts the run in its own group twice: the window and
    the group's run count must still count runs, not rows."""
    def point(run: str, day: int, variant: int) -> GroupPoint:
        return GroupPoint("K", "cpu", "here", "s", (("shape", "8,64"),), run, f"2026-01-0{day}T00:00:00Z", None,
                          variant, f"v{variant}", 10.0, 9.0, 11.0, None)

    twice = [point("r3", 3, 0), point("r3", 3, 1)] * 2
    part = table.write_part(tmp_path, [], [point("r1", 1, 0), point("r2", 2, 0), *twice])
    points, totals = table.latest_points({part: {"r1", "r2", "r3"}}, 2)
    assert totals == {"K": 3}
    assert sorted({p.run_id for p in points}) == ["r2", "r3"] and len(points) == 5


def test_the_window_is_each_groups_latest_runs_counted_one_by_one(tmp_path: Path) -> None:
    """The window chosen by Arrow's kernels is what counting each group's runs one by one gives: runs stored out of
    order, two groups, runs without variants, runs left out, times shared by several runs."""
    def point(i: int, key: str, variant: int) -> GroupPoint:
        return GroupPoint(key, "cpu", "here", "s", (("shape", key),), f"run-{i:05d}",
                          f"2026-01-01T{i // 7 % 24:02d}:{i // 168 % 60:02d}:00Z", None, variant,
                          None if variant < 0 else f"v{variant}", float(i), 1.0, 2.0, None)

    runs = 2000
    points = [point(i, "A" if i % 3 else "B", v) for i in range(runs) for v in ((-1,) if i % 5 == 0 else (0, 1))]
    random.Random(1).shuffle(points)
    part = table.write_part(tmp_path, [], points)
    wanted = {f"run-{i:05d}" for i in range(runs) if i % 11}
    found, totals = table.latest_points({part: wanted}, 40)
    mine = [p for p in points if p.run_id in wanted]
    for key in ("A", "B"):
        ids = sorted({(p.created_utc, p.run_id) for p in mine if p.key == key})
        assert totals[key] == len(ids)
        newest = {i for _, i in ids[-40:]}
        assert sorted((p.run_id, p.variant_index) for p in found if p.key == key) == sorted(
            (p.run_id, p.variant_index) for p in mine if p.key == key and p.run_id in newest)
    assert set(found) <= set(points)  # every column read back as written


@pytest.mark.parametrize("layout", ["row groups, oldest first", "one row group, any order"])
def test_a_window_reads_the_row_groups_of_its_runs_and_every_column_of_them(tmp_path: Path, layout: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A points file is written oldest first in row groups, and the window reads every column only of the row groups
    holding its runs: a group that stopped long ago has its window in the first row groups, a live one in the last.
    A part written whole by an earlier reportgen (one row group, any order) gives the same points."""
    def point(i: int, key: str, variant: int) -> GroupPoint:
        return GroupPoint(key, "cpu", f"where-{key}", "s", (("shape", key),), f"run-{i:05d}",
                          f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z", f"sha{i}", variant,
                          f"v{variant}", float(i), i - 1.0, i + 1.0, i / 7)

    runs = 3000
    points = [point(i, "old" if i < 400 else ("live" if i % 2 else "other"), v) for i in range(runs) for v in (0, 1)]
    shuffled = points.copy()
    random.Random(2).shuffle(shuffled)
    if layout == "row groups, oldest first":
        monkeypatch.setattr(table, "POINTS_ROW_GROUP_ROWS", 1000)
        part = table.write_part(tmp_path, [], shuffled)
        assert pq.ParquetFile(part.points_file).metadata.num_row_groups > 4
    else:  # as reportgen wrote points before row groups: in the order given, one row group
        part = table.Part(tmp_path, "part-20260101T000000000000000-00000000")
        pq.write_table(table._points_table(shuffled), part.points_file)
    every = {f"run-{i:05d}" for i in range(runs)}
    left_out = {"run-02999", "run-00399", "run-01000"}
    read: list[list[int]] = []
    whole_groups = pq.ParquetFile.read_row_groups
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups",
                        lambda self, groups, **kw: read.append(list(groups)) or whole_groups(self, groups, **kw))
    found, totals = table.latest_points({part: every - left_out}, 30, {part: left_out})
    groups = pq.ParquetFile(part.points_file).metadata.num_row_groups
    # the old group's window is in the first row group, the live ones' in the last; one row group: read whole, once
    assert read == ([[0, groups - 1]] if groups > 1 else [])
    mine = [p for p in points if p.run_id not in left_out]
    expected = []
    for key in ("old", "live", "other"):
        ids = sorted({(p.created_utc, p.run_id) for p in mine if p.key == key})
        assert totals[key] == len(ids)
        newest = {i for _, i in ids[-30:]}
        expected += [p for p in mine if p.key == key and p.run_id in newest]
    assert sorted(found, key=repr) == sorted(expected, key=repr)  # every column of every point kept, nothing else
    assert sum(totals.values()) == runs - len(left_out)


def test_each_write_adds_a_part_and_a_sync_with_nothing_new_writes_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path, 3)
    assert len(_parts(store)) == 3
    cat = catalog.sync(store)
    assert sorted(cat.entries) == sorted(p.name for p in store.iterdir() if not p.name.startswith("."))
    assert all(e.part is not None and e.run.digest_json is None for e in cat.entries.values())  # nothing loaded
    assert len(_parts(store)) == 3


def test_a_bundle_stored_without_the_catalog_is_added_by_the_next_sync(tmp_path: Path) -> None:
    store = _store(tmp_path, 2)
    write_synthetic(store, _run(7))  # an older reportgen, or a bundle copied in by hand
    cat = catalog.sync(store)
    assert _run(7).run_id in cat.entries
    assert len(_parts(store)) == 3  # written back as one new part
    assert _run(7).run_id in catalog.sync(store).entries


def test_a_missing_catalog_is_rebuilt_from_the_bundles(tmp_path: Path) -> None:
    store = _store(tmp_path, 4)
    before = catalog.sync(store).groups()
    shutil.rmtree(catalog.catalog_folder(store))
    assert catalog.sync(store).groups() == before
    assert len(_parts(store)) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="worker processes are forked")
def test_bundles_read_by_worker_processes_make_the_catalog_one_process_makes(tmp_path: Path) -> None:
    """A build reads a big store's bundles across its worker processes: the same rows, points and digests, and
    a broken bundle named by the same message, as when one process reads them."""
    from reportgen.site.workers import MIN_PAGES_PER_WORKER, pool_map

    serial = _store(tmp_path / "a", 2 * MIN_PAGES_PER_WORKER + 1, record=False)
    (serial / _run(3).run_id / RUN_FILE).write_text("{not json")
    shutil.copytree(serial, tmp_path / "b")
    pids: set[int] = set()

    def mapper(fn, paths):  # type: ignore[no-untyped-def]
        pids.update(pool_map(_pid, paths, jobs=2))
        return pool_map(fn, paths, jobs=2)

    one, many = catalog.sync(serial), catalog.sync(tmp_path / "b", mapper=mapper)
    assert pids and os.getpid() not in pids  # the reads did cross into other processes
    assert many.columns() == one.columns() and len(one.entries) == 2 * MIN_PAGES_PER_WORKER
    assert many.groups() == one.groups() and many.digests() == one.digests()
    assert [str(e).replace(str(tmp_path / "b"), "S") for e in many.problems] == \
        [str(e).replace(str(serial), "S") for e in one.problems] and len(one.problems) == 1


def _pid(_path: Path) -> int:
    return os.getpid()


def test_a_bundle_that_left_the_store_leaves_the_catalog_in_one_compacted_part(tmp_path: Path) -> None:
    store = _store(tmp_path, 4)
    gone = _run(1).run_id
    shutil.rmtree(store / gone)
    cat = catalog.sync(store)
    assert gone not in cat.entries and len(cat.entries) == 3
    assert len(_parts(store)) == 1
    assert all(gone not in g.run_ids for g in cat.groups())
    assert catalog.sync(store).groups() == history([digest(r) for r in load_store(store)])


def test_a_changed_run_json_is_read_again(tmp_path: Path) -> None:
    store = _store(tmp_path, 2)
    bundle = store / _run(0).run_id
    data = json.loads((bundle / RUN_FILE).read_text())
    data["label"] = "relabelled by hand"
    (bundle / RUN_FILE).write_text(json.dumps(data))
    assert catalog.sync(store).digests([_run(0).run_id])[0].label == "relabelled by hand"


def test_parts_written_across_a_second_boundary_sort_in_the_order_written(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The newest part's row of a run wins: a part's name must sort after every older part's, also when its
    seconds and nanoseconds straddle a second (read apart, they named a part before the one written just before)."""
    clock = iter([1_764_460_800_999_999_999, 1_764_460_801_000_000_001])
    monkeypatch.setattr(table.time, "time_ns", lambda: next(clock))
    first = table.write_part(tmp_path, [], [])
    second = table.write_part(tmp_path, [], [])
    assert table.list_parts(tmp_path) == [first, second]


def test_many_parts_are_compacted_into_one(tmp_path: Path) -> None:
    store = _store(tmp_path, MAX_PARTS + 2)
    assert len(_parts(store)) == MAX_PARTS + 2
    cat = catalog.sync(store)
    assert len(_parts(store)) == 1
    assert cat.groups() == history([digest(r) for r in load_store(store)])


def test_new_parts_are_merged_with_parts_of_their_size_and_the_big_part_is_left_alone(tmp_path: Path) -> None:
    """Adding runs to a large store must not rewrite its big part every few runs (a sawtooth of slow builds)."""
    store = _store(tmp_path, 20)
    catalog.sync(store)
    (big,) = _parts(store)
    for i in range(20, 20 + MAX_PARTS):
        bundle = write_synthetic(store, _run(i))
        catalog.record(store, load_run(bundle), bundle)
    assert len(_parts(store)) == MAX_PARTS + 1
    cat = catalog.sync(store)
    parts = _parts(store)
    assert parts[0] == big and len(parts) == 2  # the new runs' parts merged into one; the big one untouched
    assert {e.part for e in cat.entries.values()} == set(parts)
    assert cat.digests() == [digest(r) for r in load_store(store)]
    assert catalog.sync(store).groups() == history([digest(r) for r in load_store(store)])


def test_a_reader_whose_parts_another_reader_merged_first_still_reads_every_run(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Two readers (a build beside `reportgen runs`) merge the same parts: the one that finds them gone must not fail."""
    store = _store(tmp_path, MAX_PARTS + 1)
    merge_tail = SYNC._merge_tail
    others: list[int] = []

    def another_reader_merges_first(parts: list[table.Part], entries: dict[str, SYNC.Entry], added: int
                                    ) -> list[table.Part]:
        chosen = merge_tail(parts, entries, added)
        if chosen and not others:
            others.append(len(_parts(store)))
            catalog.sync(store)  # merges and deletes the same parts before this reader reads them
        return chosen

    monkeypatch.setattr(SYNC, "_merge_tail", another_reader_merges_first)
    cat = catalog.sync(store)
    assert others == [MAX_PARTS + 1] and len(_parts(store)) == 1
    assert cat.digests() == [digest(r) for r in load_store(store)]
    assert cat.groups() == history([digest(r) for r in load_store(store)])


def test_a_few_runs_digests_are_read_from_the_row_groups_that_hold_them(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The index shows the newest 50 runs: reading their digests must not read a large part's every digest."""
    rows = [table.CatalogRun(f"run-{i:05d}", "2026-12-01T00:00:00Z", "s", "cpu", None, "0" * 64, 1, 1, "k",
                             json.dumps({"n": i})) for i in range(2 * table.ROW_GROUP_ROWS + 500)]
    random.Random(0).shuffle(rows)  # stored in any order: the part sorts its rows by run id
    part = table.write_part(tmp_path, rows, [])
    read: list[list[int]] = []
    original = pq.ParquetFile.read_row_groups

    def spy(self: pq.ParquetFile, groups: list[int], **kwargs: object) -> pa.Table:
        read.append(list(groups))
        return original(self, groups, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy)
    newest = [f"run-{i:05d}" for i in (2 * table.ROW_GROUP_ROWS + 499, 2 * table.ROW_GROUP_ROWS)]
    assert table.read_digests(part, newest) == {i: json.dumps({"n": int(i[4:])}) for i in newest}
    assert read == [[2]]
    assert table.read_digests(part, ["run-00007", "run-99999"]) == {"run-00007": json.dumps({"n": 7})}
    assert read[-1] == [0]


def test_a_damaged_part_is_ignored_and_its_runs_read_from_their_bundles(tmp_path: Path) -> None:
    store = _store(tmp_path, 3)
    damaged = _parts(store)[0]
    damaged.runs_file.write_bytes(b"PAR1 not really parquet")
    cat = catalog.sync(store)
    assert len(cat.entries) == 3
    assert cat.groups() == history([digest(r) for r in load_store(store)])


def test_a_part_whose_schema_reads_but_whose_rows_do_not_is_rebuilt_from_the_bundles(tmp_path: Path) -> None:
    """A runs file of this schema version that lacks a column (another writer's, or cut short) is a cache to
    rebuild, not an internal error."""
    store = _store(tmp_path, 3)
    damaged = _parts(store)[0]
    t = pq.read_table(damaged.runs_file)
    pq.write_table(t.drop_columns(["history_key"]), damaged.runs_file)
    assert pq.read_schema(damaged.runs_file).metadata == t.schema.metadata  # same version: read, not skipped
    cat = catalog.sync(store)
    assert len(cat.entries) == 3
    assert cat.groups() == history([digest(r) for r in load_store(store)])


def test_a_part_written_by_a_newer_reportgen_is_neither_read_nor_deleted(tmp_path: Path) -> None:
    store = _store(tmp_path, 2)
    newer = _parts(store)[0]
    t = pq.read_table(newer.runs_file)
    meta = {table.META_KEY: json.dumps({"schema_version": table.SCHEMA_VERSION + 1}).encode()}
    pq.write_table(t.replace_schema_metadata(meta), newer.runs_file)
    shutil.rmtree(store / _run(1).run_id)  # a drop: compaction, which deletes the parts it read
    cat = catalog.sync(store)
    assert list(cat.entries) == [_run(0).run_id]
    assert newer.runs_file.exists()


def test_the_tables_carry_their_schema_version(tmp_path: Path) -> None:
    store = _store(tmp_path, 1)
    part = _parts(store)[0]
    for path in (part.runs_file, part.points_file):
        meta = pq.read_schema(path).metadata
        assert json.loads(meta[table.META_KEY]) == {"schema_version": 1}
    assert pq.read_schema(part.runs_file).field("run_json_bytes").type == pa.int64()


def _record_many(store: str, first: int, count: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()
    for i in range(first, first + count):
        bundle = write_synthetic(Path(store), _run(i))
        catalog.record(Path(store), load_run(bundle), bundle)


def _sync_many(store: str, times: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()
    for _ in range(times):
        catalog.sync(Path(store))


def test_writers_and_compacting_readers_at_once_lose_no_run(tmp_path: Path) -> None:
    store = tmp_path / "results"
    store.mkdir()
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(6)
    procs = [ctx.Process(target=_record_many, args=(str(store), 10 + 10 * k, 10, barrier)) for k in range(4)]
    procs += [ctx.Process(target=_sync_many, args=(str(store), 6, barrier)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    cat = catalog.sync(store)
    assert sorted(cat.entries) == sorted(_run(i).run_id for i in range(10, 50))
    assert cat.groups() == history([digest(r) for r in load_store(store)])


def test_the_catalog_is_never_listed_as_a_run(tmp_path: Path) -> None:
    store = _store(tmp_path, 2)
    assert catalog.catalog_folder(store).is_dir()
    assert len(load_store(store)) == 2
    assert not [p for p in os.listdir(catalog.catalog_folder(store)) if p.startswith(".tmp-")]


def test_rows_keep_the_machine_scenario_and_device_for_filtering(tmp_path: Path) -> None:
    store = tmp_path / "results"
    run = replace(_run(3), scenario=replace(_run(3).scenario, name="softmax"))
    bundle = write_synthetic(store, run)
    catalog.record(store, load_run(bundle), bundle)
    row = catalog.sync(store).entries[run.run_id].run
    assert (row.scenario, row.device, row.machine) == ("softmax", "cpu", digest(run).machine)


def test_a_listing_row_is_read_in_the_field_order_of_catalogrun() -> None:
    """read_part_runs builds rows positionally from LISTING_COLUMNS: a reordered field would swap values silently."""
    from dataclasses import fields

    names = [f.name for f in fields(table.CatalogRun)]
    assert names == [*table.LISTING_COLUMNS, "digest_json"]


def _columns(ids: list[str], created: str):  # type: ignore[no-untyped-def]
    """A part's listing columns as the catalog reads them: an Arrow table of the runs schema, behind PartColumns."""
    from reportgen.catalog.rows import PartColumns

    n = len(ids)
    columns = {"run_id": ids, "created_utc": [created] * n, "scenario": ["s"] * n, "device": ["cpu"] * n,
               "machine": [None] * n, "run_json_sha256": [f"{created}-{i}" for i in ids], "run_json_bytes": [1] * n,
               "run_json_mtime_ns": [2] * n, "history_key": ["k"] * n}
    schema = pa.schema([table.runs_schema().field(name) for name in table.LISTING_COLUMNS])
    return PartColumns(pa.Table.from_pydict(columns, schema=schema))


def test_rows_read_from_columns_answer_as_entries_made_one_by_one(tmp_path: Path) -> None:
    """The catalog's rows stay in their parts' columns: the newest part's row of a run wins, an entry put here
    replaces it, a selection leaves the others out of every answer (entries, columns, parts)."""
    from reportgen.catalog.rows import Entry, Rows

    old, new = table.Part(tmp_path, "part-1"), table.Part(tmp_path, "part-2")
    rows = Rows()
    rows.add_part(old, (_columns(["a", "b", "c"], "t1")))
    rows.add_part(new, (_columns(["b"], "t2")))
    made = Entry(replace(rows["c"].run, run_json_sha256="made", digest_json="{}"), None)
    rows.put(made)
    assert rows["a"].part == old and rows["b"] == Entry(table.CatalogRun(
        "b", "t2", "s", "cpu", None, "t2-b", 1, 2, "k", None), new) and rows["c"] is made
    assert rows.column("run_json_sha256") == {"a": "t1-a", "b": "t2-b", "c": "made"}
    assert (rows.unwritten(), rows.held_digest("c"), rows.held_digest("a")) == (["c"], "{}", None)
    assert rows.by_part(["a", "b", "c", "zzz"]) == {old: ["a"], new: ["b"]}
    assert rows.rows_per_part() == {old: 1, new: 1} and rows.parts() == [old, new]
    some = rows.only({"b", "c", "zzz"})
    assert sorted(some) == ["b", "c"] and some.column("created_utc") == {"b": "t2", "c": "t1"}
    assert some.in_parts({old, new}) == ["b"] and "a" not in some and len(some) == 2
    assert dict(rows.only(set(rows))) == dict(rows)
