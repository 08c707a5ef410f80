"""Pure analysis of run bundles for the report: no disk, no matplotlib, dataclasses in and out.

Everything a page shows is computed here: the op breakdown and its hotspot, per-variant timing
summaries, speedups with bootstrap intervals, achieved bandwidth against the roofline, the
evidence of fusion, the history series across runs, and the lane layout of a timeline snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from reportgen.analysis import stats
from reportgen.analysis.breakdown import BreakdownView, RankSummary, breakdown_view, rank_summary
from reportgen.analysis.ceilings import ceiling_for, is_over_ceiling
from reportgen.analysis.sweep import SweepView, sweep_view
from reportgen.devices.lanes import Lane
from reportgen.model.run import DeviceKind, OpRow, Run, RunSource, TimeBasis, VariantResult, VariantStatus

FUSED_VARIANT = "fused"
COMPILED_VARIANT = "compiled"
MAX_OP_ROWS = 20
"""Op-table rows shown per variant; the rest are summed into one "other ops" line."""


# ---------------------------------------------------------------------------------------------
# Op breakdown


@dataclass(frozen=True)
class OpLine:
    """One op-table row as the article shows it: totals over the profiled steps."""

    name: str
    calls: int
    self_device_us: float
    total_device_us: float
    share: float
    per_call_us: float
    input_shapes: str
    is_hotspot: bool


@dataclass(frozen=True)
class OpBreakdown:
    """A variant's op table, sorted by self device time, with the hotspot and the device total."""

    time_basis: TimeBasis
    device_label: str
    lines: tuple[OpLine, ...]
    hidden_count: int
    hidden_self_device_us: float
    total_self_device_us: float
    profiled_steps: int
    step_overhead_us: float = 0.0
    """Self time of the ``ProfilerStep*`` rows: host time between ops, not an op; kept out of the table."""

    @property
    def hotspot(self) -> OpLine | None:
        """The op with the largest self device time, or None for an empty table."""
        return next((line for line in self.lines if line.is_hotspot), None)


def is_step_row(name: str) -> bool:
    """True for key_averages' ``ProfilerStep*`` rows: the step wrapper, whose self time is loop overhead."""
    return name.startswith("ProfilerStep")


def device_label(basis: TimeBasis) -> str:
    """Column label for "device time": the CPU itself on a CPU run, so say so."""
    return "CPU (device)" if basis is TimeBasis.CPU else "device"


def _device_times(row: OpRow, basis: TimeBasis) -> tuple[float, float]:
    """(self, total) device time of ``row`` under ``basis``."""
    if basis is TimeBasis.CPU:
        return row.self_cpu_us, row.total_cpu_us
    return row.self_device_us, row.total_device_us


def op_breakdown(v: VariantResult, max_rows: int = MAX_OP_ROWS) -> OpBreakdown:
    """The op table of ``v``: share = self device time / sum of self device times in the variant."""
    timed = [(row, *_device_times(row, v.time_basis)) for row in v.ops if not is_step_row(row.name)]
    overhead = sum(_device_times(row, v.time_basis)[0] for row in v.ops if is_step_row(row.name))
    timed.sort(key=lambda t: (-t[1], -t[2], t[0].name))
    total = sum(t[1] for t in timed)
    lines = tuple(
        OpLine(
            name=row.name,
            calls=row.calls,
            self_device_us=self_us,
            total_device_us=total_us,
            share=self_us / total if total > 0 else 0.0,
            per_call_us=self_us / row.calls if row.calls > 0 else 0.0,
            input_shapes=row.input_shapes,
            is_hotspot=(i == 0 and self_us > 0),
        )
        for i, (row, self_us, total_us) in enumerate(timed[:max_rows])
    )
    hidden = timed[max_rows:]
    return OpBreakdown(
        time_basis=v.time_basis,
        device_label=device_label(v.time_basis),
        lines=lines,
        hidden_count=len(hidden),
        hidden_self_device_us=sum(t[1] for t in hidden),
        total_self_device_us=total,
        profiled_steps=v.profiled_steps,
        step_overhead_us=overhead,
    )


# ---------------------------------------------------------------------------------------------
# Timing, roofline, fusion evidence


