"""neuron-explorer's ``summary-json`` as real scripts read it: every Summary record, summed and attributed.

Scripts that read ``view --output-format summary-json`` in the wild treat it as a mapping keyed by
node (``data[next(iter(data))]["total_time"]``), with one entry per NEFF execution in an eager
capture (one NEFF per op), and strip log lines (``level=info msg=...``) printed before the JSON.
Its schema "may change between versions" (SDK ``tools/neuron-explorer/troubleshooting.rst``). So a
record is recognised by its numeric ``total_time`` (the Summary table's required field, SCH)
wherever it sits, and every record counts: times, bytes and counts are added, and the ``*_percent``
counters, which hold RATIOS (0.96 means 96 %: a real inf2 summary has ``mfu_estimated_percent``
0.0049 for 67 MFLOP in 150 µs), are averaged weighted by ``total_time``, exact for a ratio over
``total_time`` (as the engine, MFU and MBU ratios of that capture are). They stay fractions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

CORE_FIELDS = ("total_time", "hbm_read_bytes", "hbm_write_bytes", "mbu_estimated_percent",
               "mbu_min_read_util_percent", "dma_transfer_count", "spill_save_bytes", "spill_reload_bytes")
"""Named as absent when the summary lacks them."""
OPTIONAL_FIELDS = ("total_active_time", "total_active_time_percent", "mfu_estimated_percent",
                   "hfu_estimated_percent", "model_flops", "hardware_flops")
"""Kept where present (names from the real inf2 listing, tests/data/neuron/)."""
ENGINE_FIELD_SUFFIXES = ("_engine_active_time_percent", "_engine_instruction_count", "_engine_active_time")
VERSION_FIELDS = ("profiler_version", "runtime_version", "compiler_version", "driver_version")
SCHEMA_FIELD = "profile_schema_version"
KNOWN_SCHEMA_MAJOR = 7
"""SCH documents schema 7.4.0 (Neuron 2.31); MAJOR changes rename or remove fields."""
RATIO_SUFFIX = "_percent"
WEIGHT = "total_time"
SHOWN_RECORDS = 12
_MAX_DEPTH = 64


@dataclass(frozen=True)
class SummaryRead:
    """The summed figures of every Summary record, the notes saying how, and the schema version where given."""

    figures: dict[str, float]
    notes: tuple[str, ...]
    records: int = 0
    schema_version: str | None = None


def load_json(raw: bytes) -> tuple[Any, int]:
    """The JSON value in ``raw`` and how many non-empty lines before it were skipped (log lines); None if none."""
    text = raw.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    skipped = pos = 0
    for line in text.splitlines(keepends=True):
        body = line.lstrip()
        if body.startswith(("{", "[")):
            try:
                return decoder.raw_decode(text, pos + len(line) - len(body))[0], skipped
            except (ValueError, RecursionError):
                pass
        skipped += bool(line.strip())
        pos += len(line)
    return None, skipped


def records(data: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every JSON object in ``data`` with the key path to it (depth-bounded, in document order)."""
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        path, item, depth = stack.pop()
        if depth > _MAX_DEPTH:
            continue
        if isinstance(item, dict):
            yield path, item
            children = [(f"{path}/{k}" if path else str(k), v) for k, v in item.items()]
        elif isinstance(item, list):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(item)]
        else:
            continue
        stack.extend((p, v, depth + 1) for p, v in reversed(children) if isinstance(v, (dict, list)))


