"""Neuron Explorer's Parquet output: the device figures of one capture session, as the schema defines them.

Documented (SDK ``tools/neuron-explorer/profile-schema-reference.rst``, schema 7.4.0 of Neuron 2.31;
``how-to-analyze-profile-output.rst``): Parquet is ``neuron-explorer view``'s default and recommended
output format; "with ``--output-file`` the files go in the directory you name", one file per table
named after it (``Summary.parquet``), a large table split into numbered files (``X_0.parquet``,
``X_1.parquet``), and a table written only where the profile holds that kind of activity. Read here:

- ``Metadata.profile_schema_version`` (MAJOR.MINOR.PATCH; MAJOR is an incompatible change): a major
  other than ``KNOWN_SCHEMA_MAJOR`` is refused with one line, and so is a profile without it;
  ``hbm_ddr_bandwidth`` (bytes/s, one HBM stack) and the tool and runtime versions.
- ``Summary``: the fields summary.py keeps (seconds, bytes, counts; ``*_percent`` fields hold ratios,
  0.96 meaning 96 %, as a real capture shows), and ``peak_flops_bandwidth_ratio``, the tool's own ridge.
- ``ExecutionInfo``: one row per execution, with its NEFF and ``execution_start_ts`` /
  ``execution_end_ts`` (ns, relative to the profile's start): every execution of every NEFF counts
  (an eager capture runs one NEFF per op), giving EXECUTION_FIGURES.
- ``SystemProfileEvents``: ``name``, ``trace_event_source``, ``nc_idx`` for the fusion counters.

Assumed, not documented: that a session's several device profiles (if any) land in the named folder
or folders below it (every matching file under it is read); that float fields may be stored as
32- or 64-bit floats; that the Parquet ``*_percent`` fields (unit "percent" in SCH) hold the same
ratios as summary-json does. Tested only against tables written from SCH (tests/data/neuron/parquet/),
never against a real export. pyarrow is imported only here, lazily: ``reportgen[neuron]`` installs it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen.devices.neuron.summary import SCHEMA_FIELD, combine, kept, number, schema_refusal

INSTALL_HINT = 'pip install "reportgen[neuron]"'
METADATA, SUMMARY, EXECUTIONS, EVENTS = "Metadata", "Summary", "ExecutionInfo", "SystemProfileEvents"
TABLES = (METADATA, SUMMARY, EXECUTIONS, EVENTS)
"""The tables reportgen reads (names as documented); their files are kept beside the run."""
EXECUTION_COLUMNS = ("execution_index", "neff_name", "execution_start_ts", "execution_end_ts")
EVENT_COLUMNS = ("name", "trace_event_source", "nc_idx")
METADATA_TEXT = ("instance_type", "explorer_version", "runtime_version", "compiler_version", "driver_version")
METADATA_NUMBERS = ("hbm_ddr_bandwidth",)
"""Metadata figures copied into the summary where every device profile gives the same value."""
SUMMARY_CONSTANTS = ("peak_flops_bandwidth_ratio",)
"""Summary ratios of the hardware, not the work: kept where every row gives the same value, never added."""
EXECUTION_FIGURES = {
    "execution_count": "ExecutionInfo rows: device program executions in the capture",
    "execution_time": "seconds: the sum of execution_end_ts - execution_start_ts over those rows",
    "neff_count": "distinct neff_name values among those rows",
}
"""Keys reportgen adds to the device summary from ExecutionInfo (documented here, not the tool's names)."""
SHOWN_NEFFS = 12
_SPLIT = re.compile(r"^(?P<table>[A-Za-z]+)(?:_\d+)?\.parquet$")


@dataclass(frozen=True)
class Execution:
    """One ExecutionInfo row: which NEFF ran, and when (ns from the profile's start; None before NTFF v6)."""

    index: int
    neff_name: str | None
    start_ns: int | None
    end_ns: int | None

    @property
    def duration_ns(self) -> int | None:
        if self.start_ns is None or self.end_ns is None:
            return None
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class ParquetRead:
    """What a session's Parquet folder says, or (``figures`` empty) why it says nothing reportgen reads."""

    figures: dict[str, float]
    executions: tuple[Execution, ...] = ()
    events: tuple[dict[str, Any], ...] | None = None  # None: no SystemProfileEvents table
    schema_version: str | None = None
    notes: tuple[str, ...] = ()
    files: tuple[Path, ...] = ()  # the table files read, to keep beside the run


def pyarrow_missing() -> str | None:
    """None where pyarrow can be imported, else the note that sends the user to the extra."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return f"pyarrow is not installed, so neuron-explorer's Parquet is not read ({INSTALL_HINT})"
    return None


def table_files(folder: Path) -> dict[str, list[Path]]:
    """TABLES' files under ``folder``: ``<Table>.parquet`` and its numbered parts, in name order."""
    found: dict[str, list[Path]] = {}
    for path in sorted(folder.rglob("*.parquet")):
        match = _SPLIT.match(path.name)
        if match and match["table"] in TABLES and path.is_file():
            found.setdefault(match["table"], []).append(path)
    return found


def read_profile(folder: Path) -> ParquetRead:
    """The device figures of the Parquet tables under ``folder`` (neuron-explorer's ``--output-file`` folder)."""
    missing = pyarrow_missing()
    if missing:
        return ParquetRead({}, notes=(missing,))
    files = table_files(folder)
    if not files:
        return ParquetRead({}, notes=("neuron-explorer wrote no Parquet table reportgen reads "
                                      f"({', '.join(TABLES)})",))
    import pyarrow

    try:
        rows = {table: _rows(paths, _COLUMNS.get(table)) for table, paths in files.items()}
    except (OSError, ValueError, TypeError, pyarrow.ArrowException) as exc:  # a damaged or foreign file
        return ParquetRead({}, notes=(f"neuron-explorer's Parquet could not be read ({type(exc).__name__}: "
                                      f"{' '.join(str(exc).split())[:200]})",))
    kept_files = tuple(p for paths in files.values() for p in paths)
    return interpret(rows, kept_files)


def interpret(rows: dict[str, list[dict[str, Any]]], files: tuple[Path, ...] = ()) -> ParquetRead:
    """The figures of already-read tables (table name -> rows): pure, so tests can feed rows directly."""
    metadata = rows.get(METADATA, [])
    versions = sorted({str(r[SCHEMA_FIELD]) for r in metadata if isinstance(r.get(SCHEMA_FIELD), str)})
    if not versions:
        return ParquetRead({}, notes=(f"neuron-explorer's Parquet has no {METADATA}.{SCHEMA_FIELD}: its schema is "
                                      "unknown, so it is not read",), files=files)
    shown = "/".join(versions)
    refusals = [r for r in (schema_refusal(v) for v in versions) if r]
    if refusals:
        return ParquetRead({}, schema_version=shown, notes=(refusals[0],), files=files)
    summary_rows = rows.get(SUMMARY, [])
    executions = tuple(_execution(r, i) for i, r in enumerate(rows.get(EXECUTIONS, [])))
    figures, partial = combine([{k: v for k, v in r.items() if kept(k)} for r in summary_rows])
    figures.update(_agreed(summary_rows, SUMMARY_CONSTANTS))
    figures.update(_agreed(metadata, METADATA_NUMBERS))
    figures.update(execution_figures(executions))
    notes = [_head(summary_rows, executions, shown)]
    if partial:
        notes.append(f"left out, given by only some Summary rows: {', '.join(partial)}")
    notes.extend(_execution_notes(executions))
    about = _metadata_text(metadata)
    if about:
        notes.append(f"profile metadata: {about}")
    events = tuple(rows[EVENTS]) if EVENTS in rows else None
    return ParquetRead(figures, executions, events, shown, tuple(notes), files)


def execution_figures(executions: Sequence[Execution]) -> dict[str, float]:
    """EXECUTION_FIGURES of these executions (execution_time only where every execution has both timestamps)."""
    if not executions:
        return {}
    figures = {"execution_count": float(len(executions)),
               "neff_count": float(len({e.neff_name for e in executions if e.neff_name}))}
    durations = [e.duration_ns for e in executions]
    if all(d is not None for d in durations):
        figures["execution_time"] = sum(d for d in durations if d is not None) / 1e9
    return figures


def per_neff(executions: Sequence[Execution]) -> list[tuple[str, int, float | None]]:
    """Each NEFF (by name, "(no NEFF)" for none) with its execution count and summed seconds, most time first."""
    counts: Counter[str] = Counter()
    nanos: dict[str, int | None] = {}
    for e in executions:
        name = e.neff_name or "(no NEFF)"
        counts[name] += 1
        before, d = nanos.get(name, 0), e.duration_ns
        nanos[name] = None if before is None or d is None else before + d
    found = [(n, counts[n], None if (ns := nanos[n]) is None else ns / 1e9) for n in counts]
    return sorted(found, key=lambda t: (-(t[2] or 0.0), t[0]))


_COLUMNS: dict[str, tuple[str, ...]] = {EXECUTIONS: EXECUTION_COLUMNS, EVENTS: EVENT_COLUMNS}


def _rows(paths: list[Path], columns: tuple[str, ...] | None) -> list[dict[str, Any]]:
    """Every row of a (possibly split) table, only ``columns`` where given (those the file has)."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for path in paths:
        names = pq.ParquetFile(path).schema_arrow.names
        wanted = [c for c in columns if c in names] if columns is not None else None
        rows.extend(pq.read_table(path, columns=wanted).to_pylist())
    return rows


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _execution(row: dict[str, Any], position: int) -> Execution:
    index = _integer(row.get("execution_index"))
    name = row.get("neff_name")
    return Execution(position if index is None else index, name if isinstance(name, str) else None,
                     _integer(row.get("execution_start_ts")), _integer(row.get("execution_end_ts")))


def _agreed(rows: list[dict[str, Any]], names: tuple[str, ...]) -> dict[str, float]:
    """Each of ``names`` that every row gives as the same number."""
    agreed: dict[str, float] = {}
    for name in names:
        values = {number(r.get(name)) for r in rows}
        value = values.pop() if len(values) == 1 else None
        if value is not None:
            agreed[name] = value
    return agreed


def _head(summary_rows: list[dict[str, Any]], executions: tuple[Execution, ...], version: str) -> str:
    head = f"device summary from neuron-explorer's Parquet (profile schema {version}): "
    head += f"{len(summary_rows)} Summary row(s)" if summary_rows else "no Summary table"
    if len(summary_rows) > 1:
        head += " summed (times, bytes and counts added; *_percent ratios averaged weighted by total_time)"
    return head + (f", {len(executions)} execution(s) in ExecutionInfo" if executions else ", no ExecutionInfo rows")


def _execution_notes(executions: tuple[Execution, ...]) -> list[str]:
    if not executions:
        return []
    untimed = sum(e.duration_ns is None for e in executions)
    notes = [f"{untimed} execution(s) without start/end (pre-v6 NTFF): no execution time"] if untimed else []
    shown = [f"{name} ×{count}" + (f" {secs * 1e6:.6g} µs" if secs is not None else "")
             for name, count, secs in per_neff(executions)]
    more = len(shown) - SHOWN_NEFFS
    notes.append("executions per NEFF: " + ", ".join(shown[:SHOWN_NEFFS]) + (f", and {more} more" if more > 0 else ""))
    return notes


def _metadata_text(metadata: list[dict[str, Any]]) -> str:
    parts = []
    for name in METADATA_TEXT:
        values = list(dict.fromkeys(str(r[name]) for r in metadata if isinstance(r.get(name), str) and r[name]))
        if values:
            parts.append(f"{name} {'/'.join(values)}")
    return ", ".join(parts)
