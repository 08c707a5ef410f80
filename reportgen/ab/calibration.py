"""``reportgen ab --calibrate``: an A/A of the base against itself, stored, and what it says about a pair's gate.

The calibration pair is stored like any pair, its runs marked ``ab.calibration``; its figures are derived from
those runs whenever they are needed (``reportgen.analysis.calibration``), for the gate a pair actually runs
(its threshold, its ``--max-seconds``, its ``--sessions``), so a calibration stays valid when the budget changes.
A pair's comment uses the newest calibration in its store that measured the same thing the same way: the same
scenario and parameters, device, device model, CPU count, torch threads, allocator settings and method.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any

from reportgen import catalog
from reportgen.ab.bundles import side_label
from reportgen.ab.pair import PairResult, VariantKind
from reportgen.ab.settings import AbSettings
from reportgen.analysis.calibration import SIMULATIONS, Calibration, GateModel, budget_sessions, calibrate_variant
from reportgen.analysis.paired import MIN_SESSIONS_FOR_INTERVAL
from reportgen.compare.variants import stored_session_ratios
from reportgen.errors import BundleError, UsageError
from reportgen.model.run import Run
from reportgen.store.layout import RUN_FILE, slug
from reportgen.store.loader import load_run
from reportgen.store.runjson import parse_run_json

CALIBRATION_SESSIONS = 20
"""Sessions a calibration measures at least (each one a pair of worker processes): the draws the gate is replayed
from. More sessions show rarer states of the runner; ``--sessions`` raises it."""
SEED = 0
"""The replay's seed: a calibration's figures are a function of its sessions."""
MAX_CANDIDATES = 400
READ_BATCH = 32
"""run.json files an object-store lookup reads per request batch (concurrently), newest first."""
"""Newest runs of the pair's scenario and device looked at for a calibration (a store of many pairs stays fast)."""


@dataclass(frozen=True)
class StoredCalibration:
    """A calibration found in the store, with the figures for one pair's gate."""

    base_run_id: str
    created_utc: str
    sessions: int
    calibration: Calibration


def run_settings(settings: AbSettings) -> AbSettings:
    """The settings a calibration runs with: exactly ``max(--sessions, CALIBRATION_SESSIONS)`` sessions, whatever the
    budget and the verdict (the coordinator keeps going until ``min_sessions`` and stops at ``max_sessions``);
    ``settings`` stay the gate whose figures it reports."""
    sessions = max(settings.min_sessions, CALIBRATION_SESSIONS)
    return replace(settings, calibrate=True, min_sessions=sessions, max_sessions=sessions)


def check_calibrate(base: Path, head: Path | None) -> None:
    """A calibration measures the base against itself: a head other than the base is refused."""
    if head is not None and head.resolve() != base.resolve():
        raise UsageError(f"calibrate: measures the base checkout against itself; drop --head {head} (or give the "
                         "base's folder)", field="calibrate")


def calibration_of(ratios: dict[str, tuple[float, ...]], session_s: tuple[float, ...],
                   settings: AbSettings) -> Calibration:
    """Every variant's figures for the gate ``settings`` describe, on a runner whose sessions took ``session_s``
    seconds: the first one's, then the median later one's (seeded: the same sessions give the same figures)."""
    first, later = session_s[0], median(session_s[1:]) if len(session_s) > 1 else session_s[0]
    gate = GateModel(settings.min_sessions, budget_sessions(settings.max_seconds, first, later, settings.max_sessions),
                     settings.threshold_pct, settings.precision_pct)
    variants = tuple(calibrate_variant(name, r, gate, SIMULATIONS, SEED) for name, r in ratios.items()
                     if len(r) >= MIN_SESSIONS_FOR_INTERVAL)
    return Calibration(gate, settings.max_seconds, first, later, variants, SIMULATIONS, SEED)


def from_result(result: PairResult, settings: AbSettings) -> Calibration | None:
    """A calibration pair just measured, for the gate ``settings`` (None: too few sessions or session times)."""
    ratios = {v.name: v.stats.session_ratios for v in result.variants
              if v.kind is VariantKind.MEASURED and v.stats is not None}
    if not ratios or not result.session_s:
        return None
    return calibration_of(ratios, result.session_s, settings)


