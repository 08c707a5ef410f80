"""The catalog's files: Parquet parts of two tables, ``runs`` (one row per run) and ``points`` (one row per
variant of a run in one history group), under ``<store>/.catalog/``.

A *part* is a pair of files, ``part-<stamp>-<token>.points.parquet`` then ``part-<stamp>-<token>.runs.parquet``;
the runs file is written last (temporary name, then a rename), so a part whose runs file is there is whole. Parts
are never changed: a write adds a part, a compaction writes one part holding everything and then deletes the parts
it read. A run listed by several parts is taken from the newest (parts sort by name); its points come from the
same part. A reader that finds a file gone (a compaction between listing and reading) lists again.

Each file carries ``reportgen.catalog`` in its Parquet metadata: ``{"schema_version": 1}``. A part of a newer
major version is not read and not deleted (a newer reportgen wrote it; this one rebuilds its rows from bundles).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import os
import secrets
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen.analysis.history import GroupPoint
from reportgen.catalog.arrow import is_in as _is_in
from reportgen.catalog.arrow import pa as _pa
from reportgen.catalog.arrow import pc as _pc
from reportgen.catalog.arrow import pq as _pq
from reportgen.catalog.arrow import where as _where
from reportgen.store.atomic import new_file_mode

CATALOG_DIR = ".catalog"
SCHEMA_VERSION = 1
META_KEY = b"reportgen.catalog"
RUNS_SUFFIX = ".runs.parquet"
POINTS_SUFFIX = ".points.parquet"
READ_ATTEMPTS = 5
"""Listings tried when a part vanishes under a reader (each compaction writes its part before deleting)."""
ROW_GROUP_ROWS = 1_000
"""Rows per Parquet row group of a runs file, whose rows are sorted by run id: reading a few runs' digests (the
index's newest 50) reads the row groups whose run-id range holds them, not a 10,000-run part's every digest."""
POINTS_ROW_GROUP_ROWS = 10_000
"""Rows per row group of a points file, whose rows are sorted by time: a history window reads every column only of
the row groups holding its runs. Bigger than a runs file's, since a read of one whole series decodes every row
group: at 100,000 runs, 1,000-row groups made that read (with a listing) 4% more instructions than one row group,
10,000-row groups 0.7% (``benchmarks/bench_catalog.py``'s read under callgrind)."""


@dataclass(frozen=True)
class CatalogRun:
    """One run as the catalog keeps it: what lists and filters it, the stat of its run.json, and its digest."""

    run_id: str
    created_utc: str
    scenario: str
    device: str
    machine: str | None
    run_json_sha256: str
    run_json_bytes: int
    run_json_mtime_ns: int
    history_key: str
    """The key of the run's own history series (device, machine, scenario, parameters): retention counts per key."""
    digest_json: str | None
    """The run's ``RunDigest`` as JSON (``to_jsonable``); None when not read yet (read only for the runs shown)."""


@dataclass(frozen=True)
class Part:
    """One part of the catalog: its name stem and folder."""

    folder: Path
    stem: str

    @property
    def runs_file(self) -> Path:
        return self.folder / f"{self.stem}{RUNS_SUFFIX}"

    @property
    def points_file(self) -> Path:
        return self.folder / f"{self.stem}{POINTS_SUFFIX}"


class PartVanished(Exception):
    """A part listed a moment ago is gone (a compaction deleted it): list again."""


def runs_schema() -> Any:
    pa = _pa()
    return pa.schema([("run_id", pa.string()), ("created_utc", pa.string()), ("scenario", pa.string()),
                      ("device", pa.string()), ("machine", pa.string()), ("run_json_sha256", pa.string()),
                      ("run_json_bytes", pa.int64()), ("run_json_mtime_ns", pa.int64()),
                      ("history_key", pa.string()), ("digest_json", pa.string())],
                     metadata={META_KEY: json.dumps({"schema_version": SCHEMA_VERSION}).encode()})


def points_schema() -> Any:
    pa = _pa()
    return pa.schema([("key", pa.string()), ("device", pa.string()), ("where", pa.string()),
                      ("scenario", pa.string()), ("parameters_json", pa.string()), ("run_id", pa.string()),
                      ("created_utc", pa.string()), ("git_sha", pa.string()), ("variant_index", pa.int32()),
                      ("variant", pa.string()), ("median_us", pa.float64()), ("ci_low_us", pa.float64()),
                      ("ci_high_us", pa.float64()), ("speedup", pa.float64())],
                     metadata={META_KEY: json.dumps({"schema_version": SCHEMA_VERSION}).encode()})


def list_parts(folder: Path) -> list[Part]:
    """The whole parts of the catalog (their runs file is there), oldest first; [] without a catalog."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    stems = sorted(n[: -len(RUNS_SUFFIX)] for n in names if n.startswith("part-") and n.endswith(RUNS_SUFFIX))
    return [Part(folder, s) for s in stems]


def write_part(folder: Path, runs: Sequence[CatalogRun], points: Sequence[GroupPoint]) -> Part:
    """Write one new part (points first, runs last, each under a temporary name then renamed): returns it."""
    folder.mkdir(mode=0o755, exist_ok=True)
    now = time.time_ns()  # one reading: seconds and nanoseconds read apart could name a part before an older one
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 1_000_000_000)) + f"{now % 1_000_000_000:09d}"
    part = Part(folder, f"part-{stamp}-{secrets.token_hex(4)}")
    _write_table(_oldest_first(_points_table(points)), part.points_file, POINTS_ROW_GROUP_ROWS)
    _write_table(_runs_table(sorted(runs, key=lambda r: r.run_id)), part.runs_file, ROW_GROUP_ROWS)
    return part


def _write_table(table: Any, path: Path, row_group_rows: int | None = None) -> None:
    tmp = path.with_name(f".tmp-{path.name}")
    _pq().write_table(table, tmp, compression="zstd", row_group_size=row_group_rows)
    os.chmod(tmp, new_file_mode())
    os.rename(tmp, path)


def _runs_table(runs: Sequence[CatalogRun]) -> Any:
    cols = {f: [getattr(r, f) for r in runs] for f in runs_schema().names}
    return _pa().Table.from_pydict(cols, schema=runs_schema())


def _points_table(points: Sequence[GroupPoint]) -> Any:
    names = points_schema().names
    cols: dict[str, list[Any]] = {n: [] for n in names}
    for p in points:
        for n in names:
            cols[n].append(json.dumps(p.parameters) if n == "parameters_json" else getattr(p, n))
    return _pa().Table.from_pydict(cols, schema=points_schema())


def _oldest_first(points: Any) -> Any:
    """A points table sorted by time, then run id (a stable sort: a run's points keep their order)."""
    order = _pc().call_function("sort_indices", [points], _pc().SortOptions([("created_utc", "ascending"),
                                                                            ("run_id", "ascending")]))
    return _pc().call_function("take", [points, order])


def _version_ok(metadata: Mapping[bytes, bytes] | None) -> bool:
    """True when this reportgen can read a file with this Parquet metadata (same major version); False for a newer
    one, or none."""
    try:
        version = json.loads((metadata or {}).get(META_KEY, b"{}")).get("schema_version")
    except (ValueError, AttributeError):
        return False
    return isinstance(version, int) and version <= SCHEMA_VERSION


LISTING_COLUMNS = ("run_id", "created_utc", "scenario", "device", "machine", "run_json_sha256", "run_json_bytes",
                   "run_json_mtime_ns", "history_key")
"""Every column of the runs table but the digest: what a sync reads of every run."""


def read_part_columns(part: Part) -> Any | None:
    """The run rows of one part without their digests: an Arrow table of LISTING_COLUMNS (a file missing one reads
    without it); None when a newer reportgen wrote it. The file is opened once for its schema's version and its
    columns (a sync reads every part)."""
    f = _open(part.runs_file)
    if not _version_ok(f.schema_arrow.metadata):
        return None
    return f.read(columns=list(LISTING_COLUMNS))


def read_part_runs(part: Part) -> list[CatalogRun] | None:
    """The run rows of one part without their digests; None when a newer reportgen wrote it."""
    t = read_part_columns(part)
    if t is None:
        return None
    c = t.to_pydict()
    return [CatalogRun(*row, digest_json=None)  # type: ignore[misc]  # LISTING_COLUMNS is the field order
            for row in zip(*(c[name] for name in LISTING_COLUMNS), strict=True)]


def read_runs(parts: Sequence[Part]) -> list[tuple[Part, CatalogRun]]:
    """Every run row of ``parts`` without its digest, with the part it came from (duplicates included)."""
    return [(part, row) for part in parts for row in read_part_runs(part) or ()]


def read_digests(part: Part, run_ids: Sequence[str]) -> dict[str, str]:
    """The digest JSON of ``run_ids`` in one part, read from the row groups whose run-id range holds them."""
    f = _open(part.runs_file)
    t = f.read_row_groups(_row_groups_holding(f.metadata, "run_id", run_ids), columns=["run_id", "digest_json"])
    rows = _where(t, _is_in(t["run_id"], run_ids)).to_pylist()
    return {r["run_id"]: r["digest_json"] for r in rows}


def _row_groups_holding(meta: Any, column: str, values: Sequence[str]) -> list[int]:
    """The row groups whose ``column`` statistics (min and max) may hold one of ``values``; a group without
    statistics may hold any."""
    wanted = sorted(values)
    index = meta.schema.to_arrow_schema().get_field_index(column)
    out = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(index).statistics
        if stats is None or not stats.has_min_max:
            out.append(g)
            continue
        k = bisect.bisect_left(wanted, stats.min)
        if k < len(wanted) and wanted[k] <= stats.max:
            out.append(g)
    return out


def read_points(parts: Sequence[Part], key: str | None = None) -> list[tuple[Part, GroupPoint]]:
    """The point rows of ``parts`` (only group ``key``'s, when given) with the part each came from."""
    out = []
    for part in parts:
        t = _read(part.points_file, None)
        if key is not None:
            t = _where(t, _is_in(t["key"], (key,)))
        out += [(part, _point(row)) for row in t.to_pylist()]
    return out


def latest_points(wanted: Mapping[Part, Collection[str]], window: int,
                  unwanted: Mapping[Part, Collection[str]] | None = None) -> tuple[list[GroupPoint], dict[str, int]]:
    """The points of the ``wanted`` runs of each part, keeping each group's latest ``window`` runs only; and each
    group's number of wanted runs.

    The window is chosen from four columns of every point (:data:`WINDOW_COLUMNS`) by Arrow's kernels and NumPy:
    one row per run and group (its first variant's, index 0, or the row of a run without variants, -1), sorted
    newest first within each group, with repeats of a run in one group (a swept shape equal to its own but for the
    seed) counted once. Every column is then read only of the row groups that hold a point kept (a part's points
    are written oldest first, so a group's latest runs lie in its last row groups), and Python objects are made only
    for the points kept. ``unwanted``: for parts whose runs are mostly wanted (a site's big part), the others, so the
    filter is built from a few run ids, not from every run of the store."""
    pa, pc = _pa(), _pc()
    files, slims = [], []
    for n, (part, ids) in enumerate(wanted.items()):
        f = _open(part.points_file)
        whole = f.read() if f.metadata.num_row_groups <= 1 else None  # one row group: read once, every column
        files.append((f, whole))
        slims.append(_window_rows(whole if whole is not None else f.read(columns=list(WINDOW_COLUMNS)), n, ids,
                                  unwanted.get(part) if unwanted is not None else None))
    if not slims or not sum(t.num_rows for t in slims):
        return [], {}
    t = pa.concat_tables(slims)
    kept, totals = _window(t, window)
    pairs = pc.call_function("binary_join_element_wise", [t["key"], t["run_id"], pa.scalar("\0")])
    chosen = _where(t.select(["part", "row"]), _is_in(pairs, kept))
    out: list[GroupPoint] = []
    for n, (f, whole) in enumerate(files):
        rows = _where(chosen, pc.call_function("equal", [chosen["part"], pa.scalar(n, pa.int32())]))["row"]
        if len(rows):
            out += [_point(r) for r in _rows_of(f, whole, rows.to_pylist()).to_pylist()]
    return out, totals


def _window_rows(t: Any, n: int, ids: Collection[str], left_out: Collection[str] | None) -> Any:
    """Part ``n``'s WINDOW_COLUMNS, with the part's number and each row's position in it, for the runs ``ids``
    (or, given ``left_out``, for every run but those)."""
    import numpy as np

    pa, pc = _pa(), _pc()
    t = t.select(list(WINDOW_COLUMNS)).append_column("part", pa.array(np.full(t.num_rows, n, np.int32)))
    t = t.append_column("row", pa.array(np.arange(t.num_rows, dtype=np.int64)))
    if left_out is not None:
        return _where(t, pc.call_function("invert", [_is_in(t["run_id"], left_out)])) if left_out else t
    mask = _is_in(t["run_id"], ids)
    return t if pc.call_function("all", [mask]).as_py() else _where(t, mask)


WINDOW_COLUMNS = ("key", "created_utc", "run_id", "variant_index")
"""The columns of a points file that choose a history window (:func:`latest_points`)."""


def _window(t: Any, window: int) -> tuple[list[str], dict[str, int]]:
    """``key\\0run_id`` of each group's latest ``window`` runs among the rows of ``t``, and each group's run count."""
    import numpy as np

    pa, pc = _pa(), _pc()
    first = _where(t, pc.call_function("less_equal", [t["variant_index"], pa.scalar(0, pa.int32())]))
    order = pc.call_function("sort_indices", [first], pc.SortOptions([("key", "ascending"), ("created_utc", "descending"),
                                                                      ("run_id", "descending")]))
    keys = _one_chunk(pc.call_function("take", [first["key"], order]))
    runs = _one_chunk(pc.call_function("take", [first["run_id"], order]))
    key_codes = _one_chunk(pc.call_function("dictionary_encode", [keys]))
    k = key_codes.indices.to_numpy(zero_copy_only=False)
    r = _one_chunk(pc.call_function("dictionary_encode", [runs])).indices.to_numpy(zero_copy_only=False)
    new_pair = np.ones(len(k), dtype=bool)  # sorted by key, time, run: a run's repeats in a group are neighbours
    new_pair[1:] = (k[1:] != k[:-1]) | (r[1:] != r[:-1])
    unique = np.flatnonzero(new_pair)
    group = k[unique]
    starts = np.ones(len(group), dtype=bool)
    starts[1:] = group[1:] != group[:-1]
    at = np.arange(len(group))
    rank = at - np.maximum.accumulate(np.where(starts, at, 0))  # a run's place in its group, newest first: 0, 1, ...
    take = pa.array(unique[rank < window])
    kept = pc.call_function("binary_join_element_wise", [pc.call_function("take", [keys, take]),
                                                         pc.call_function("take", [runs, take]), pa.scalar("\0")])
    counts = np.bincount(group, minlength=len(key_codes.dictionary))
    totals = {key: int(c) for key, c in zip(key_codes.dictionary.to_pylist(), counts.tolist(), strict=True) if c}
    return kept.to_pylist(), totals


def _one_chunk(values: Any) -> Any:
    """An Arrow array from a chunked one (a dictionary encoding must be one dictionary)."""
    return values.combine_chunks() if hasattr(values, "combine_chunks") else values


def _rows_of(f: Any, whole: Any, rows: list[int]) -> Any:
    """Rows ``rows`` (ascending positions in the file) of a points file, every column: from ``whole`` when it was
    read whole, else from the row groups that hold them."""
    call, pa = _pc().call_function, _pa()  # Table.take would import pyarrow.compute (see _pc)
    if whole is not None:
        return call("take", [whole, pa.array(rows, pa.int64())])
    sizes = [f.metadata.row_group(g).num_rows for g in range(f.metadata.num_row_groups)]
    starts = list(itertools.accumulate(sizes, initial=0))  # each row group's first row in the file
    group_of = [bisect.bisect_right(starts, row) - 1 for row in rows]
    groups = sorted(set(group_of))
    firsts = itertools.accumulate((sizes[g] for g in groups), initial=0)  # each group's first row in what is read
    read_at = dict(zip(groups, firsts, strict=False))  # (accumulate's last total has no group)
    at = [read_at[g] + row - starts[g] for row, g in zip(rows, group_of, strict=True)]
    return call("take", [f.read_row_groups(groups), pa.array(at, pa.int64())])


@functools.lru_cache(maxsize=1024)
def _parameters(text: str) -> tuple[tuple[str, str], ...]:
    """A point's parameters from their JSON (the same few texts repeat over thousands of points)."""
    return tuple((str(k), str(v)) for k, v in json.loads(text))


def _point(row: dict[str, Any]) -> GroupPoint:
    params = _parameters(row["parameters_json"])
    return GroupPoint(row["key"], row["device"], row["where"], row["scenario"], params, row["run_id"],
                      row["created_utc"], row["git_sha"], row["variant_index"], row["variant"], row["median_us"],
                      row["ci_low_us"], row["ci_high_us"], row["speedup"])


def _read(path: Path, columns: Sequence[str] | None) -> Any:
    """One Parquet file as a table."""
    return _open(path).read(columns=list(columns) if columns else None)


def _open(path: Path) -> Any:
    """One Parquet file opened (ParquetFile: read_table would import pyarrow.dataset); PartVanished when a
    compaction deleted it."""
    try:
        return _pq().ParquetFile(path)
    except FileNotFoundError:
        raise PartVanished(str(path)) from None


def delete_parts(parts: Iterable[Part]) -> None:
    """Delete parts (runs file first, so a half-deleted part is no longer listed); gone already is fine."""
    for part in parts:
        for path in (part.runs_file, part.points_file):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