@dataclass(frozen=True)
class Roofline:
    """Achieved bandwidth of a memory-bound op against the device's peak."""

    bytes_per_call: int
    achieved_bytes_per_s: float | None
    peak_bytes_per_s: float | None
    fraction_of_peak: float | None
    floor_us: float | None
    """The fastest a call could be at peak bandwidth: bytes moved / peak."""
    level: str | None = None
    """The memory level the call's working set fits in (``L2``, ``DRAM`` ...); None when unknown."""

    @property
    def over_ceiling(self) -> bool:
        """True when the fraction exceeds 100 %: the ceiling is wrong for this call, never a fast kernel."""
        return is_over_ceiling(self.fraction_of_peak)


def roofline(bytes_per_call: int, median_us: float | None, peak_bytes_per_s: float | None,
             level: str | None = None) -> Roofline:
    """Bandwidth achieved = bytes per call / median per-call time; fraction = achieved / peak."""
    seconds = median_us * 1e-6 if median_us else 0.0
    # seconds == 0 also for a subnormal median, whose product underflows: no meaningful bandwidth then.
    achieved = bytes_per_call / seconds if bytes_per_call > 0 and seconds > 0 else None
    if achieved is not None and not math.isfinite(achieved):
        achieved = None
    usable_peak = peak_bytes_per_s if peak_bytes_per_s and peak_bytes_per_s > 0 else None
    fraction = achieved / usable_peak if achieved is not None and usable_peak else None
    floor = bytes_per_call / usable_peak * 1e6 if usable_peak and bytes_per_call > 0 else None
    return Roofline(bytes_per_call, achieved, usable_peak, fraction, floor, level)


@dataclass(frozen=True)
class VariantView:
    """Everything the page says about one variant."""

    name: str
    description: str
    status: VariantStatus
    error: str | None
    timing: stats.SampleSummary | None
    calls_per_sample: int
    ops: OpBreakdown
    roofline: Roofline
    op_dispatch_count: int | None
    aten_op_count: int | None
    device_event_count: int | None
    compile_time_us: float | None
    first_call_us: float | None
    correctness_passed: bool | None
    max_abs_error: float | None
    max_rel_error: float | None
    atol: float | None
    rtol: float | None
    trace_path: str | None
    breakdown: BreakdownView | None = None

    @property
    def ran(self) -> bool:
        """True unless the variant failed outright."""
        return self.status is not VariantStatus.FAILED


def variant_view(v: VariantResult, peak_bytes_per_s: float | None, level: str | None = None) -> VariantView:
    """The analysed view of one variant; ``peak_bytes_per_s`` is the ceiling for its working set."""
    timing = stats.summarize(v.samples_us) if v.status is not VariantStatus.FAILED else None
    c = v.correctness
    return VariantView(
        name=v.name,
        description=v.description,
        status=v.status,
        error=v.error,
        timing=timing,
        calls_per_sample=v.calls_per_sample,
        ops=op_breakdown(v),
        roofline=roofline(v.bytes_per_call, timing.median_us if timing else None, peak_bytes_per_s, level),
        op_dispatch_count=v.op_dispatch_count,
        aten_op_count=v.aten_op_count,
        device_event_count=v.device_event_count,
        compile_time_us=v.compile_time_us,
        first_call_us=v.first_call_us,
        correctness_passed=c.passed if c else None,
        max_abs_error=c.max_abs_error if c else None,
        max_rel_error=c.max_rel_error if c else None,
        atol=c.atol if c else None,
        rtol=c.rtol if c else None,
        trace_path=v.trace_path,
        breakdown=breakdown_view(v.breakdown) if v.breakdown is not None else None,
    )


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
    """Every timed variant against the baseline, then compiled against fused when both ran."""
    base_name = baseline_name(run)
    if base_name is None:
        return ()
    base = run.variant(base_name)
    assert base is not None
    pairs = [(v, base) for v in run.variants if v.name != base_name]
    fused, compiled = run.variant(FUSED_VARIANT), run.variant(COMPILED_VARIANT)
    if fused is not None and compiled is not None and base_name not in (FUSED_VARIANT, COMPILED_VARIANT):
        pairs.append((compiled, fused))
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


# ---------------------------------------------------------------------------------------------
# History across runs: compact digests, so an index of many runs needs no full run.json


@dataclass(frozen=True)
class VariantDigest:
    """One variant of a run as the index and history need it."""

    name: str
    status: VariantStatus
    median_us: float | None = None
    ci_low_us: float | None = None
    ci_high_us: float | None = None
    speedup: float | None = None
    """median(baseline) / median(this variant); None for the baseline itself and untimed variants."""


