"""Comparing two runs measured apart (``reportgen compare``): widen the interval by the drift between runs.

A bootstrap over the samples inside each run knows nothing of how much a whole run moves
from one run to the next (clock, thermal state, other tenants, a fresh process's memory
layout). The store's history measures that: for earlier runs of the same machine, scenario
and parameters, the ratio of each run's median to the previous run's median is exactly the
ratio two separate runs of unchanged code show. Its spread (the standard deviation of the log
ratios) is the between-run drift; the comparison's interval is widened by it, in log space:

    half-width = sqrt(within_half_width**2 + (Z * drift_sd)**2), on each side, Z = 1.96

Pure functions over the model; compare.py calls ``compare_after_the_fact`` for every variant of two separate runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from reportgen.analysis.stats import median
from reportgen.model.run import Run, VariantStatus

Z_95 = 1.959963984540054
MIN_HISTORY_RATIOS = 3
"""Consecutive-run ratios needed before the drift is estimated (4 earlier runs)."""


@dataclass(frozen=True)
class DriftInterval:
    """A stored-run comparison's ratio with its interval widened by the drift between runs."""

    ratio: float
    ci_low: float
    ci_high: float
    within_low: float
    within_high: float
    drift_pct: float | None  # sd of log ratios between consecutive earlier runs, in percent; None: unknown
    history_ratios: int
    minutes_apart: float
    note: str


def run_key(run: Run) -> tuple[object, ...]:
    """What makes two runs' times comparable as a history: device, host, device model, scenario and parameters."""
    return (run.device, run.environment.hostname, run.environment.device_name, run.scenario.name,
            tuple(sorted(run.scenario.parameters.items())))


def history_medians(runs: Sequence[Run], base: Run, variant: str) -> tuple[float, ...]:
    """Median per-call time of ``variant`` in each run like ``base`` (same ``run_key``) up to and including
    base, oldest first; runs where the variant is missing, not OK or without samples are skipped."""
    key = run_key(base)
    chosen = sorted((r for r in runs if run_key(r) == key and (r.created_utc, r.run_id) <= (base.created_utc, base.run_id)),
                    key=lambda r: (r.created_utc, r.run_id))
    out = []
    for r in chosen:
        v = r.variant(variant)
        if v is not None and v.status is VariantStatus.OK and v.samples_us:
            out.append(median(v.samples_us))
    return tuple(out)


def consecutive_ratios(medians_us: Sequence[float]) -> tuple[float, ...]:
    """``m[i+1] / m[i]`` for each consecutive pair of runs."""
    return tuple(b / a for a, b in zip(medians_us, medians_us[1:], strict=False) if a > 0 and b > 0)


def drift_sd(ratios: Sequence[float]) -> float | None:
    """Sample standard deviation (n-1) of the log ratios; None with fewer than MIN_HISTORY_RATIOS."""
    if len(ratios) < MIN_HISTORY_RATIOS:
        return None
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


def minutes_apart(base_created_utc: str, head_created_utc: str) -> float:
    """Minutes between two ``created_utc`` stamps (2026-11-30T04:55:00Z form), never negative."""
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    delta = datetime.strptime(head_created_utc, fmt) - datetime.strptime(base_created_utc, fmt)
    return abs(delta.total_seconds()) / 60.0


def not_interleaved_note(minutes: float) -> str:
    """'not interleaved: taken 42 minutes apart' (rounded to whole minutes; seconds under one minute)."""
    if minutes < 1:
        return f"not interleaved: taken {round(minutes * 60)} seconds apart"
    n = round(minutes)
    return f"not interleaved: taken {n} minute{'s' if n != 1 else ''} apart"


def widen_for_drift(ratio: float, ci_low: float, ci_high: float, history_ratios: Sequence[float],
                    minutes: float) -> DriftInterval:
    """The comparison's ratio with its interval widened by the between-run drift (see the module docstring)."""
    if not (0 < ci_low <= ratio <= ci_high):
        raise ValueError("expected 0 < ci_low <= ratio <= ci_high")
    sd = drift_sd(history_ratios)
    note = not_interleaved_note(minutes)
    if sd is None:
        return DriftInterval(ratio, ci_low, ci_high, ci_low, ci_high, None, len(history_ratios), minutes,
                             f"{note}; the drift between runs is unknown (fewer than {MIN_HISTORY_RATIOS + 1} earlier "
                             "runs of this machine, scenario and parameters), so the interval covers only the "
                             "samples within each run")
    low, high = widen_by_sd(ratio, ci_low, ci_high, sd)
    return DriftInterval(ratio, low, high, ci_low, ci_high, sd * 100.0,
                         len(history_ratios), minutes,
                         f"{note}; interval widened by the drift between {len(history_ratios) + 1} earlier runs "
                         f"(sd {sd * 100:.1f} % per run)")


def widen_by_sd(ratio: float, ci_low: float, ci_high: float, sd: float) -> tuple[float, float]:
    """The interval ``(ci_low, ci_high)`` around ``ratio`` widened, in log space, by a drift of ``sd`` (log units)."""
    extra = Z_95 * sd
    lo = math.sqrt(math.log(ratio / ci_low) ** 2 + extra**2)
    hi = math.sqrt(math.log(ci_high / ratio) ** 2 + extra**2)
    return ratio * math.exp(-lo), ratio * math.exp(hi)


def compare_after_the_fact(runs: Sequence[Run], base: Run, head: Run, variant: str, ratio: float, ci_low: float,
                           ci_high: float, history_variant: str | None = None) -> DriftInterval:
    """One call for compare.py: history of ``history_variant`` (default: ``variant``) from ``runs``, then widen."""
    medians = history_medians(runs, base, history_variant or variant)
    return widen_for_drift(ratio, ci_low, ci_high, consecutive_ratios(medians),
                           minutes_apart(base.created_utc, head.created_utc))
