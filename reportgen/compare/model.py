"""The comparison's data: per-variant outcomes, op-table differences, environment warnings and the verdict."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from reportgen.compare.memory import MemoryChange
from reportgen.model.run import TimeBasis, VariantStatus


class Outcome(str, Enum):
    """What happened to one variant between base and head."""

    FASTER = "faster"
    SLOWER = "slower"
    NO_CHANGE = "no significant change"
    INCONCLUSIVE = "inconclusive"  # significant within the runs, but the drift between them is unknown
    BROKEN = "broken"  # OK in base, failed or incorrect in head: a regression
    FIXED = "fixed"  # not OK in base, OK in head
    STILL_BROKEN = "still broken"
    NO_SAMPLES = "no timing samples"
    ADDED = "added"
    REMOVED = "removed"


class Verdict(str, Enum):
    """The one-line answer of the comment."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    INCONCLUSIVE = "inconclusive"
    NO_CHANGE = "no significant change"


class Pairing(str, Enum):
    """How the two runs were measured: apart (the drift between them widens the interval) or as one A/B pair."""

    SEPARATE = "separate"
    INTERLEAVED = "interleaved"


@dataclass(frozen=True)
class RunRef:
    """Which run a side of the comparison is."""

    run_id: str
    label: str
    created_utc: str
    git_sha: str | None
    device: str


@dataclass(frozen=True)
class VariantChange:
    """One variant's base and head times and the change between them."""

    name: str
    outcome: Outcome
    base_status: VariantStatus | None
    head_status: VariantStatus | None
    base_median_us: float | None = None
    head_median_us: float | None = None
    change_pct: float | None = None
    ci_low_pct: float | None = None
    """The interval the outcome is decided on: widened by the drift between separate runs when it is known."""
    ci_high_pct: float | None = None
    base_samples: int = 0
    head_samples: int = 0
    within_ci_low_pct: float | None = None
    """The interval of the samples within the runs alone (bootstrap; for an A/B pair, the paired interval)."""
    within_ci_high_pct: float | None = None
    drift_pct: float | None = None
    """Between-run drift (sd of consecutive earlier runs' log median ratios, in percent); None: unknown or a pair."""
    drift_runs: int = 0
    """How many earlier runs (up to and including base) the drift was estimated from; 0 when it is unknown."""
    paired_sessions: int = 0
    """Sessions of the interleaved A/B pair the paired interval came from (0: not a pair, or too few sessions)."""

    @property
    def is_regression(self) -> bool:
        """True for a significant slowdown or a variant that broke."""
        return self.outcome in (Outcome.SLOWER, Outcome.BROKEN)


class OpChangeKind(str, Enum):
    """How an op's row differs between base and head."""

    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True)
class OpChange:
    """One op's calls and self time per profiled step in base and head (0 where absent)."""

    name: str
    kind: OpChangeKind
    base_calls_per_step: float
    head_calls_per_step: float
    base_self_us_per_step: float
    head_self_us_per_step: float

    @property
    def delta_self_us(self) -> float:
        """Head minus base self time per step."""
        return self.head_self_us_per_step - self.base_self_us_per_step


@dataclass(frozen=True)
class OpDiff:
    """The op-table differences of one variant present on both sides."""

    variant: str
    base_time_basis: TimeBasis
    head_time_basis: TimeBasis
    added: tuple[OpChange, ...]
    removed: tuple[OpChange, ...]
    calls_changed: tuple[OpChange, ...]
    largest_self_changes: tuple[OpChange, ...]

    @property
    def empty(self) -> bool:
        """True when there is nothing to show."""
        return not (self.added or self.removed or self.calls_changed or self.largest_self_changes)


@dataclass(frozen=True)
class VersionDifference:
    """An environment field that differs: a warning, not a refusal."""

    field: str
    base: str | None
    head: str | None


@dataclass(frozen=True)
class ShapeChange:
    """One variant at one shape both runs swept: head/base of the medians, as a change in percent.

    The interval is the bootstrap interval of the ratio, widened by the variant's drift between runs when
    the store measured it (``drift_included``); otherwise it covers the samples within the runs only."""

    shape: str
    variant: str
    base_median_us: float
    head_median_us: float
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    drift_included: bool


@dataclass(frozen=True)
class Comparison:
    """Everything the comment and the JSON say, computed from two runs and a threshold."""

    base: RunRef
    head: RunRef
    scenario: str
    threshold_pct: float
    variants: tuple[VariantChange, ...]
    op_diffs: tuple[OpDiff, ...]
    warnings: tuple[VersionDifference, ...]
    method: str
    pairing: Pairing = Pairing.SEPARATE
    minutes_apart: float = 0.0
    drift_note: str = ""
    """One sentence on how the runs were measured and what the intervals cover (never empty from compare_runs)."""
    shapes: tuple[ShapeChange, ...] = ()
    """Per shape of the sweeps both runs hold: informational, not part of the verdict."""
    memory: tuple[MemoryChange, ...] = ()
    """Each variant present on both sides: its memory per call, base against head."""
    memory_threshold_pct: float = 0.0

    @property
    def drift_unknown(self) -> tuple[VariantChange, ...]:
        """Variants whose change within the runs was significant but whose drift between runs is unknown."""
        return tuple(v for v in self.variants if v.outcome is Outcome.INCONCLUSIVE)

    @property
    def regressions(self) -> tuple[VariantChange, ...]:
        """Variants significantly slower, or broken, in head."""
        return tuple(v for v in self.variants if v.is_regression)

    @property
    def memory_regressions(self) -> tuple[MemoryChange, ...]:
        """Variants whose memory per call grew beyond the memory threshold in head."""
        return tuple(m for m in self.memory if m.is_regression)

    @property
    def gate_fails(self) -> bool:
        """True when the gate fails: a time regression (or a break) or a memory regression."""
        return bool(self.regressions or self.memory_regressions)

    @property
    def improvements(self) -> tuple[VariantChange, ...]:
        """Variants significantly faster, or fixed, in head."""
        return tuple(v for v in self.variants if v.outcome in (Outcome.FASTER, Outcome.FIXED))

    @property
    def verdict(self) -> Verdict:
        """Regression if any variant regressed (in time or in memory), else inconclusive if any is, else improvement
        if any improved, else no change."""
        if self.gate_fails:
            return Verdict.REGRESSION
        if self.drift_unknown:
            return Verdict.INCONCLUSIVE
        return Verdict.IMPROVEMENT if self.improvements else Verdict.NO_CHANGE