@dataclass(frozen=True)
class ShapeDigest:
    """One shape of a run's sweep as the history needs it: per variant the median, its CI and the speedup."""

    shape: str
    variants: tuple[VariantDigest, ...]
    params: dict[str, str] = field(default_factory=dict)
    """Scenario parameters the sweep point set (``--sweep-param``); they key its history too."""


@dataclass(frozen=True)
class RunDigest:
    """What the index and the history charts show of a run (kept in the site manifest)."""

    run_id: str
    created_utc: str
    label: str
    source: RunSource
    device: DeviceKind
    device_name: str
    scenario: str
    parameters: dict[str, str]
    git_sha: str | None
    baseline: str | None
    variants: tuple[VariantDigest, ...]
    machine: str | None = None
    shapes: tuple[ShapeDigest, ...] = ()
    """The run's sweep, one entry per shape measured (its own shape excluded): each joins that shape's history."""

    @property
    def ok(self) -> bool:
        """True when every variant ran and matched the reference."""
        return all(v.status is VariantStatus.OK for v in self.variants)


def digest(run: Run, view: RunView | None = None) -> RunDigest:
    """The run's digest: per variant the median, its bootstrap CI and the speedup over the baseline.

    Pass the run's ``view`` when there is one: its summaries are reused, not bootstrapped again.
    """
    if view is not None:
        summaries = {v.name: v.timing for v in view.variants}
    else:
        summaries = {v.name: stats.summarize(v.samples_us) if v.status is not VariantStatus.FAILED else None
                     for v in run.variants}
    base = baseline_name(run)
    variants = _variant_digests([(v.name, v.status) for v in run.variants], summaries, base)
    return RunDigest(run.run_id, run.created_utc, run.label, run.source, run.device,
                     run.environment.device_name or "", run.scenario.name, dict(run.scenario.parameters),
                     run.git.sha, base, variants, run.environment.machine, _shape_digests(run, base))


def _variant_digests(variants: Sequence[tuple[str, VariantStatus]], summaries: dict[str, stats.SampleSummary | None],
                     base: str | None) -> tuple[VariantDigest, ...]:
    """Each variant's median, CI and speedup over ``base`` (None for the base itself and untimed variants)."""
    base_summary = summaries.get(base) if base else None
    out = []
    for name, status in variants:
        s = summaries[name]
        gain = (base_summary.median_us / s.median_us
                if s is not None and base_summary is not None and name != base and s.median_us > 0 else None)
        out.append(VariantDigest(name, status, s.median_us if s else None, s.ci_low_us if s else None,
                                 s.ci_high_us if s else None, gain))
    return tuple(out)


def _shape_digests(run: Run, base: str | None) -> tuple[ShapeDigest, ...]:
    """Each swept shape but the run's own: per variant the median and CI, and the speedup over ``base`` there."""
    out = []
    for point in run.sweep:
        shape = ",".join(str(d) for d in point.shape)
        params = {**run.scenario.parameters, "shape": shape, **point.params}
        if point.error is not None or params == run.scenario.parameters:
            continue
        summaries = {s.variant: stats.summarize(s.samples_us) if s.status is not VariantStatus.FAILED else None
                     for s in point.samples}
        variants = _variant_digests([(s.variant, s.status) for s in point.samples], summaries, base)
        out.append(ShapeDigest(shape, variants, dict(point.params)))
    return tuple(out)


@dataclass(frozen=True)
class HistoryPoint:
    """One run's median per-call time of one variant, and its speedup over the baseline."""

    run_id: str
    created_utc: str
    median_us: float
    ci_low_us: float
    ci_high_us: float
    speedup: float | None


@dataclass(frozen=True)
class HistorySeries:
    """One variant's points across the runs of one group, oldest first."""

    variant: str
    points: tuple[HistoryPoint, ...]


