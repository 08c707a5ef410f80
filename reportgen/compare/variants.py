"""Per-variant statistics of a comparison: how a timing change, its interval and its outcome are decided.

A variant's change is ``median(head) / median(base) - 1`` with the 95 % bootstrap interval of
``reportgen.analysis.stats.ratio_of_medians`` minus 1. It counts only when ``|change| >= threshold`` AND
the interval excludes 0. A variant that was OK in base but failed or was incorrect in head is
a regression too; variants on one side only are listed as added or removed, never regressions.

Two runs measured apart (not the two sides of one ``reportgen ab`` pair) also differ by how
much the machine drifted between them, which the samples inside each run cannot show. The
interval is widened by that drift (``reportgen.analysis.drift``: the spread of consecutive earlier
runs' medians of the same machine, scenario and parameters in the store). With too little
history the drift is unknown: a change the within-run interval calls significant is then
*inconclusive*, never a regression. The two runs of one A/B pair keep their paired statistics
(the signed-rank interval over their interleaved sessions), unwidened.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from reportgen.analysis.drift import (
    MIN_HISTORY_RATIOS,
    DriftInterval,
    compare_after_the_fact,
    not_interleaved_note,
    widen_by_sd,
)
from reportgen.analysis.paired import MIN_SESSIONS_FOR_INTERVAL, session_interval, session_ratio
from reportgen.analysis.stats import median_or_none, ratio_of_medians
from reportgen.compare.model import Outcome, Pairing, ShapeChange, VariantChange
from reportgen.model.run import AbInfo, AbRound, Run, VariantResult, VariantStatus


@dataclass(frozen=True)
class Sides:
    """The two runs of a comparison and the store's runs the drift between separate runs is estimated from."""

    base: Run
    head: Run
    history: tuple[Run, ...] = ()
    pairing: Pairing = Pairing.SEPARATE


def variant_change(base: VariantResult | None, head: VariantResult | None, threshold_pct: float,
                   sides: Sides) -> VariantChange:
    """The outcome for one variant name, present on one or both sides; ``sides`` (the two runs and the store's
    history) decides how a timing change is judged."""
    if base is None and head is None:
        raise ValueError("variant_change needs at least one side")
    if base is None or head is None:
        side = head if base is None else base
        assert side is not None
        return VariantChange(
            name=side.name,
            outcome=Outcome.ADDED if base is None else Outcome.REMOVED,
            base_status=base.status if base else None,
            head_status=head.status if head else None,
            base_median_us=_median(base),
            head_median_us=_median(head),
            base_samples=len(base.samples_us) if base else 0,
            head_samples=len(head.samples_us) if head else 0,
        )
    timed = _timed_change(base, head, threshold_pct, sides)
    return replace(timed, outcome=_status_outcome(base.status, head.status) or timed.outcome)


def _status_outcome(base: VariantStatus, head: VariantStatus) -> Outcome | None:
    """The outcome decided by correctness alone, or None when both sides are OK."""
    base_ok, head_ok = base is VariantStatus.OK, head is VariantStatus.OK
    if base_ok and head_ok:
        return None
    if base_ok:
        return Outcome.BROKEN
    return Outcome.FIXED if head_ok else Outcome.STILL_BROKEN


def _timed_change(base: VariantResult, head: VariantResult, threshold_pct: float, sides: Sides) -> VariantChange:
    """The timing change of a variant present on both sides (outcome from timing only)."""
    plain = VariantChange(name=base.name, outcome=Outcome.NO_SAMPLES, base_status=base.status,
                          head_status=head.status, base_median_us=_median(base), head_median_us=_median(head),
                          base_samples=len(base.samples_us), head_samples=len(head.samples_us))
    interleaved = sides.pairing is Pairing.INTERLEAVED
    paired = _paired_interval(sides, base.name) if interleaved else None
    if paired is not None:
        ratio, low, high, sessions = paired
    else:
        within = ratio_of_medians(head.samples_us, base.samples_us)
        if within is None:
            return plain
        ratio, low, high, sessions = within.value, within.ci_low, within.ci_high, 0
    timed = replace(plain, outcome=_timing_outcome(ratio, low, high, threshold_pct), change_pct=(ratio - 1) * 100,
                    ci_low_pct=(low - 1) * 100, ci_high_pct=(high - 1) * 100, within_ci_low_pct=(low - 1) * 100,
                    within_ci_high_pct=(high - 1) * 100, paired_sessions=sessions)
    if interleaved:  # too few sessions: the difference between the two processes is not measured
        return timed if paired is not None or timed.outcome is Outcome.NO_CHANGE else replace(
            timed, outcome=Outcome.INCONCLUSIVE)
    drift = _widened(sides, base.name, ratio, low, high)
    if drift is None or drift.drift_pct is None:  # drift unknown: the within-run interval cannot decide alone
        return timed if timed.outcome is Outcome.NO_CHANGE else replace(timed, outcome=Outcome.INCONCLUSIVE)
    return replace(timed, outcome=_timing_outcome(drift.ratio, drift.ci_low, drift.ci_high, threshold_pct),
                   ci_low_pct=(drift.ci_low - 1) * 100, ci_high_pct=(drift.ci_high - 1) * 100,
                   drift_pct=drift.drift_pct, drift_runs=drift.history_ratios + 1)


