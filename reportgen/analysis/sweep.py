"""A shape sweep analysed for the report: per shape and variant, latency, bandwidth, its ceiling, FLOP/s, speedup.

Pure functions over the model. Each shape's row says which memory level its working set lives in
and which ceiling applies (``reportgen.analysis.ceilings``); a fraction above 100 % is flagged, not shown.
The roofline (arithmetic intensity against achieved FLOP/s) takes its roofs from the run's peak:
the memory roofs of the bandwidth curve's levels and the compute roof for the run's dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from reportgen.analysis import stats
from reportgen.analysis.ceilings import DRAM, ceiling_for, is_over_ceiling, memory_level, size_text
from reportgen.model.run import CacheLevel, DevicePeak, Run, SweepPoint, SweepSample, VariantStatus


@dataclass(frozen=True)
class SweepCell:
    """One variant at one shape."""

    variant: str
    status: VariantStatus
    error: str | None
    timing: stats.SampleSummary | None
    calls_per_sample: int
    achieved_bytes_per_s: float | None
    fraction_of_ceiling: float | None
    achieved_flops_per_s: float | None
    speedup: stats.Ratio | None
    """median(baseline) / median(this variant) at this shape, with its bootstrap interval; None for the baseline."""
    correctness_passed: bool | None
    peak_bytes: int | None = None
    """One call's peak memory above the inputs at this shape; None: not measured (or unavailable)."""
    memory_source: str = ""

    @property
    def over_ceiling(self) -> bool:
        """True when the fraction exceeds 100 %: the ceiling does not apply to this call."""
        return is_over_ceiling(self.fraction_of_ceiling)


@dataclass(frozen=True)
class SweepRow:
    """One shape of the sweep."""

    shape: tuple[int, ...]
    shape_text: str
    bytes_per_call: int
    flops_per_call: int
    arithmetic_intensity: float | None
    """FLOPs per byte of minimum traffic."""
    level: str | None
    ceiling_bytes_per_s: float | None
    ceiling_source: str
    cells: tuple[SweepCell, ...]
    rounds: int
    error: str | None
    cache_flush_bytes: int = 0
    params_text: str = ""
    """The scenario parameters this point sets (``eps=1e-06``); empty when it sets none."""

    def cell(self, variant: str) -> SweepCell | None:
        """The cell of ``variant`` at this shape, or None."""
        return next((c for c in self.cells if c.variant == variant), None)


@dataclass(frozen=True)
class MemoryRoof:
    """One memory roof of the roofline chart: the best copy bandwidth measured in one memory level."""

    label: str
    bandwidth_bytes_per_s: float


@dataclass(frozen=True)
class SweepView:
    """Everything the sweep section of a run page shows."""

    rows: tuple[SweepRow, ...]
    variants: tuple[str, ...]
    baseline: str | None
    memory_roofs: tuple[MemoryRoof, ...]
    compute_roof_flops_per_s: float | None
    compute_roof_source: str
    any_over_ceiling: bool
    failed_points: int
    cache_levels: tuple[CacheLevel, ...] = ()


def sweep_view(run: Run, baseline: str | None) -> SweepView | None:
    """The sweep of ``run`` analysed against ``baseline`` (the run's); None when the run has no sweep."""
    if not run.sweep:
        return None
    variants = tuple(dict.fromkeys(s.variant for p in run.sweep for s in p.samples))
    rows = tuple(sweep_row(p, run.peak, baseline) for p in run.sweep)
    return SweepView(
        rows=rows,
        variants=variants,
        baseline=baseline if baseline in variants else None,
        memory_roofs=memory_roofs(run.peak),
        compute_roof_flops_per_s=run.peak.flops_per_s,
        compute_roof_source=run.peak.flops_source,
        any_over_ceiling=any(c.over_ceiling for r in rows for c in r.cells),
        failed_points=sum(1 for r in rows if r.error),
        cache_levels=run.peak.cache_levels,
    )


def sweep_row(point: SweepPoint, peak: DevicePeak, baseline: str | None) -> SweepRow:
    """One shape: its ceiling and every variant's cell."""
    ceiling = ceiling_for(peak, point.bytes_per_call)
    base = next((s for s in point.samples if s.variant == baseline and s.samples_us), None)
    cells = tuple(_cell(s, point, ceiling.bandwidth_bytes_per_s, base) for s in point.samples)
    intensity = point.flops_per_call / point.bytes_per_call if point.bytes_per_call > 0 and point.flops_per_call > 0 else None
    return SweepRow(point.shape, ",".join(str(d) for d in point.shape), point.bytes_per_call, point.flops_per_call,
                    intensity, ceiling.level, ceiling.bandwidth_bytes_per_s, ceiling.source, cells, point.rounds,
                    point.error, point.cache_flush_bytes,
                    ", ".join(f"{k}={v}" for k, v in point.params.items()))


def _cell(s: SweepSample, point: SweepPoint, ceiling_bytes_per_s: float | None, base: SweepSample | None) -> SweepCell:
    timing = stats.summarize(s.samples_us) if s.status is not VariantStatus.FAILED else None
    seconds = timing.median_us * 1e-6 if timing and timing.median_us > 0 else None
    achieved = _rate(point.bytes_per_call, seconds)
    flops = _rate(point.flops_per_call, seconds)
    fraction = achieved / ceiling_bytes_per_s if achieved is not None and ceiling_bytes_per_s else None
    speedup = (stats.ratio_of_medians(base.samples_us, s.samples_us)
               if base is not None and s.variant != base.variant and timing is not None else None)
    m = s.memory
    return SweepCell(s.variant, s.status, s.error, timing, s.calls_per_sample, achieved, fraction, flops, speedup,
                     s.correctness_passed, m.peak_bytes if m else None, (m.unavailable or m.source) if m else "")


def _rate(amount: int, seconds: float | None) -> float | None:
    if amount <= 0 or not seconds:
        return None
    value = amount / seconds
    return value if math.isfinite(value) else None


def memory_roofs(peak: DevicePeak) -> tuple[MemoryRoof, ...]:
    """One roof per memory level of the curve, fastest first: each level's ceiling as ``ceiling_for`` picks it
    (the best copy in the level or a slower one), levels with the same ceiling drawn as one ("L1d/L2").

    With no curve: the single figure; with a curve but no cache levels: one roof per copy size."""
    if not peak.bandwidth_curve:
        return (MemoryRoof("peak", peak.bandwidth_bytes_per_s),) if peak.bandwidth_bytes_per_s else ()
    if not peak.cache_levels:
        best = sorted(peak.bandwidth_curve, key=lambda p: -p.bandwidth_bytes_per_s)
        return tuple(MemoryRoof(f"{size_text(p.working_set_bytes)} copy", p.bandwidth_bytes_per_s) for p in best)
    levels = dict.fromkeys(memory_level(p.working_set_bytes, peak.cache_levels) or DRAM for p in
                           sorted(peak.bandwidth_curve, key=lambda p: p.working_set_bytes))
    merged: dict[float, list[str]] = {}
    for level in levels:
        size = next(p.working_set_bytes for p in sorted(peak.bandwidth_curve, key=lambda p: p.working_set_bytes)
                    if (memory_level(p.working_set_bytes, peak.cache_levels) or DRAM) == level)
        bw = ceiling_for(peak, size).bandwidth_bytes_per_s
        if bw:
            merged.setdefault(bw, []).append(level)
    return tuple(MemoryRoof("/".join(names), bw) for bw, names in sorted(merged.items(), key=lambda kv: -kv[0]))