GroupKey = tuple[str, str, str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class HistoryGroup:
    """Runs that are comparable: same device, device name, scenario and scenario parameters."""

    key: str
    title: str
    device: str
    scenario: str
    parameters: tuple[tuple[str, str], ...]
    run_ids: tuple[str, ...]
    created_utc: tuple[str, ...]
    series: tuple[HistorySeries, ...]


def group_key(d: RunDigest) -> GroupKey:
    """What must match for two runs to share a history line (the seed may differ)."""
    params = tuple(sorted((k, v) for k, v in d.parameters.items() if k != "seed"))
    return (d.device.value, f"machine {d.machine}" if d.machine else d.device_name, d.scenario, params)


def _group_title(key: GroupKey) -> str:
    device, device_name, scenario, params = key
    where = f"{device} ({device_name})" if device_name else device
    shown = ", ".join(f"{k}={v}" for k, v in params)
    return f"{scenario} on {where}" + (f" — {shown}" if shown else "")


def history(digests: Sequence[RunDigest]) -> tuple[HistoryGroup, ...]:
    """Per group (sorted by title), per variant, the median time and speedup of every run that timed it."""
    groups: dict[GroupKey, list[RunDigest]] = {}
    for d in sorted(digests, key=lambda r: (r.created_utc, r.run_id)):
        for member in (d, *_per_shape(d)):
            groups.setdefault(group_key(member), []).append(member)
    out = [_history_group(key, members) for key, members in groups.items()]
    return tuple(sorted(out, key=lambda g: (g.title, g.key)))


def _per_shape(d: RunDigest) -> list[RunDigest]:
    """A sweep run's shapes as digests of their own shape, so each joins that shape's history."""
    return [RunDigest(d.run_id, d.created_utc, d.label, d.source, d.device, d.device_name, d.scenario,
                      {**d.parameters, "shape": s.shape, **s.params}, d.git_sha, d.baseline, s.variants, d.machine)
            for s in d.shapes]


def _history_group(key: GroupKey, runs: list[RunDigest]) -> HistoryGroup:
    names: list[str] = []
    for d in runs:
        names.extend(v.name for v in d.variants if v.name not in names)
    points: dict[str, list[HistoryPoint]] = {n: [] for n in names}
    for d in runs:
        for v in d.variants:
            if v.median_us is None or v.ci_low_us is None or v.ci_high_us is None:
                continue
            points[v.name].append(HistoryPoint(d.run_id, d.created_utc, v.median_us, v.ci_low_us, v.ci_high_us,
                                               v.speedup))
    return HistoryGroup(
        key="|".join([key[0], key[1], key[2], *(f"{k}={v}" for k, v in key[3])]),
        title=_group_title(key),
        device=key[0],
        scenario=key[2],
        parameters=key[3],
        run_ids=tuple(d.run_id for d in runs),
        created_utc=tuple(d.created_utc for d in runs),
        series=tuple(HistorySeries(n, tuple(points[n])) for n in names if points[n]),
    )


# ---------------------------------------------------------------------------------------------
# Timeline snapshot layout


LANE_TITLES = {
    Lane.FRAMEWORK: "framework ops",
    Lane.RUNTIME: "runtime",
    Lane.DEVICE: "device",
    Lane.OTHER: "other",
}
TRACK_WORDS = {Lane.FRAMEWORK: "thread", Lane.RUNTIME: "thread", Lane.DEVICE: "stream", Lane.OTHER: "track"}
"""What one track of a lane is: host lanes have a track per thread, the device lane one per stream."""
MAX_DEPTH = 6
"""Nesting levels drawn per track; calls nested deeper are not drawn (the chart says how many)."""
LANE_ROW_BUDGET = {Lane.FRAMEWORK: 13, Lane.RUNTIME: 7, Lane.DEVICE: 13, Lane.OTHER: 7}
"""Rows a lane may take (each more than MAX_DEPTH): a lane with more threads or streams than fit keeps the busiest
and draws the rest on one "other threads/streams" row, so a chart is at most 40 rows high."""
FOLDED_TRACK = "*"
"""The key of a lane's one-row track for the threads or streams that did not get their own: it shows when any of
them was busy (the union of their events, unlabelled bars with an empty name)."""


class EventLike(Protocol):
    """The fields of reportgen.traces.reader.TraceEvent that the layout needs."""

    @property
    def name(self) -> str: ...
    @property
    def lane(self) -> str: ...
    @property
    def start_us(self) -> float: ...
    @property
    def duration_us(self) -> float: ...
    @property
    def pid(self) -> str: ...
    @property
    def tid(self) -> str: ...
    @property
    def correlation(self) -> int | None: ...


@dataclass(frozen=True)
class TimelineBar:
    """One bar: lane, nesting depth, time relative to the window start, and the track (thread or stream) it is on.

    Its row is (lane, track, depth); no two bars of one row overlap in time.
    """

    lane: Lane
    depth: int
    start_us: float
    duration_us: float
    name: str
    folded: bool = False
    """True when the call is nested deeper than MAX_DEPTH: it is not drawn (its depth is MAX_DEPTH - 1)."""
    track: str = ""


@dataclass(frozen=True)
class TimelineTrack:
    """One thread (host lanes) or stream (device lane) of a lane: its rows and the label of its first row."""

    lane: Lane
    key: str
    """``pid/tid`` from the trace, or FOLDED_TRACK for a lane's threads or streams drawn together."""
    title: str
    depth: int
    """Rows it takes: nested calls, and overlapping events of one stream, go one row lower."""
    members: int = 1
    """Threads or streams drawn on it (more than one only on a folded track)."""


@dataclass(frozen=True)
class TimelineLayout:
    """Bars of one representative iteration, ready to draw, and the tracks (threads, streams) they lie on."""

    window_start_us: float
    window_us: float
    step_name: str
    bars: tuple[TimelineBar, ...]
    tracks: tuple[TimelineTrack, ...]
    event_count: int

    @property
    def rows(self) -> tuple[tuple[Lane, str, int], ...]:
        """Every row top to bottom, keyed (lane, track, depth)."""
        return tuple((t.lane, t.key, d) for t in self.tracks for d in range(t.depth))

    @property
    def lanes(self) -> tuple[Lane, ...]:
        """The lanes that have events, top to bottom."""
        return tuple(dict.fromkeys(t.lane for t in self.tracks))


def _lane_of(ev: EventLike) -> Lane:
    value = getattr(ev.lane, "value", ev.lane)
    try:
        return Lane(value)
    except ValueError:
        return Lane.OTHER


def _encloses(ev: EventLike, start_us: float, end_us: float) -> bool:
    """True for a wrapper event (the profiler's own span) that starts before and ends after the window."""
    return ev.start_us < start_us and ev.start_us + ev.duration_us > end_us


def _natural(text: str) -> tuple[int, int, str]:
    """Sort key: numbers by value (``7`` before ``20``), then other text."""
    try:
        return (0, int(text), "")
    except ValueError:
        return (1, 0, text)


def _stack_depths(events: Sequence[EventLike]) -> list[int]:
    """The row of each event (sorted by start) on one track: calls nested in, or overlapping, an open one go lower.

    An event goes to the first row whose events have all ended by its start (the open events form a stack),
    so no two events of a row overlap. Depth MAX_DEPTH and more means "too deep to draw".
    """
    stack: list[float] = []
    depths = []
    for ev in events:
        while stack and stack[-1] <= ev.start_us:
            stack.pop()
        depths.append(len(stack))
        stack.append(ev.start_us + ev.duration_us)
    return depths


def _rows_of(depths: Sequence[int]) -> int:
    return min(max(depths, default=-1) + 1, MAX_DEPTH)


def _track_key(pid: str, tid: str) -> str:
    """``pid/tid``, a ``/`` or ``\\`` in either escaped so two tracks never share a key."""
    return "/".join(t.replace("\\", "\\\\").replace("/", "\\/") for t in (pid, tid))


def _track_title(lane: Lane, pid: str, tid: str, pids: int) -> str:
    """``framework ops · thread 1234``, ``device · stream 7`` (``device 1 · stream 7`` when the lane spans pids)."""
    word = TRACK_WORDS[lane]
    head = LANE_TITLES[lane] if pids == 1 else (f"device {pid}" if lane is Lane.DEVICE else f"{LANE_TITLES[lane]} · pid {pid}")
    number = _natural(tid)[0] == 0
    if lane is Lane.DEVICE and number and int(tid) < 0:
        return f"{head} · all streams"  # Kineto's tid -1: device-wide events (a context synchronisation)
    return f"{head} · {word} {tid}" if number else f"{head} · {tid}"


def _fit_tracks(lane: Lane, ranked: list[tuple[str, str]], depths: dict[tuple[str, str], list[int]]) -> int:
    """How many of ``ranked`` (busiest first) get tracks of their own: as many as fit the lane's row budget
    beside the one row that shows the rest's busy time."""
    budget = LANE_ROW_BUDGET[lane]
    rows = [_rows_of(depths[k]) for k in ranked]
    for kept in range(len(ranked), -1, -1):
        if sum(rows[:kept]) + (kept < len(ranked)) <= budget:
            return kept
    return 0


def _merged_spans(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``spans`` as disjoint spans, in time order (spans that only touch stay apart)."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _order(ev: EventLike) -> tuple[float, float, str]:
    return (ev.start_us, -ev.duration_us, ev.name)


def timeline_layout(events: Sequence[EventLike], window_start_us: float, window_end_us: float,
                    step_name: str = "") -> TimelineLayout:
    """Lay out the events overlapping the window: a track per thread (host lanes) and per stream (device lane),
    calls nested (or overlapping) on one track a row lower, no two bars of a row over each other."""
    span = max(window_end_us - window_start_us, 1e-9)
    inside = sorted((e for e in events if e.start_us < window_end_us and e.start_us + e.duration_us > window_start_us
                     and not _encloses(e, window_start_us, window_end_us) and not e.name.startswith("ProfilerStep#")),
                    key=_order)
    by_track: dict[Lane, dict[tuple[str, str], list[EventLike]]] = {}
    for ev in inside:
        by_track.setdefault(_lane_of(ev), {}).setdefault((str(ev.pid), str(ev.tid)), []).append(ev)
    tracks: list[TimelineTrack] = []
    bars: list[TimelineBar] = []
    for lane in Lane:
        lane_events = by_track.get(lane)
        if not lane_events:
            continue
        depths = {k: _stack_depths(evs) for k, evs in lane_events.items()}
        busy = {k: sum(min(e.start_us + e.duration_us, window_end_us) - max(e.start_us, window_start_us)
                       for e, d in zip(evs, depths[k], strict=True) if d == 0)
                for k, evs in lane_events.items()}
        ranked = sorted(lane_events, key=lambda k: (-busy[k], _natural(k[0]), _natural(k[1])))
        n_kept = _fit_tracks(lane, ranked, depths)
        pids = len({pid for pid, _ in ranked})
        for pid, tid in sorted(ranked[:n_kept], key=lambda k: (_natural(k[0]), _natural(k[1]))):
            key = _track_key(pid, tid)
            tracks.append(TimelineTrack(lane, key, _track_title(lane, pid, tid, pids), _rows_of(depths[(pid, tid)])))
            for ev, depth in zip(lane_events[(pid, tid)], depths[(pid, tid)], strict=True):
                start, duration = _clipped(ev, window_start_us, window_end_us)
                bars.append(TimelineBar(lane, min(depth, MAX_DEPTH - 1), start, duration, ev.name, depth >= MAX_DEPTH,
                                        key))
        rest = ranked[n_kept:]
        if rest:  # one row of when any of the rest was busy: the union of their events, unlabelled
            title = f"{LANE_TITLES[lane]} · {len(rest)} {'other ' if n_kept else ''}{TRACK_WORDS[lane]}s"
            tracks.append(TimelineTrack(lane, FOLDED_TRACK, title, 1, len(rest)))
            spans = [_clipped(ev, window_start_us, window_end_us) for k in rest for ev in lane_events[k]]
            bars.extend(TimelineBar(lane, 0, a, b - a, "", False, FOLDED_TRACK)
                        for a, b in _merged_spans([(start, start + duration) for start, duration in spans]))
    bars.sort(key=lambda b: (b.start_us, -b.duration_us))  # stable: time order, lanes top to bottom at a tie
    return TimelineLayout(window_start_us, span, step_name, tuple(bars), tuple(tracks), len(inside))


def _clipped(ev: EventLike, window_start_us: float, window_end_us: float) -> tuple[float, float]:
    """Start (from the window's start) and duration of the part of ``ev`` inside the window."""
    start = max(ev.start_us, window_start_us) - window_start_us
    end = min(ev.start_us + ev.duration_us, window_end_us) - window_start_us
    return start, max(end - start, 0.0)


def iteration_window(events: Sequence[EventLike], start_us: float, end_us: float) -> tuple[float, float]:
    """A host step's window, cut to where its events end and extended to the device work it launched.

    Device work runs asynchronously and often finishes after the host step ends; without the
    extension the snapshot would cut off the kernels the step launched. A step that idles long
    after its last event (a first step that waited on compilation) is cut so the ops stay readable.
    """
    inside = [e for e in events if start_us <= e.start_us < end_us and not e.name.startswith("ProfilerStep#")]
    launched = {e.correlation for e in inside if _lane_of(e) is Lane.RUNTIME and e.correlation is not None}
    device_ends = [e.start_us + e.duration_us for e in events
                   if _lane_of(e) is Lane.DEVICE and e.correlation is not None and e.correlation in launched]
    content_end = max((e.start_us + e.duration_us for e in inside), default=end_us)
    return start_us, max([min(content_end, end_us), *device_ends])


def representative_step(steps: Sequence[EventLike]) -> EventLike | None:
    """The profiler step of median duration (the last of equal ones): a typical iteration."""
    if not steps:
        return None
    ordered = sorted(range(len(steps)), key=lambda i: (steps[i].duration_us, i))
    return steps[ordered[len(ordered) // 2]]
