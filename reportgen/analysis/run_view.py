"""The analysed run: every variant's view, the speedups between variants, and what an imported run's traces cover.

Pure analysis of a run bundle for its page and the index's latest summary: no disk, no matplotlib.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from reportgen.analysis import stats
from reportgen.analysis.breakdown import RankSummary, rank_summary
from reportgen.analysis.ceilings import ceiling_for
from reportgen.analysis.sweep import SweepView, sweep_view
from reportgen.analysis.variant_view import VariantView, variant_view
from reportgen.model.run import Run, RunSource, TimeBasis, VariantResult, VariantStatus

# ---------------------------------------------------------------------------------------------
# Speedups


@dataclass(frozen=True)
class Speedup:
    """How many times faster ``target`` is than ``baseline``: median(baseline) / median(target)."""

    target: str
    baseline: str
    ratio: stats.Ratio
    target_status: VariantStatus


def baseline_name(run: Run) -> str | None:
    """The baseline the scenario declared (``run.scenario.baseline``) when it was timed, else the first timed variant."""
    timed = [v for v in run.variants if v.samples_us and v.status is not VariantStatus.FAILED]
    declared = run.scenario.baseline
    if declared is not None and any(v.name == declared for v in timed):
        return declared
    return timed[0].name if timed else None


def speedups(run: Run) -> tuple[Speedup, ...]:
    """Every timed variant against the baseline, then each variant after the baseline against the one before it.

    A scenario declares its variants in order, the baseline first by default, each later one a step on from the
    one before (eager ops, then a fused op, then the eager ops compiled: the last is also compared with the fused
    one). A pair with the baseline is not repeated, and no variant's name is special.
    """
    base_name = baseline_name(run)
    if base_name is None:
        return ()
    base = run.variant(base_name)
    assert base is not None
    pairs = [(v, base) for v in run.variants if v.name != base_name]
    after_base = run.variants[[v.name for v in run.variants].index(base_name) + 1:]
    pairs.extend((target, previous) for previous, target in itertools.pairwise(after_base))
    out = []
    for target, baseline in pairs:
        if target.status is VariantStatus.FAILED or baseline.status is VariantStatus.FAILED:
            continue
        ratio = stats.ratio_of_medians(baseline.samples_us, target.samples_us)
        if ratio is not None:
            out.append(Speedup(target.name, baseline.name, ratio, target.status))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The whole run


MAX_WINDOW_NAMES = 8
"""Variant names listed per group of an imported run's windows; the rest are counted."""


@dataclass(frozen=True)
class ImportedWindows:
    """Imported variants whose traces have the same number of ProfilerStep# spans and the same op-time clock."""

    names: tuple[str, ...]
    """The first MAX_WINDOW_NAMES variant names of the group."""
    more: int
    """How many more variants the group holds."""
    steps: int
    """ProfilerStep# spans found in each trace; 0: no step markers, the whole trace is one window."""
    time_basis: TimeBasis
    """DEVICE: op times are the device lane's kernels and copies; CPU: host CPU time."""
    device_lane: bool
    """Whether the traces have a device lane at all."""


def imported_windows(run: Run) -> tuple[ImportedWindows, ...]:
    """An imported run's variants grouped by steps found and time basis, in variant order; () for a profiled run."""
    if run.source is not RunSource.IMPORT:
        return ()
    groups: dict[tuple[int, TimeBasis, bool], list[str]] = {}
    for v in run.variants:
        groups.setdefault((v.profiled_steps, v.time_basis, v.device_event_count is not None), []).append(v.name)
    return tuple(ImportedWindows(tuple(names[:MAX_WINDOW_NAMES]), max(len(names) - MAX_WINDOW_NAMES, 0),
                                 steps, basis, lane)
                 for (steps, basis, lane), names in groups.items())


@dataclass(frozen=True)
class RunView:
    """The analysed run: what a run page and the index's latest summary show."""

    run: Run
    variants: tuple[VariantView, ...]
    speedups: tuple[Speedup, ...]
    baseline: str | None
    has_samples: bool
    imported: bool
    any_problem: bool
    method: str
    ranks: RankSummary | None = None
    sweep: SweepView | None = None
    windows: tuple[ImportedWindows, ...] = ()
    """Imported runs only: what each trace's figures cover (steps found) and on which clock."""

    def gain(self, variant: str) -> Speedup | None:
        """The speedup of ``variant`` over this run's baseline, if it was measured."""
        return next((s for s in self.speedups if s.target == variant and s.baseline == self.baseline), None)


def _variant_view_in(run: Run, v: VariantResult) -> VariantView:
    """``variant_view`` against the ceiling for the variant's working set (the bandwidth curve, where measured)."""
    ceiling = ceiling_for(run.peak, v.bytes_per_call)
    return variant_view(v, ceiling.bandwidth_bytes_per_s, ceiling.level)


def run_view(run: Run) -> RunView:
    """Analyse ``run`` for rendering."""
    views = tuple(_variant_view_in(run, v) for v in run.variants)
    return RunView(
        run=run,
        variants=views,
        speedups=speedups(run),
        baseline=baseline_name(run),
        has_samples=any(v.timing is not None for v in views),
        imported=run.source is RunSource.IMPORT,
        any_problem=not run.ok,
        method=stats.METHOD,
        ranks=rank_summary([(v.name, v.breakdown) for v in run.variants if v.breakdown is not None]),
        sweep=sweep_view(run, baseline_name(run)),
        windows=imported_windows(run),
    )