def number(value: Any) -> float | None:
    """A finite JSON number as a float, else None (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def parse_summary(raw: bytes) -> SummaryRead:
    """Every Summary record's kept fields, combined, with notes on what was skipped, summed and absent."""
    data, skipped = load_json(raw)
    if data is None:
        return SummaryRead({}, ("summary-json is not JSON: no device summary",))
    notes = [f"skipped {skipped} line(s) printed before the JSON (log lines)"] if skipped else []
    schema = next((str(r[SCHEMA_FIELD]) for _, r in records(data) if isinstance(r.get(SCHEMA_FIELD), str)), None)
    if schema is not None:
        refusal = schema_refusal(schema)
        if refusal:
            return SummaryRead({}, (refusal,), 0, schema)
        notes.append(f"profile schema {schema}")
    found = [(path, r) for path, r in records(data) if number(r.get(WEIGHT)) is not None]
    if not found:
        return SummaryRead({}, ("summary-json holds no Summary record (no object with a numeric total_time): no "
                                "device summary (its schema may have changed)", *notes), 0, schema)
    figures, partial = combine([r for _, r in found])
    absent = [k for k in CORE_FIELDS if k not in figures]
    head = "device summary from neuron-explorer summary-json"
    if len(found) > 1:
        head += (f": {len(found)} records summed (times, bytes and counts added; *_percent ratios averaged "
                 "weighted by total_time)")
    notes.insert(0, head + (f" (absent: {', '.join(absent)})" if absent else ""))
    if partial:
        notes.append(f"left out, given by only some records: {', '.join(partial)}")
    if len(found) > 1:
        notes.append("records: " + _attribution(found))
    versions = _versions([r for _, r in found])
    if versions:
        notes.append(f"versions reported: {versions}")
    return SummaryRead(figures, tuple(notes), len(found), schema)


def schema_refusal(version: str) -> str | None:
    """None for a profile schema of the major version reportgen reads, else the one-line refusal."""
    major = version.split(".", 1)[0].strip()
    if major.isdigit() and int(major) == KNOWN_SCHEMA_MAJOR:
        return None
    return (f"neuron-explorer profile schema {version} is not one reportgen reads (major version "
            f"{KNOWN_SCHEMA_MAJOR}, documented 7.4.0): no device summary; use a neuron-explorer of schema "
            f"{KNOWN_SCHEMA_MAJOR}.x or a reportgen that reads {version}")


def kept(name: str) -> bool:
    """Whether a Summary field is one reportgen keeps (CORE_FIELDS, OPTIONAL_FIELDS, the per-engine figures)."""
    return name in CORE_FIELDS or name in OPTIONAL_FIELDS or name.endswith(ENGINE_FIELD_SUFFIXES)


def combine(found: list[dict[str, Any]]) -> tuple[dict[str, float], list[str]]:
    """Fields every record gives: summed, or (``*_percent``) the total_time-weighted mean; and those only some give."""
    names = sorted({k for r in found for k, v in r.items() if kept(k) and number(v) is not None})
    weights = [number(r.get(WEIGHT)) or 0.0 for r in found]
    figures: dict[str, float] = {}
    partial = []
    for name in names:
        values = [number(r.get(name)) for r in found]
        if any(v is None for v in values):
            partial.append(name)
            continue
        present = [v for v in values if v is not None]
        if name.endswith(RATIO_SUFFIX) and len(present) > 1:
            total_weight = sum(weights)
            figures[name] = (sum(v * w for v, w in zip(present, weights, strict=True)) / total_weight
                             if total_weight > 0 else sum(present) / len(present))
        else:
            figures[name] = sum(present)
    return {k: figures[k] for k in (*CORE_FIELDS, *OPTIONAL_FIELDS, *names) if k in figures}, partial


def _attribution(found: list[tuple[str, dict[str, Any]]]) -> str:
    """Each record by its key and its total_time (the first SHOWN_RECORDS)."""
    shown = [f"{path or '(top level)'}: total_time {number(r.get(WEIGHT)):.6g} s" for path, r in found[:SHOWN_RECORDS]]
    more = len(found) - SHOWN_RECORDS
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def _versions(found: list[dict[str, Any]]) -> str:
    parts = []
    for name in VERSION_FIELDS:
        values = list(dict.fromkeys(str(r[name]) for r in found if isinstance(r.get(name), (str, int, float))))
        if values:
            parts.append(f"{name} {'/'.join(values)}")
    return ", ".join(parts)
