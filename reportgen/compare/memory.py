"""Memory changes between two measurements of a variant, with their own threshold: the memory half of the gate.

A figure both sides measured exactly (two calls agreed; the same source) is compared exactly: any increase
beyond ``memory_threshold_pct`` (default 0: any increase at all) is a regression. A figure either side measured
inexactly needs at least ``INEXACT_MEMORY_PCT``. Used by ``compare`` (stored runs) and ``ab`` (the pair's sides).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from reportgen.model.memory import VariantMemory

DEFAULT_MEMORY_THRESHOLD_PCT = 0.0
"""Growth of an exact figure that counts as a regression: 0, so one more allocation or byte is one."""
INEXACT_MEMORY_PCT = 10.0
"""The least growth that counts where a side's two measured calls disagreed (the figure is not exact)."""
FIGURES = (("peak_bytes", "peak"), ("allocated_bytes", "bytes allocated"), ("allocation_count", "allocations"))
"""The compared figures of ``VariantMemory`` and their names in the comment."""


class MemoryOutcome(str, Enum):
    """What happened to a variant's memory between base and head."""

    MORE = "more memory"  # a figure grew beyond the threshold: a regression
    LESS = "less memory"
    SAME = "unchanged"
    NOT_COMPARED = "not compared"


@dataclass(frozen=True)
class FigureChange:
    """One figure's base and head values and the change in percent (None when base is 0)."""

    figure: str
    label: str
    base: int
    head: int
    change_pct: float | None
    exact: bool
    grew: bool
    """Beyond the threshold that applies (exact or not)."""


@dataclass(frozen=True)
class MemoryChange:
    """One variant's memory between base and head; ``reason`` says why it was not compared."""

    name: str
    outcome: MemoryOutcome
    figures: tuple[FigureChange, ...] = ()
    reason: str = ""
    source: str = ""

    @property
    def is_regression(self) -> bool:
        return self.outcome is MemoryOutcome.MORE

    @property
    def grown(self) -> tuple[FigureChange, ...]:
        """The figures that grew beyond the threshold."""
        return tuple(f for f in self.figures if f.grew)


def memory_change(name: str, base: VariantMemory | None, head: VariantMemory | None,
                  threshold_pct: float = DEFAULT_MEMORY_THRESHOLD_PCT) -> MemoryChange:
    """Compare one variant's memory; not compared when a side has none, says it is unavailable, or the sources
    differ (a CPU profiler count and a CUDA allocator count are different measures)."""
    reason = _not_comparable(base, head)
    if reason or base is None or head is None:
        return MemoryChange(name, MemoryOutcome.NOT_COMPARED, reason=reason)
    exact = base.exact and head.exact
    needed = threshold_pct if exact else max(threshold_pct, INEXACT_MEMORY_PCT)
    figures = []
    for attr, label in FIGURES:
        b, h = getattr(base, attr), getattr(head, attr)
        if b is None or h is None:
            continue
        pct = (h - b) / b * 100.0 if b else None
        grew = h > b and (pct is None or pct > needed)
        figures.append(FigureChange(attr, label, b, h, pct, exact, grew))
    if any(f.grew for f in figures):
        outcome = MemoryOutcome.MORE
    elif any(f.head < f.base for f in figures) and (exact or any(
            f.change_pct is not None and -f.change_pct > needed for f in figures)):
        outcome = MemoryOutcome.LESS
    else:
        outcome = MemoryOutcome.SAME
    return MemoryChange(name, outcome, tuple(figures), source=head.source)


def _not_comparable(base: VariantMemory | None, head: VariantMemory | None) -> str:
    if base is None or head is None:
        return f"not measured in {'base' if base is None else 'head'}"
    if base.unavailable or head.unavailable:
        return base.unavailable or head.unavailable or ""
    if base.source != head.source:
        return "measured from different sources"
    return ""
