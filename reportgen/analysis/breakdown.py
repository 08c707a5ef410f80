"""A page's views of stored breakdowns: one variant's rows and spread, and ranks side by side (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reportgen.analysis.stats import median
from reportgen.model.breakdown import PartSpread, StepBreakdown, TraceBreakdown


@dataclass(frozen=True)
class RankLine:
    """One rank (one trace) of a folder import."""

    variant: str
    rank: int | None
    steps: int
    median_step_us: float
    """Median step window; the whole trace's wall time when it has no steps."""
    device_busy_fraction: float | None
    communication_busy_us: float
    overlap_fraction: float | None
    is_straggler: bool
    over_median: float
    """(this rank's median step time - the median over ranks) / the median over ranks."""


@dataclass(frozen=True)
class RankSummary:
    """Ranks side by side: step time, the straggler, communication/computation overlap."""

    lines: tuple[RankLine, ...]
    median_step_us: float
    straggler: str


def _step_time(b: TraceBreakdown) -> tuple[int, float]:
    wall = next((p for p in b.spread if p.part == "wall_us"), None)
    return (b.step_count, wall.median_us) if wall is not None else (0, b.whole.wall_us)


def rank_summary(variants: Sequence[tuple[str, TraceBreakdown]]) -> RankSummary | None:
    """Two or more traces side by side (ordered by rank, then name); None for fewer."""
    if len(variants) < 2:
        return None
    ordered = sorted(variants, key=lambda t: (t[1].rank is None, t[1].rank or 0, t[0]))
    times = {name: _step_time(b) for name, b in ordered}
    mid = median([t for _, t in times.values()])
    straggler = max(ordered, key=lambda t: (times[t[0]][1], t[0]))[0]
    lines = tuple(
        RankLine(name, b.rank, times[name][0], times[name][1],
                 b.whole.device_busy_us / b.whole.wall_us if b.device_work_count and b.whole.wall_us > 0 else None,
                 b.communication_busy_us, b.overlap_fraction, name == straggler,
                 (times[name][1] - mid) / mid if mid > 0 else 0.0)
        for name, b in ordered)
    return RankSummary(lines, mid, straggler)




@dataclass(frozen=True)
class BreakdownView:
    """What a run page shows of one variant's stored breakdown."""

    stored: TraceBreakdown
    rows: tuple[StepBreakdown, ...]
    """The step windows listed (the stored ones), or the whole trace when it has no steps."""
    hidden_step_count: int
    spread: tuple[PartSpread, ...]
    busy_fraction: float | None
    """Device busy / the whole trace's wall time; None without device work."""

    @property
    def has_device_work(self) -> bool:
        """True when the trace has kernels, copies or fills."""
        return self.stored.device_work_count > 0


def breakdown_view(b: TraceBreakdown) -> BreakdownView:
    """The page's view of a stored breakdown: rows to list and the spread over steps."""
    rows = b.steps if b.steps else (b.whole,)
    busy = b.whole.device_busy_us / b.whole.wall_us if b.device_work_count and b.whole.wall_us > 0 else None
    return BreakdownView(b, rows, b.step_count - len(b.steps), b.spread, busy)