def from_runs(base: Run, head: Run, settings: AbSettings) -> Calibration | None:
    """A stored calibration pair, for the gate ``settings``."""
    if base.ab is None or head.ab is None or not base.ab.session_s:
        return None
    ratios = {v.name: stored_session_ratios(base.ab, head.ab, v.name) for v in base.variants if v.samples_us}
    return calibration_of(ratios, base.ab.session_s, settings)


def same_measurement(run: Run) -> tuple[Any, ...]:
    """What must match for a calibration to speak for a pair: scenario and parameters (not the inputs' seed), device
    and its model, CPU count, torch threads, allocator settings and the method."""
    env, ab = run.environment, run.ab
    params = tuple(sorted((k, v) for k, v in run.scenario.parameters.items() if k != "seed"))
    return (run.scenario.name, params, run.device.value, env.device_name, env.cpu_count, env.torch_threads,
            tuple(sorted((env.allocator_env or {}).items())), ab.method if ab else None)


def find_calibration(store: Path, pair_base: Run, settings: AbSettings) -> StoredCalibration | None:
    """The newest calibration in ``store`` for what ``pair_base`` (a pair's stored base run) measured, with its figures
    for the gate ``settings``; None when there is none."""
    if not store.is_dir():
        return None
    rows = [e.run for e in catalog.sync(store).entries.values()
            if e.run.scenario == pair_base.scenario.name and e.run.device == pair_base.device.value]
    newest = [r.run_id for r in sorted(rows, key=lambda r: r.run_id, reverse=True)[:MAX_CANDIDATES]]
    return first_calibration(newest, lambda run_id: load_run(store / run_id), pair_base, settings)


def find_listed_calibration(run_ids: Sequence[str], read: Callable[[Sequence[str]], dict[str, bytes]], where: str,
                            pair_base: Run, settings: AbSettings) -> StoredCalibration | None:
    """``find_calibration`` in an object store at ``where``: the candidates are the listed ``run_ids`` of pairs' base
    runs on the pair's device (by name), newest first; ``read`` fetches run.json files, ``READ_BATCH`` at a time,
    until a calibration of the same measurement is found (nothing else of a bundle is read)."""
    marker = base_run_marker(pair_base)
    newest = [i for i in sorted(run_ids, reverse=True) if marker in i][:MAX_CANDIDATES]
    texts: dict[str, bytes] = {}

    def load(run_id: str) -> Run:
        if run_id not in texts:
            texts.update(read([run_id, *[i for i in newest if i not in texts and i != run_id][:READ_BATCH - 1]]))
        if run_id not in texts:
            raise BundleError(f"{where}/{run_id}: no {RUN_FILE}")
        return parse_run_json(texts[run_id], f"{where}/{run_id}/{RUN_FILE}")

    return first_calibration(newest, load, pair_base, settings)


def base_run_marker(pair_base: Run) -> str:
    """What the id of a pair's base run on ``pair_base``'s device contains (``<time>-cpu-a-b-base-<hash>``): an object
    store is searched by its listing, reading only the run.json of runs whose id has it."""
    return f"-{slug(pair_base.device.value, 12) or 'dev'}-{slug(side_label('base'))}-"


def first_calibration(candidates: Iterable[str], load: Callable[[str], Run], pair_base: Run,
                      settings: AbSettings) -> StoredCalibration | None:
    """The first of ``candidates`` (run ids, newest first; ``load`` reads one) that is the base run of a calibration of
    what ``pair_base`` measured, with its figures for the gate ``settings``."""
    wanted = same_measurement(pair_base)
    for run_id in candidates:
        found = _calibration_pair(load, run_id, wanted)
        if found is not None:
            base, head = found
            calibration = from_runs(base, head, settings)
            if calibration is not None and base.ab is not None:
                sessions = len({r.session for r in base.ab.rounds})
                return StoredCalibration(base.run_id, base.created_utc, sessions, calibration)
    return None


def _calibration_pair(load: Callable[[str], Run], run_id: str, wanted: tuple[Any, ...]) -> tuple[Run, Run] | None:
    """The calibration pair whose base run is ``run_id``, if it is one and measured ``wanted``."""
    try:
        run = load(run_id)
        if run.ab is None or not run.ab.calibration or run.ab.side != "base" or same_measurement(run) != wanted:
            return None
        return run, load(run.ab.partner_run_id)
    except (BundleError, OSError):
        return None  # a damaged or withdrawn bundle is no calibration
