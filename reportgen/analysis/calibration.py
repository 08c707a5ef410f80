"""What a runner's A/B gate can see: its false-alarm rate and the smallest change it resolves in a time budget.

A calibration is an A/A pair (``reportgen ab --calibrate``: the base checkout on both sides) of many sessions. Each
session gives one ratio head/base per variant; for identical code these ratios are the runner's noise *and* any bias
of its method (a side that always goes first, a process offset), exactly what a real pair's sessions carry.

The gate is then replayed on that noise (a bootstrap of whole sessions, the unit of the gate's interval): a simulated
pair draws sessions with replacement from the A/A ratios, one at a time, and stops as ``reportgen ab`` does (after
``min_sessions``, as soon as the interval decides and a *no change* is narrow enough; at the latest when the
budget's sessions are spent), judged by the same Hodges-Lehmann estimate, signed-rank interval and threshold rule
(``reportgen.analysis.paired``):

- ``false_alarm_pct``: simulated A/A pairs that end *regression* or *improvement* at the threshold;
- ``resolution_pct``: the smallest threshold at which at least ``DECIDE_RATE`` of simulated A/A pairs end *no change*
  within the budget. Below it the gate mostly answers *inconclusive*: a change under it is not detectable in that
  budget, whatever the threshold says;
- ``detectable_slowdown_pct``: the smallest slowdown (every session's ratio times ``1 + s``) called a *regression* in
  at least ``DECIDE_RATE`` of simulated pairs at the threshold, within the budget.

Limits: resampling a few dozen sessions cannot show rarer states than the calibration met (a whole-session state
seen once in 20 sessions is drawn at that rate, one never seen is never drawn); the figures hold for the machine,
scenario, shape and settings calibrated, under the load it had then. Everything here is pure and seeded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reportgen.analysis.paired import MIN_SESSIONS_FOR_INTERVAL, signed_rank_rank

DECIDE_RATE = 0.95
"""The share of simulated pairs that must reach the answer for a figure to count as what the runner can do."""
SIMULATIONS = 400
"""Simulated pairs per rate (a rate of 95 % is then known to about +-1.1 %, one standard error)."""
MAX_PCT = 50.0
"""The largest threshold or slowdown searched: beyond it the runner resolves nothing useful."""
STEP_PCT = 0.1
"""Resolution of the searches (the figures are printed to one decimal)."""


@dataclass(frozen=True)
class GateModel:
    """How ``reportgen ab`` stops: at least ``min_sessions``, at most ``budget_sessions`` (what the time budget holds);
    a *no change* only once its interval's half-width is at most ``precision_pct`` (``analysis.paired.settled``)."""

    min_sessions: int
    budget_sessions: int
    threshold_pct: float
    precision_pct: float = 0.0


@dataclass(frozen=True)
class VariantCalibration:
    """One variant's A/A sessions and what the gate does on them."""

    name: str
    session_ratios: tuple[float, ...]
    aa_change_pct: float
    """The A/A pair's own estimate over all its sessions: identical code, so anything but 0 is bias or chance."""
    aa_ci_low_pct: float
    aa_ci_high_pct: float
    false_alarm_pct: float
    resolution_pct: float | None
    """None: not even at MAX_PCT."""
    detectable_slowdown_pct: float | None


@dataclass(frozen=True)
class Calibration:
    """A runner's calibration for one scenario: per variant, for one gate (threshold, budget)."""

    gate: GateModel
    budget_s: float
    first_session_s: float
    later_session_s: float
    variants: tuple[VariantCalibration, ...]
    simulations: int
    seed: int

    @property
    def resolution_pct(self) -> float | None:
        """The worst variant's resolution (None if one resolves nothing up to MAX_PCT, or there are no variants)."""
        return _worst([v.resolution_pct for v in self.variants])

    @property
    def detectable_slowdown_pct(self) -> float | None:
        """The worst variant's detectable slowdown (None as for ``resolution_pct``)."""
        return _worst([v.detectable_slowdown_pct for v in self.variants])


def _worst(values: list[float | None]) -> float | None:
    """The largest figure; None (beyond the search) if any is, or if there is none."""
    return None if not values or None in values else max(v for v in values if v is not None)


def budget_sessions(budget_s: float, first_session_s: float, later_session_s: float, max_sessions: int) -> int:
    """How many sessions ``budget_s`` holds: the first (it also calibrates and compiles), then later ones; the
    coordinator starts another session only if the time spent plus one more session fits the budget."""
    if first_session_s >= budget_s or later_session_s <= 0:
        return 1
    return min(max_sessions, 1 + math.floor((budget_s - first_session_s) / later_session_s))