def _timing_outcome(ratio: float, low: float, high: float, threshold_pct: float) -> Outcome:
    """Slower or faster when ``|ratio - 1| >= threshold`` and the interval [low, high] excludes 1; else no change."""
    change = (ratio - 1) * 100
    significant = (abs(change) >= threshold_pct and math.isfinite(low) and math.isfinite(high)
                   and not (low <= 1.0 <= high))
    return (Outcome.SLOWER if change > 0 else Outcome.FASTER) if significant else Outcome.NO_CHANGE


def _widened(sides: Sides, variant: str, ratio: float, low: float, high: float) -> DriftInterval | None:
    """The ratio's interval widened by the drift between separate runs; None when the interval is not a usable
    one (not finite, or not around the ratio), which leaves the drift unknown."""
    if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= ratio <= high):
        return None
    return compare_after_the_fact(sides.history, sides.base, sides.head, variant, ratio, low, high)


def _paired_interval(sides: Sides, variant: str) -> tuple[float, float, float, int] | None:
    """(ratio, low, high, sessions): the signed-rank interval over the A/B pair's sessions (as ``reportgen ab``
    computes it: per round a ratio of block medians, per session ``paired.session_ratio`` of them); None when the
    rounds do not hold enough sessions with blocks of ``variant`` on both sides (a pair stored before sessions
    existed has one)."""
    b_ab, h_ab = sides.base.ab, sides.head.ab
    if b_ab is None or h_ab is None:
        return None
    ratios = stored_session_ratios(b_ab, h_ab, variant)
    if len(ratios) < MIN_SESSIONS_FOR_INTERVAL:
        return None
    ratio, low, high, _coverage = session_interval(ratios)
    return ratio, low, high, len(ratios)


def stored_session_ratios(base: AbInfo, head: AbInfo, variant: str) -> tuple[float, ...]:
    """Per session of a stored A/B pair, ``paired.session_ratio`` of its rounds' ratios head/base of ``variant``'s
    block medians (as ``reportgen ab`` computes them), in session order."""
    base_medians, head_medians = _round_medians(base.rounds, variant), _round_medians(head.rounds, variant)
    by_session: dict[int, dict[int, float]] = {}
    for key in sorted(set(base_medians) & set(head_medians)):
        by_session.setdefault(key[0], {})[key[1]] = head_medians[key] / base_medians[key]
    return tuple(session_ratio(r) for r in by_session.values())


def _round_medians(rounds: Sequence[AbRound], variant: str) -> dict[tuple[int, int], float]:
    """(session, round index) -> the median of this variant's block in that round (blocks with a positive, finite
    median)."""
    out = {}
    for r in rounds:
        for block in r.samples:
            m = median_or_none(block.samples_us) if block.variant == variant else None
            if m is not None and math.isfinite(m) and m > 0:
                out[(r.session, r.index)] = m
    return out


def _median(v: VariantResult | None) -> float | None:
    return median_or_none(v.samples_us) if v is not None else None


def shape_changes(base: Run, head: Run, changes: Sequence[VariantChange]) -> tuple[ShapeChange, ...]:
    """Every variant at every shape both sweeps measured without error, in head's order."""
    base_points = {(p.shape, tuple(sorted(p.params.items()))): p for p in base.sweep if p.error is None}
    drift = {v.name: v.drift_pct for v in changes}
    out = []
    for point in head.sweep:
        before = base_points.get((point.shape, tuple(sorted(point.params.items()))))
        if point.error is not None or before is None:
            continue
        for h in point.samples:
            b = next((s for s in before.samples if s.variant == h.variant), None)
            if b is None or VariantStatus.FAILED in (b.status, h.status):
                continue
            r = ratio_of_medians(h.samples_us, b.samples_us)
            if r is None or not r.ci_low > 0:
                continue
            sd = drift.get(h.variant)
            lo, hi = widen_by_sd(r.value, r.ci_low, r.ci_high, sd / 100) if sd is not None else (r.ci_low, r.ci_high)
            label = ",".join(str(d) for d in point.shape) + "".join(f" · {k}={v}" for k, v in point.params.items())
            out.append(ShapeChange(label, h.variant, median_or_none(b.samples_us) or 0.0,
                                   median_or_none(h.samples_us) or 0.0, (r.value - 1) * 100, (lo - 1) * 100,
                                   (hi - 1) * 100, sd is not None))
    return tuple(out)


def drift_note(pairing: Pairing, minutes: float, changes: Sequence[VariantChange], pair_id: str | None) -> str:
    """The comparison's one sentence on how the runs were measured and what its intervals cover."""
    if pairing is Pairing.INTERLEAVED:
        return (f"interleaved A/B pair {pair_id}: paired statistics over its sessions; the drift between runs "
                "cancels in each round's ratio, so the intervals are not widened")
    note = not_interleaved_note(minutes)
    timed = [c for c in changes if c.within_ci_low_pct is not None]
    known = [c for c in timed if c.drift_pct is not None]
    if timed and len(known) == len(timed):
        return f"{note}; intervals widened by the drift between runs measured from the store's earlier runs"
    unknown = (f"drift between runs unknown (fewer than {MIN_HISTORY_RATIOS + 1} earlier runs of this machine, "
               "scenario and parameters in the store)")
    if known:
        unknown = f"intervals widened by the drift between runs where it is known; for the others the {unknown}"
    return (f"{note}; {unknown}, so a change within the runs is inconclusive, never a regression; "
            "measure both sides interleaved with `reportgen ab`")
