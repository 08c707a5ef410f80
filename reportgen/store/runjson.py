"""The text of ``run.json``: serialised, parsed and validated (schema version, ids, times, member paths).

Older ``run.json`` files are upgraded as they are parsed (``reportgen.model.migrations``).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from reportgen.errors import BundleError
from reportgen.model.codec import from_jsonable, to_jsonable
from reportgen.model.migrations import upgrade
from reportgen.model.run import SCHEMA_VERSION, Run
from reportgen.store.layout import is_safe_relpath, is_valid_run_id
from reportgen.text.documents import Limits, load_json

MAX_RUN_JSON_BYTES = 256 * 1024 * 1024
RUN_JSON_LIMITS = Limits(max_bytes=MAX_RUN_JSON_BYTES)

_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
"""Whole seconds, UTC: the one form reportgen writes, so that sorting the strings sorts the times."""


def run_to_json(run: Run) -> str:
    """Serialise ``run`` as stored in ``run.json`` (sorted keys, no NaN, trailing newline)."""
    return json.dumps(to_jsonable(run), indent=1, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


def parse_run_json(text: str | bytes, source: Path | str) -> Run:
    """Validate and decode a ``run.json`` (its bytes or text); every failure names the file and field."""
    data = load_json(text, source, RUN_JSON_LIMITS, fix="the bundle is corrupt, re-run or re-import it",
                     error=BundleError)
    if not isinstance(data, dict):
        raise BundleError(f"{source}: expected a JSON object at the top level; this is not a run.json")
    _check_schema_version(data, source)
    run = from_jsonable(Run, upgrade(data, source), source)
    _check_run(run, source)
    return run


def _is_utc_time(text: str) -> bool:
    """True for a real UTC time in the one form reportgen writes (month 13 or second 61 is not one)."""
    if not _TIME_RE.match(text):
        return False
    try:
        datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return False
    return True


def _check_schema_version(data: dict[str, object], source: Path | str) -> None:
    version = data.get("schema_version")
    if "schema_version" not in data:
        raise BundleError(f"{source}: field 'schema_version' is missing; this is not a reportgen run.json")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BundleError(f"{source}: field 'schema_version' is {version!r}, expected a positive integer")
    if version > SCHEMA_VERSION:
        raise BundleError(
            f"{source}: field 'schema_version' is {version}, newer than this reportgen reads "
            f"({SCHEMA_VERSION}); upgrade reportgen"
        )


def _check_run(run: Run, source: Path | str) -> None:
    if not is_valid_run_id(run.run_id):
        raise BundleError(f"{source}: field 'run_id' {run.run_id[:60]!r} is not a safe folder name")
    if not _is_utc_time(run.created_utc):
        raise BundleError(f"{source}: field 'created_utc' {run.created_utc[:40]!r} is not a UTC time like "
                          "2026-11-30T04:55:00Z")
    names = [v.name for v in run.variants]
    if len(set(names)) != len(names):
        raise BundleError(f"{source}: field 'variants' has duplicate names; each variant must be unique")
    for i, v in enumerate(run.variants):
        for j, ref in enumerate([v.trace_path, *(a.path for a in v.artifacts)]):
            if ref is not None and not is_safe_relpath(ref):
                field = "trace_path" if j == 0 else f"artifacts[{j - 1}].path"
                raise BundleError(f"{source}: field 'variants[{i}].{field}' {ref[:60]!r} points outside the bundle")
    _check_no_file_holds_another(run, source)


def _check_no_file_holds_another(run: Run, source: Path | str) -> None:
    """Refuse member paths where one file would have to be the folder of another (``a`` and ``a/b``)."""
    refs = {ref for v in run.variants for ref in (v.trace_path, *(a.path for a in v.artifacts)) if ref is not None}
    for i, v in enumerate(run.variants):
        for j, ref in enumerate([v.trace_path, *(a.path for a in v.artifacts)]):
            parts = ref.split("/") if ref is not None else []
            outer = next(("/".join(parts[:k]) for k in range(1, len(parts)) if "/".join(parts[:k]) in refs), None)
            if ref is not None and outer is not None:
                field = "trace_path" if j == 0 else f"artifacts[{j - 1}].path"
                raise BundleError(f"{source}: field 'variants[{i}].{field}' {ref[:60]!r} lies inside {outer[:60]!r}, "
                                  "which is a file of the bundle")