def _hl_intervals(logs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``logs`` (simulations x n): the Hodges-Lehmann estimate and signed-rank interval, as ratios."""
    n = logs.shape[1]
    i, j = np.triu_indices(n)
    walsh = np.sort((logs[:, i] + logs[:, j]) / 2.0, axis=1)
    k, _coverage = signed_rank_rank(n)
    return np.exp(np.median(walsh, axis=1)), np.exp(walsh[:, k - 1]), np.exp(walsh[:, -k])


def simulate(session_logs: Sequence[float], shift_log: float, gate: GateModel, simulations: int,
             seed: int) -> dict[str, float]:
    """Replay the gate ``simulations`` times on sessions drawn from ``session_logs`` (each plus ``shift_log``):
    the share of pairs ending in each verdict."""
    rng = np.random.default_rng(seed)
    most = max(gate.budget_sessions, gate.min_sessions)
    draws = rng.choice(np.asarray(session_logs, dtype=float), size=(simulations, most), replace=True) + shift_log
    up, down = math.log1p(gate.threshold_pct / 100.0), math.log1p(-gate.threshold_pct / 100.0)
    verdict = np.full(simulations, "", dtype=object)
    for n in range(max(gate.min_sessions, MIN_SESSIONS_FOR_INTERVAL), most + 1):
        open_ = verdict == ""
        if not open_.any():
            break
        _est, low, high = _hl_intervals(draws[open_, :n])
        lo, hi = np.log(low), np.log(high)
        # paired.interval_settled, vectorised over the open pairs
        precise = (high - low) * 50.0 <= gate.precision_pct if gate.precision_pct else np.ones(len(low), dtype=bool)
        decided = np.where(lo >= up, "regression", np.where(hi <= down, "improvement", np.where(
            (lo > down) & (hi < up) & (precise | (n == most)), "no change", "")))
        if n == most:
            decided = np.where(decided == "", "inconclusive", decided)
        verdict[open_] = decided
    return {v: float(np.mean(verdict == v)) for v in ("regression", "improvement", "no change", "inconclusive")}


def _smallest(pcts: np.ndarray, reaches: object) -> float | None:
    """The smallest value of the sorted grid ``pcts`` for which ``reaches(pct)`` holds (monotone), by bisection."""
    assert callable(reaches)
    if not len(pcts) or not reaches(float(pcts[-1])):
        return None
    lo, hi = 0, len(pcts) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if reaches(float(pcts[mid])):
            hi = mid
        else:
            lo = mid + 1
    return float(pcts[lo])


def calibrate_variant(name: str, session_ratios: Sequence[float], gate: GateModel, simulations: int = SIMULATIONS,
                      seed: int = 0) -> VariantCalibration:
    """One variant's figures (see the module docstring); ``session_ratios`` are an A/A pair's, at least
    MIN_SESSIONS_FOR_INTERVAL of them."""
    if len(session_ratios) < MIN_SESSIONS_FOR_INTERVAL:
        raise ValueError(f"a calibration needs at least {MIN_SESSIONS_FOR_INTERVAL} sessions, got {len(session_ratios)}")
    logs = [math.log(r) for r in session_ratios]
    est, low, high = (float(x[0]) for x in _hl_intervals(np.asarray([logs])))
    grid = np.round(np.arange(STEP_PCT, MAX_PCT + STEP_PCT / 2, STEP_PCT), 1)
    aa = simulate(logs, 0.0, gate, simulations, seed)

    def resolves(pct: float) -> bool:
        at = GateModel(gate.min_sessions, gate.budget_sessions, pct, gate.precision_pct)
        return simulate(logs, 0.0, at, simulations, seed)["no change"] >= DECIDE_RATE

    def detects(pct: float) -> bool:
        return simulate(logs, math.log1p(pct / 100.0), gate, simulations, seed)["regression"] >= DECIDE_RATE

    return VariantCalibration(
        name, tuple(session_ratios), (est - 1) * 100, (low - 1) * 100, (high - 1) * 100,
        false_alarm_pct=100.0 * (aa["regression"] + aa["improvement"]),
        resolution_pct=_smallest(grid, resolves),
        detectable_slowdown_pct=_smallest(grid[grid > gate.threshold_pct], detects))
