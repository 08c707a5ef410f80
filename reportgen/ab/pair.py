"""What an A/B pair measured and concluded: each side's report, each variant's outcome, the rounds, the result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from reportgen.ab.settings import AbSettings, method_text
from reportgen.analysis.paired import AbVerdict, PairStats, overall_verdict
from reportgen.compare.memory import MemoryChange, memory_change
from reportgen.errors import ExitCode
from reportgen.model.codec import from_jsonable
from reportgen.model.memory import VariantMemory
from reportgen.model.run import SessionOrder

SIDES = ("base", "head")


class VariantKind(str, Enum):
    """What happened to one variant in the pair."""

    MEASURED = "measured"
    NEW = "new"  # only in head
    REMOVED = "removed"  # only in base
    BROKEN_IN_HEAD = "broken in head"  # OK in base, failed or incorrect in head: counts as a regression
    FAILED_IN_BASE = "failed in base"  # not OK in base, so not compared
    FAILED_BOTH = "failed on both sides"


@dataclass(frozen=True)
class SideReport:
    """One side as loaded and warmed; ``error``/``error_stage`` set when it failed."""

    side: str
    scenario_name: str | None = None
    scenario_description: str = ""
    device: str | None = None
    time_basis: str | None = None
    cache_flush_bytes: int = 0
    """Bytes the side's device writes to flush its cache before each timed call (CUDA: the L2); 0: none."""
    environment: dict[str, Any] | None = None
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)  # warm replies per variant
    declared: tuple[str, ...] = ()
    default_shape: tuple[int, ...] = ()
    default_dtype: str = "float32"
    dtypes: tuple[str, ...] = ()
    descriptions: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)  # the scenario parameters the side measured with, shown
    cpu: int | None = None  # the CPU the first session's worker was pinned to (None: not pinned; AbSettings.same_cpu)
    error: str | None = None
    error_stage: str | None = None


@dataclass(frozen=True)
class VariantPair:
    """One variant's outcome; ``stats`` only for MEASURED."""

    name: str
    kind: VariantKind
    stats: PairStats | None = None
    base_error: str | None = None
    head_error: str | None = None
    calls_per_sample: int | None = None

    @property
    def verdict(self) -> AbVerdict | None:
        if self.kind is VariantKind.BROKEN_IN_HEAD:
            return AbVerdict.REGRESSION
        return self.stats.verdict if self.stats else None


@dataclass(frozen=True)
class RoundRecord:
    """One counted round: its session (pair of worker processes), which side went first and every block of
    samples (µs) per side and variant. ``index`` counts the rounds inside the session."""

    index: int
    first_side: str
    samples_us: dict[str, dict[str, tuple[float, ...]]]  # side -> variant -> samples
    session: int = 0


def sides_from(side: str) -> tuple[str, str]:
    """Both sides, ``side`` first."""
    return SIDES if side == SIDES[0] else (SIDES[1], SIDES[0])


@dataclass(frozen=True)
class PairResult:
    """Everything a pair measured and concluded."""

    settings: AbSettings
    base: SideReport
    head: SideReport
    shape: tuple[int, ...] | None
    dtype: str | None
    variants: tuple[VariantPair, ...]
    rounds: tuple[RoundRecord, ...]
    stop_reason: str  # "decided", "time budget", "max sessions", "not measured"
    rounds_s: float
    warm_s: float
    notes: tuple[str, ...] = ()
    memory: tuple[MemoryChange, ...] = ()
    """Each variant measured on both sides: its memory per call (first session, before the rounds), base vs head."""
    order_seed: int | None = None
    """The seed of the sessions' orders (``settings.order_seed``, or drawn for this pair); None: not measured."""
    orders: tuple[SessionOrder, ...] = ()
    """Every session's order, as started."""
    session_s: tuple[float, ...] = ()
    """Every session's wall time (the first also calibrated and compiled): what a budget holds."""

    @property
    def memory_regressions(self) -> tuple[MemoryChange, ...]:
        return tuple(m for m in self.memory if m.is_regression)

    @property
    def loaded_side(self) -> SideReport:
        """The side whose device and timer speak for the pair: base, unless it failed to load."""
        return self.base if self.base.error is None else self.head

    @property
    def huge_pages(self) -> bool:
        """Whether huge pages changed what was measured: asked for (or the default where the kernel gives them) and
        the pair ran on the CPU."""
        return self.settings.wants_huge_pages and self.loaded_side.device == "cpu"

    @property
    def method(self) -> str:
        """The method in words, with this pair's own block settings."""
        s, device = self.settings, self.loaded_side
        return method_text(s.samples_per_block, s.discard_per_block, s.clock, self.huge_pages,
                           device.cache_flush_bytes, device.time_basis == "device", s.neuron_cores)

    @property
    def sessions(self) -> int:
        """How many sessions (pairs of worker processes) measured rounds."""
        return session_count(self.rounds)

    @property
    def failed_sides(self) -> tuple[SideReport, ...]:
        return tuple(s for s in (self.base, self.head) if s.error is not None)

    @property
    def verdict(self) -> AbVerdict:
        return overall_verdict([v.verdict for v in self.variants if v.verdict is not None])

    @property
    def exit_code(self) -> ExitCode:
        """3 a side failed to load or warm; 1 regression (time or memory); 7 still inconclusive after the budget;
        else 0."""
        if self.failed_sides:
            return ExitCode.BAD_INPUT
        verdict = self.verdict
        if verdict is AbVerdict.REGRESSION or self.memory_regressions:
            return ExitCode.REGRESSION
        if verdict is AbVerdict.INCONCLUSIVE:
            return ExitCode.INCONCLUSIVE
        return ExitCode.OK


def session_count(rounds: Sequence[RoundRecord]) -> int:
    """How many sessions the rounds came from."""
    return len({r.session for r in rounds})


def side_memory(side: SideReport, name: str) -> VariantMemory | None:
    """The memory per call a side's worker measured for ``name`` in its first warm-up (None: none)."""
    raw = side.variants.get(name, {}).get("memory")
    return from_jsonable(VariantMemory, raw, f"{side.side} worker", f"variants.{name}.memory") if raw else None


def memory_changes(base: SideReport, head: SideReport, pairs: Sequence[VariantPair],
                   threshold_pct: float) -> tuple[MemoryChange, ...]:
    """Memory base vs head of every variant measured on both sides (where either side's worker measured any)."""
    sides = {v.name: (side_memory(base, v.name), side_memory(head, v.name)) for v in pairs
             if v.kind is VariantKind.MEASURED}
    return tuple(memory_change(name, b, h, threshold_pct) for name, (b, h) in sides.items() if b or h)
