"""History windows kept in the site, so that adding runs does not read every run's points from the catalog.

Beside each history chart, ``history/<chart>.window.json`` holds the points of the group's window (its latest
``HISTORY_WINDOW`` runs) as columns, and the group's number of runs. A build that only adds runs to the old site's
(the same renderer, the same withdrawn runs, every run the old site listed still listed, no listed run drawn again
from a changed ``run.json``, no ``--verify``) makes each group's points from its old window and the new runs'
digests: the same groups a read of the catalog gives (``tests/test_site_windows.py`` builds both ways and compares
the bytes), at a cost that does not grow with the store. Otherwise, or when a window file is missing or not one
this reportgen wrote, the build reads the catalog as before. Windows are a cache: they are checked (types, runs,
counts), not proven; ``build --verify`` reads the catalog.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

from reportgen.analysis.history import GroupPoint, HistoryGroup
from reportgen.site.manifest import SiteRuns
from reportgen.site.plan import SitePlan
from reportgen.store.files import read_regular
from reportgen.store.layout import is_valid_run_id
from reportgen.text.documents import Limits, load_json

WINDOW_SUFFIX = ".window.json"
SCHEMA_VERSION = 1
STATE_KEY = "history_windows"
"""The manifest's ``lists`` entry saying what the windows were computed from (:func:`state`)."""
FIELDS = tuple(f.name for f in dataclasses.fields(GroupPoint))
"""GroupPoint's fields, in order: a window file's columns (each with its value types in ``_TYPES``)."""
LIMITS = Limits(max_bytes=64 * 1024 * 1024)
_TYPES: dict[str, set[type]] = {
    "key": {str}, "device": {str}, "where": {str}, "scenario": {str}, "parameters": {list}, "run_id": {str},
    "created_utc": {str}, "git_sha": {str, type(None)}, "variant_index": {int}, "variant": {str, type(None)},
    "median_us": {float, type(None)}, "ci_low_us": {float, type(None)}, "ci_high_us": {float, type(None)},
    "speedup": {float, type(None)}}
"""The types of each column's values (a bool is not an int here: ``type``, not ``isinstance``)."""


def window_name(chart_name: str) -> str:
    """The window file beside a chart: ``<chart stem>.window.json``."""
    return chart_name.removesuffix(".svg") + WINDOW_SUFFIX


def state(plan: SitePlan) -> dict[str, object]:
    """What the windows of a build are computed from: the renderer (any code change, the points' included) and the
    withdrawn runs (a withdrawal takes a run out of every list)."""
    withdrawn = hashlib.sha256("\0".join(sorted(plan.withdrawn)).encode()).hexdigest()[:24]
    return {"schema_version": SCHEMA_VERSION, "renderer_version": plan.renderer_version, "withdrawn": withdrawn}


def old_windows(run_ids: Sequence[str], runs: SiteRuns, plan: SitePlan, old_groups: object, folder: Path
                ) -> tuple[list[GroupPoint], dict[str, int], set[str]] | None:
    """Each group's old window and number of runs, and the runs they cover (those the old site listed), when this
    build only adds runs to the old site's (each new run's points are then in its digest); None when the catalog
    must be read. ``old_groups``: the old manifest's history entries; ``folder``: the old site's history folder."""
    if plan.verify or plan.old_lists.get(STATE_KEY) != state(plan) or not isinstance(old_groups, dict):
        return None
    listed = set(run_ids)
    old = plan.old_runs
    old_listed = old.ids().difference(plan.withdrawn)  # what the old site listed (the withdrawn runs are the same)
    if not old_listed <= listed:
        return None  # a run left the lists
    if any(p.run_id in old.sha256 and old.sha256[p.run_id] != runs.sha256.get(p.run_id) for p in plan.render):
        return None  # a listed run drawn again from a changed run.json: its points may have changed
    if not all(i in runs.digests for i in listed.difference(old_listed)):
        return None
    points: list[GroupPoint] = []
    totals: dict[str, int] = {}
    for key, entry in old_groups.items():
        found = _read(folder, key, entry, old_listed)
        if found is None:
            return None
        points += found[0]
        totals[key] = found[1]
    return points, totals, old_listed


def write(path: Path, group: HistoryGroup, points: Sequence[GroupPoint]) -> None:
    """Write the window of ``group`` (its runs' points among ``points``, the group's own) to ``path``, as columns,
    in one order whatever the order of ``points`` (the same file whether the history came from here or the catalog)."""
    kept = set(group.run_ids)
    mine = sorted((p for p in points if p.run_id in kept), key=_order)
    columns = {f: list(map(attrgetter(f), mine)) for f in FIELDS}  # tuples are written as lists
    text = json.dumps({"schema_version": SCHEMA_VERSION, "key": group.key, "runs_total": group.runs_total,
                       "columns": columns}, sort_keys=True, allow_nan=False, separators=(",", ":"))
    path.write_text(text + "\n", encoding="utf-8")


def _order(p: GroupPoint) -> tuple[str, str, int, str, float]:
    return (p.created_utc, p.run_id, p.variant_index, p.variant or "", -1.0 if p.median_us is None else p.median_us)


def _read(folder: Path, key: object, entry: object, listed: set[str]) -> tuple[list[GroupPoint], int] | None:
    """One old group's window points and run count; None when its file is missing or not what it should be."""
    name = entry.get("window") if isinstance(entry, dict) else None
    if not isinstance(key, str) or not isinstance(name, str) or os.sep in name or not name.endswith(WINDOW_SUFFIX):
        return None
    try:
        path = folder / name
        if path.is_symlink():  # a site's files are its own: a link is not one reportgen wrote
            return None
        raw = read_regular(path, LIMITS.max_bytes)
        data = load_json(raw, name, LIMITS, fix="", walk=False)
    except Exception:  # noqa: BLE001  a cache: anything wrong (a link, unreadable, not JSON) means the catalog is read
        return None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION or data.get("key") != key:
        return None
    total, columns = data.get("runs_total"), data.get("columns")
    if type(total) is not int or not isinstance(columns, dict):
        return None
    points = _points(columns, key, listed)
    return None if points is None or total < len({p.run_id for p in points}) else (points, total)


def _points(columns: dict[str, Any], key: str, listed: set[str]) -> list[GroupPoint] | None:
    """The points of a window file's columns, each value of its field's type, every run listed and valid (checked
    a column at a time: a window holds thousands of values)."""
    values: list[Any] = [columns.get(f) for f in FIELDS]
    if not all(type(v) is list for v in values) or len(set(map(len, values))) != 1:
        return None
    for f, column in zip(FIELDS, values, strict=True):
        if not set(map(type, column)) <= _TYPES[f]:
            return None
        if float in _TYPES[f] and not all(map(math.isfinite, [v for v in column if v is not None])):
            return None
    runs = set(columns["run_id"])
    if set(columns["key"]) - {key} or not runs <= listed or not all(map(is_valid_run_id, runs)):
        return None
    pairs = [pair for params in columns["parameters"] for pair in params]
    if not set(map(type, pairs)) <= {list} or not set(map(len, pairs)) <= {2} or not set(
            map(type, (x for pair in pairs for x in pair))) <= {str}:
        return None
    values[FIELDS.index("parameters")] = [tuple(map(tuple, params)) for params in columns["parameters"]]
    return list(map(GroupPoint, *values))
