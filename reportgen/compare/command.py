"""``reportgen compare BASE HEAD``: the PR comment (GFM Markdown or JSON) and the CI exit code.

Stages: resolve and load both runs (I/O) -> ``compare_runs`` (pure: refusals, per-variant
changes with bootstrap intervals, op-table differences) -> ``render_markdown`` (Jinja template,
shrunk to fit GitHub's comment limit) or ``comparison_json`` -> write atomically or print.

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

import json
import math
import os
import stat
import sys
import tempfile
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from reportgen import __version__
from reportgen.analysis.drift import (
    MIN_HISTORY_RATIOS,
    DriftInterval,
    compare_after_the_fact,
    minutes_apart,
    not_interleaved_note,
    widen_by_sd,
)
from reportgen.analysis.paired import MIN_SESSIONS_FOR_INTERVAL, session_interval
from reportgen.analysis.stats import METHOD, median, median_or_none, ratio_of_medians
from reportgen.devices import compared_environment_fields
from reportgen.errors import CompareError, ExitCode, UsageError
from reportgen.model.codec import to_jsonable
from reportgen.model.run import AbRound, OpRow, Run, TimeBasis, VariantResult, VariantStatus
from reportgen.render.jinja import md_env
from reportgen.store.bundle import load_run, load_store_tolerant, resolve_run_dir
from reportgen.store.withdrawn import read_withdrawn
from reportgen.text.formatting import url_absolute
from reportgen.text.markdown import clip
from reportgen.text.terminal import json_safe_escapes, terminal_safe

COMPARE_SCHEMA_VERSION = 1
"""Version of the ``--format json`` document."""

MARKER = "<!-- reportgen-compare -->"
"""Hidden line in every comment so CI can find and update its one comment."""

GITHUB_COMMENT_LIMIT = 65_536
MAX_COMMENT_CHARS = GITHUB_COMMENT_LIMIT - 1_536
"""What the comment must fit in, counted in UTF-16 code units (as GitHub's limit is), with margin."""

MAX_OP_CHANGES = 10
"""How many of the largest self-time changes each variant's op diff keeps."""

MAX_LISTED = 25
"""The most ops the comment lists per list (added, removed, calls changed); JSON lists all."""

MAX_NAMED_IN_VERDICT = 3

TEMPLATE = "compare.md.j2"

ENVIRONMENT_FIELDS = ("torch_version", *compared_environment_fields(), "python_version", "device_name", "cpu_model")
"""Software/hardware fingerprint fields whose difference is warned about, not refused."""


class OutputFormat(str, Enum):
    """What ``compare`` writes: the PR comment, or the same content as versioned JSON."""

    MARKDOWN = "markdown"
    JSON = "json"


@dataclass(frozen=True)
class CompareRequest:
    """One comparison to make: which runs (id, folder, ``latest``, ``latest~N``, label, git sha), how, and where to write it."""

    base: str
    head: str
    store: Path
    threshold_pct: float = 5.0
    fail_on_regression: bool = False
    output_format: OutputFormat = OutputFormat.MARKDOWN
    site_url: str | None = None
    output: Path | None = None
    """A file to write (a symlink is written through to its target); None: standard output."""
    scenario: str | None = None
    """``latest~N``, labels and git shas resolve among this scenario's runs (None: the newest run's)."""
    machine: str | None = None
    """... and among this machine's runs (None: the newest run's)."""


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

    @property
    def drift_unknown(self) -> tuple[VariantChange, ...]:
        """Variants whose change within the runs was significant but whose drift between runs is unknown."""
        return tuple(v for v in self.variants if v.outcome is Outcome.INCONCLUSIVE)

    @property
    def regressions(self) -> tuple[VariantChange, ...]:
        """Variants significantly slower, or broken, in head."""
        return tuple(v for v in self.variants if v.is_regression)

    @property
    def improvements(self) -> tuple[VariantChange, ...]:
        """Variants significantly faster, or fixed, in head."""
        return tuple(v for v in self.variants if v.outcome in (Outcome.FASTER, Outcome.FIXED))

    @property
    def verdict(self) -> Verdict:
        """Regression if any variant regressed, else inconclusive if any is, else improvement if any improved,
        else no change."""
        if self.regressions:
            return Verdict.REGRESSION
        if self.drift_unknown:
            return Verdict.INCONCLUSIVE
        return Verdict.IMPROVEMENT if self.improvements else Verdict.NO_CHANGE


# --- pure comparison -------------------------------------------------------------------------


@dataclass(frozen=True)
class Sides:
    """The two runs of a comparison and the store's runs the drift between separate runs is estimated from."""

    base: Run
    head: Run
    history: tuple[Run, ...] = ()
    pairing: Pairing = Pairing.SEPARATE


def compare_runs(base: Run, head: Run, threshold_pct: float, history: Sequence[Run] = ()) -> Comparison:
    """Compare ``head`` against ``base``; CompareError when device or scenario differ.

    ``history``: the store's runs (any order; base and head may be among them) from which the drift between
    two separate runs is estimated. Without enough of it the drift is unknown (see the module docstring).
    """
    if not math.isfinite(threshold_pct) or threshold_pct < 0:
        raise UsageError(f"threshold {threshold_pct!r}: must be a finite number of percent >= 0")
    check_comparable(base, head)
    pairing = Pairing.INTERLEAVED if is_ab_pair(base, head) else Pairing.SEPARATE
    sides = Sides(base, head, tuple(drift_history(history, head)), pairing)
    b, h = {v.name: v for v in base.variants}, {v.name: v for v in head.variants}
    names = list(b) + [n for n in h if n not in b]
    changes = tuple(variant_change(b.get(n), h.get(n), threshold_pct, sides) for n in names)
    diffs = _op_diffs(b, h, names)
    minutes = minutes_apart(base.created_utc, head.created_utc)
    return Comparison(
        base=run_ref(base),
        head=run_ref(head),
        scenario=base.scenario.name,
        threshold_pct=threshold_pct,
        variants=changes,
        op_diffs=diffs,
        warnings=version_differences(base, head),
        method=METHOD,
        pairing=pairing,
        minutes_apart=minutes,
        drift_note=drift_note(pairing, minutes, changes, base.ab.pair_id if base.ab else None),
        shapes=shape_changes(base, head, changes),
    )


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


def is_ab_pair(base: Run, head: Run) -> bool:
    """True when ``base`` and ``head`` are the two sides of one interleaved ``reportgen ab`` pair."""
    return (base.ab is not None and head.ab is not None and base.ab.pair_id == head.ab.pair_id
            and base.ab.side != head.ab.side and base.ab.partner_run_id == head.run_id
            and head.ab.partner_run_id == base.run_id)


def drift_history(runs: Sequence[Run], head: Run) -> list[Run]:
    """The runs a drift estimate may use: separate runs only (no A/B side, whose samples are interleaved), and
    never ``head`` itself (the change being judged must not count as drift)."""
    return [r for r in runs if r.ab is None and r.run_id != head.run_id]


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


def check_comparable(base: Run, head: Run) -> None:
    """Refuse runs measured on different devices or with different scenario parameters."""
    pairs: list[tuple[str, object, object]] = [
        ("device", base.device.value, head.device.value),
        ("environment.machine", base.environment.machine, head.environment.machine),
        ("scenario.name", base.scenario.name, head.scenario.name),
    ]
    bp, hp = base.scenario.parameters, head.scenario.parameters
    pairs += [(f"scenario.parameters.{k}", bp.get(k), hp.get(k)) for k in sorted(set(bp) | set(hp))]
    for field, b, h in pairs:
        if b != h:
            raise CompareError(
                f"cannot compare {base.run_id} (base) with {head.run_id} (head): field '{clip(field, 60)}' differs "
                f"({_show(b)} vs {_show(h)}); compare runs of the same device and scenario parameters"
            )


def run_ref(run: Run) -> RunRef:
    """The identifying fields of ``run``."""
    return RunRef(run.run_id, run.label, run.created_utc, run.git.sha, run.device.value)


def version_differences(base: Run, head: Run) -> tuple[VersionDifference, ...]:
    """Environment fields (software versions, device and CPU names) that differ between the runs."""
    out = []
    for name in ENVIRONMENT_FIELDS:
        b, h = base.environment.field_text(name), head.environment.field_text(name)
        if b != h:
            out.append(VersionDifference(name, b, h))
    return tuple(out)


def variant_change(base: VariantResult | None, head: VariantResult | None, threshold_pct: float,
                   sides: Sides | None = None) -> VariantChange:
    """The outcome for one variant name, present on one or both sides; ``sides`` (the two runs and the store's
    history) decides how a timing change is judged (None: on the samples within the runs alone)."""
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


def _timed_change(base: VariantResult, head: VariantResult, threshold_pct: float,
                  sides: Sides | None) -> VariantChange:
    """The timing change of a variant present on both sides (outcome from timing only)."""
    plain = VariantChange(name=base.name, outcome=Outcome.NO_SAMPLES, base_status=base.status,
                          head_status=head.status, base_median_us=_median(base), head_median_us=_median(head),
                          base_samples=len(base.samples_us), head_samples=len(head.samples_us))
    interleaved = sides is not None and sides.pairing is Pairing.INTERLEAVED
    paired = _paired_interval(sides, base.name) if sides is not None and interleaved else None
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
    if sides is None:
        return timed
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
    computes it: per round a ratio of block medians, per session the median of its rounds' ratios); None when the
    rounds do not hold enough sessions with blocks of ``variant`` on both sides (a pair stored before sessions
    existed has one)."""
    b_ab, h_ab = sides.base.ab, sides.head.ab
    if b_ab is None or h_ab is None:
        return None
    base_medians, head_medians = _round_medians(b_ab.rounds, variant), _round_medians(h_ab.rounds, variant)
    by_session: dict[int, list[float]] = {}
    for key in sorted(set(base_medians) & set(head_medians)):
        by_session.setdefault(key[0], []).append(head_medians[key] / base_medians[key])
    ratios = [median(r) for r in by_session.values()]
    if len(ratios) < MIN_SESSIONS_FOR_INTERVAL:
        return None
    ratio, low, high, _coverage = session_interval(ratios)
    return ratio, low, high, len(ratios)


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


def _op_diffs(base: dict[str, VariantResult], head: dict[str, VariantResult], names: list[str]
              ) -> tuple[OpDiff, ...]:
    """Op-table differences of every variant present on both sides (empty ones left out)."""
    out = []
    for n in names:
        b, h = base.get(n), head.get(n)
        if b is not None and h is not None and (b.ops or h.ops):
            d = op_diff(b, h)
            if not d.empty:
                out.append(d)
    return tuple(out)


def op_diff(base: VariantResult, head: VariantResult) -> OpDiff:
    """Ops added or gone, calls changed, and the largest self-time changes, per profiled step."""
    b, h = _op_totals(base), _op_totals(head)
    changes = [
        OpChange(
            name=name,
            kind=_op_kind(name in b, name in h),
            base_calls_per_step=b.get(name, (0.0, 0.0))[0],
            head_calls_per_step=h.get(name, (0.0, 0.0))[0],
            base_self_us_per_step=b.get(name, (0.0, 0.0))[1],
            head_self_us_per_step=h.get(name, (0.0, 0.0))[1],
        )
        for name in list(b) + [n for n in h if n not in b]
    ]
    by_size = sorted((c for c in changes if c.delta_self_us != 0), key=lambda c: (-abs(c.delta_self_us), c.name))
    return OpDiff(
        variant=base.name,
        base_time_basis=base.time_basis,
        head_time_basis=head.time_basis,
        added=tuple(c for c in changes if c.kind is OpChangeKind.ADDED),
        removed=tuple(c for c in changes if c.kind is OpChangeKind.REMOVED),
        calls_changed=tuple(c for c in changes if c.kind is OpChangeKind.CHANGED
                            and c.base_calls_per_step != c.head_calls_per_step),
        largest_self_changes=tuple(by_size[:MAX_OP_CHANGES]),
    )


def _op_kind(in_base: bool, in_head: bool) -> OpChangeKind:
    return OpChangeKind.CHANGED if in_base and in_head else OpChangeKind.REMOVED if in_base else OpChangeKind.ADDED


def _op_totals(v: VariantResult) -> dict[str, tuple[float, float]]:
    """Calls and self time (on the variant's time basis) per profiled step, summed by op name."""
    steps = v.profiled_steps if v.profiled_steps > 0 else 1
    totals: dict[str, tuple[float, float]] = {}
    for row in v.ops:
        calls, self_us = totals.get(row.name, (0.0, 0.0))
        totals[row.name] = (calls + row.calls, self_us + _self_us(row, v.time_basis))
    return {k: (c / steps, s / steps) for k, (c, s) in totals.items()}


def _self_us(row: OpRow, basis: TimeBasis) -> float:
    return row.self_device_us if basis is TimeBasis.DEVICE else row.self_cpu_us


def _show(value: object) -> str:
    return "absent" if value is None else repr(clip(str(value), 60))


# --- rendering ---------------------------------------------------------------------------------


def comment_length(text: str) -> int:
    """Length as GitHub counts it (UTF-16 code units), never less than the number of characters."""
    return len(text.encode("utf-16-le")) // 2


def valid_site_url(site_url: str) -> bool:
    """True for an absolute http(s) URL with a host."""
    parts = urllib.parse.urlsplit(site_url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def run_page_url(site_url: str, run_id: str) -> str:
    """The permanent page of ``run_id`` under the site root ``site_url``, percent-encoded for Markdown."""
    if not valid_site_url(site_url):
        raise UsageError(f"site_url {clip(site_url, 60)!r}: expected an http(s) URL such as https://user.github.io/repo/")
    root = url_absolute(site_url.rstrip("/"))
    return f"{root}/runs/{urllib.parse.quote(run_id, safe='')}/"


@dataclass(frozen=True)
class _Cut:
    """How much of the detail the comment keeps: variant rows and op-diff sections."""

    rows: int
    sections: int
    shapes: int = 0


def render_markdown(comparison: Comparison, site_url: str | None = None,
                    limit_chars: int = MAX_COMMENT_CHARS) -> str:
    """The PR comment, shrunk to ``limit_chars``: op-diff sections go first, then per-shape rows, then variant rows;
    never the verdict."""
    template = md_env().get_template(TEMPLATE)
    links = _links(comparison, site_url)

    def render(cut: _Cut) -> str:
        return template.render(c=comparison, links=links, rows=comparison.variants[: cut.rows],
                               omitted_rows=len(comparison.variants) - cut.rows,
                               sections=comparison.op_diffs[: cut.sections],
                               omitted_sections=len(comparison.op_diffs) - cut.sections,
                               shapes=comparison.shapes[: cut.shapes],
                               omitted_shapes=len(comparison.shapes) - cut.shapes,
                               marker=MARKER, version=__version__, max_listed=MAX_LISTED,
                               max_named=MAX_NAMED_IN_VERDICT, Outcome=Outcome, Verdict=Verdict,
                               Pairing=Pairing)

    def fits(cut: _Cut) -> bool:
        return comment_length(render(cut)) <= limit_chars

    n_rows, n_sections, n_shapes = len(comparison.variants), len(comparison.op_diffs), len(comparison.shapes)
    rows = _largest(lambda k: fits(_Cut(k, 0)), n_rows)
    shapes = _largest(lambda k: fits(_Cut(rows, 0, k)), n_shapes) if rows == n_rows else 0
    sections = _largest(lambda k: fits(_Cut(rows, k, shapes)), n_sections) if shapes == n_shapes else 0
    return render(_Cut(rows, sections, shapes))


def _largest(ok: Callable[[int], bool], upper: int) -> int:
    """The largest k in [0, upper] with ok(k), for ok true up to some k and false after (ok(0) assumed).

    Gallops up from 1 before bisecting, so the cost follows the size of the answer, not of ``upper``.
    """
    lo, step = 0, 1
    while lo < upper and ok(min(lo + step, upper)):
        lo = min(lo + step, upper)
        step *= 2
    hi = min(lo + step, upper) - 1 if lo < upper else upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _links(comparison: Comparison, site_url: str | None) -> dict[str, str] | None:
    if not site_url:
        return None
    return {"base": run_page_url(site_url, comparison.base.run_id),
            "head": run_page_url(site_url, comparison.head.run_id)}


def comparison_json(comparison: Comparison, site_url: str | None = None) -> str:
    """The same content as data: the full comparison (nothing truncated), versioned."""
    doc: dict[str, Any] = {
        "schema_version": COMPARE_SCHEMA_VERSION,
        "kind": "reportgen-compare",
        "reportgen_version": __version__,
        "verdict": comparison.verdict.value,
        "regressions": [v.name for v in comparison.regressions],
        "improvements": [v.name for v in comparison.improvements],
        "links": _links(comparison, site_url),
        **to_jsonable(comparison),
    }
    text = json.dumps(doc, indent=1, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"
    return json_safe_escapes(text)  # no raw C1 control or bidi override, in a file or on a terminal


# --- the command --------------------------------------------------------------------------------


def load_side(store: Path, ref: str, scenario: str | None = None, machine: str | None = None) -> Run:
    """The run that ``ref`` (id, folder, latest, latest~N, label, git sha) names."""
    return load_run(resolve_run_dir(store, ref, scenario, machine))


def load_history(store: Path) -> list[Run]:
    """The store's runs a drift estimate may use: every valid, not withdrawn bundle (none when ``store`` is not a
    folder; a corrupt bundle elsewhere in the store does not stop a comparison)."""
    if not store.is_dir():
        return []
    runs, _problems = load_store_tolerant(store)
    withdrawn = read_withdrawn(store)
    return [r for r in runs if r.run_id not in withdrawn]


def run_compare(request: CompareRequest) -> int:
    """Load, compare, render, write; ``ExitCode.REGRESSION`` on a regression when the request asks to fail on one."""
    where = (request.scenario, request.machine)
    base, head = load_side(request.store, request.base, *where), load_side(request.store, request.head, *where)
    comparison = compare_runs(base, head, request.threshold_pct, load_history(request.store))
    for w in comparison.warnings:
        print(terminal_safe(f"reportgen: warning: environment.{w.field} differs: {_show(w.base)} (base) "
                            f"vs {_show(w.head)} (head)"), file=sys.stderr)
    if comparison.drift_unknown:
        print(terminal_safe(f"reportgen: note: {comparison.drift_note}"), file=sys.stderr)
    text = (comparison_json(comparison, request.site_url) if request.output_format is OutputFormat.JSON
            else render_markdown(comparison, request.site_url))
    if request.output is not None:
        write_output(request.output, text)
    else:
        sys.stdout.write(terminal_safe(text, keep_newlines=True))
    if request.fail_on_regression and comparison.regressions:
        return ExitCode.REGRESSION
    return ExitCode.OK


def write_output(path: Path, text: str) -> None:
    """Write ``text`` to ``path``: a new file or a regular one, replaced atomically; a symlink is written through.

    A symlink to a regular file (or to a new path) has its target replaced and stays a link; a path that
    is (or links to) a device, FIFO, socket or folder is refused: nothing there is changed.
    """
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be written ({exc.strerror}); use a writable path") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{path}: is {_file_kind(st.st_mode)}, not a regular file; give a new path or a regular file")
    try:
        write_text_atomic(target, text, mode=stat.S_IMODE(st.st_mode) if st is not None else None)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be written ({exc.strerror}); use a writable path") from None


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def write_text_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to a temporary file next to ``path`` and rename it into place (keeping ``mode`` if given)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
