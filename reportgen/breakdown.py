"""Kernel, temporal and rank breakdowns of a trace: what the TensorBoard profiler plugin's views answered (pure).

No I/O and no plotting: a ``Trace`` (and the launcher of each device work event, from the op
table) in, frozen dataclasses out. ``build_breakdown`` runs at import time and its result is
stored in ``run.json`` (``VariantResult.breakdown``), so a page is built without reading the
trace again; ``step_spread`` and ``rank_summary`` run at build time on the stored figures.
docs/importing.md ("Breakdowns") gives the definitions to users; in short:

- **Device work**: kernels, memcpy, memset (``trace.is_device_work``). Its **kind**: memcpy or
  memset by category, communication when the kernel name names a collective library
  (``COMMUNICATION_RE``), else compute.
- **Device busy** is the union over streams of the device work intervals; the **sum** over
  streams counts two concurrent kernels twice, so it can exceed the wall time.
- **Step windows**: each host ``ProfilerStep#N`` from its start to the later of its end and the
  end of the device work launched (runtime call started) inside it, but never past the next
  step's start. The whole trace is one more window, from its first event to its last end.
- **Step-time breakdown**: every instant of a window goes to the first of kernel (compute),
  memcpy, memset, communication, runtime (runtime-lane calls), CPU (host ops, the step
  annotations themselves excluded) that is active then, else to other: the parts sum to the
  window's wall time.
- **Idle**: the window minus device busy. The gap before a piece of device work is *host wait*
  when the work's launch started at or after the gap began (the host had not issued it yet),
  and after the last device work; *between kernels* when it was launched before the gap
  began (launch latency, dependencies, syncs); *unknown* when it has no launch in the trace.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import accumulate, compress, islice, repeat
from operator import add, attrgetter, eq, ge, gt, ne, sub

from reportgen.trace import Lane, Trace, TraceEvent, is_device_work, profiler_steps

COMMUNICATION_RE = re.compile(r"nccl|rccl|msccl|c10d::|gloo", re.IGNORECASE)
"""Kernel names of collective communication libraries (NCCL, RCCL, MSCCL, c10d, Gloo)."""
MAX_KERNEL_ROWS = 100
"""Kernel names stored per trace (by total time); the rest are summed into ``hidden_kernel_*``."""
MAX_DRILLDOWN_OPS = 50
"""Ops stored with the kernels they launched (by device time)."""
MAX_KERNELS_PER_OP = 10
WHOLE_TRACE = "whole trace"

Intervals = tuple[list[float], list[float]]
"""Sorted, disjoint intervals as parallel start and end lists."""


class WorkKind(str, Enum):
    """What a piece of device work does."""

    COMPUTE = "compute"
    COMMUNICATION = "communication"
    MEMCPY = "memcpy"
    MEMSET = "memset"


STEP_PARTS = ("kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us", "cpu_us", "other_us")
"""StepBreakdown's step-time parts, in priority order (each instant counts once, for the first active)."""
PART_TITLES = {
    "kernel_us": "kernel (compute)", "memcpy_us": "memcpy", "memset_us": "memset",
    "communication_us": "communication", "runtime_us": "runtime", "cpu_us": "CPU (host ops)",
    "other_us": "other", "device_idle_us": "device idle", "wall_us": "step wall time",
}


@dataclass(frozen=True)
class KernelStat:
    """One kernel name over the whole trace."""

    name: str
    kind: WorkKind
    count: int
    total_us: float
    mean_us: float
    min_us: float
    max_us: float
    share_of_device_sum: float
    """total_us / the sum of all device work durations (over streams) of the trace."""
    launcher: str
    """The op that launched most of this kernel's time ('' when none is linked)."""


@dataclass(frozen=True)
class OpKernel:
    """One kernel name launched by an op."""

    name: str
    count: int
    total_us: float


@dataclass(frozen=True)
class OpKernels:
    """The device work one op name launched (the drill-down of an op-table row)."""

    op: str
    total_us: float
    kernels: tuple[OpKernel, ...]
    hidden_kernel_count: int = 0


@dataclass(frozen=True)
class StepBreakdown:
    """One step window (or the whole trace): device busy and idle, and where the wall time went."""

    name: str
    wall_us: float
    device_busy_us: float
    device_idle_us: float
    idle_host_wait_us: float
    idle_between_kernels_us: float
    idle_unknown_us: float
    kernel_us: float
    memcpy_us: float
    memset_us: float
    communication_us: float
    runtime_us: float
    cpu_us: float
    other_us: float

    def part(self, field_name: str) -> float:
        """One of STEP_PARTS (or another time field) by name."""
        return float(getattr(self, field_name))


@dataclass(frozen=True)
class TraceBreakdown:
    """Everything the breakdown views show of one trace; stored in run.json."""

    rank: int | None
    stream_count: int
    device_work_count: int
    device_sum_us: float
    """Sum of device work durations over all streams (concurrent work counted once per stream)."""
    device_busy_us: float
    """Union over streams of device work: time the device was doing anything."""
    communication_busy_us: float
    overlap_us: float
    """Time communication and compute kernels ran at once (union of each, intersected)."""
    whole: StepBreakdown
    steps: tuple[StepBreakdown, ...]
    kernels: tuple[KernelStat, ...]
    hidden_kernel_count: int
    hidden_kernel_us: float
    op_kernels: tuple[OpKernels, ...]

    @property
    def overlap_fraction(self) -> float | None:
        """Share of communication time hidden under compute; None without communication."""
        return self.overlap_us / self.communication_busy_us if self.communication_busy_us > 0 else None


# ---------------------------------------------------------------------------------------------
# Interval arithmetic on sorted, disjoint lists


class _Span:
    """Sorted, disjoint intervals with prefix sums of their lengths: the length inside a window in O(log n)."""

    __slots__ = ("starts", "ends", "prefix")

    def __init__(self, starts: list[float], ends: list[float]) -> None:
        self.starts = starts
        self.ends = ends
        self.prefix = [0.0, *accumulate(map(sub, ends, starts))]

    def measure(self, lo: float, hi: float) -> float:
        """Length inside [lo, hi)."""
        i = bisect_right(self.ends, lo)
        j = bisect_left(self.starts, hi)
        if i >= j:
            return 0.0
        total = self.prefix[j] - self.prefix[i]
        if self.starts[i] < lo:
            total -= lo - self.starts[i]
        if self.ends[j - 1] > hi:
            total -= self.ends[j - 1] - hi
        return total

    @property
    def total(self) -> float:
        """Length of all intervals."""
        return self.prefix[-1]


_START = attrgetter("start_us")
_DURATION = attrgetter("duration_us")
_NAME = attrgetter("name")
_CATEGORY = attrgetter("category")
_CORRELATION = attrgetter("correlation")


def _merge(starts: list[float], ends: list[float]) -> tuple[list[float], list[float], list[int]]:
    """Union of intervals sorted by start: merged starts, ends, and the index opening each merged one.

    Built from C-level passes (a running maximum of the ends, a comparison per interval), not a
    Python loop per interval: this runs on every host op and kernel of a trace at import time.
    """
    n = len(starts)
    if n == 0:
        return [], [], []
    reach = list(accumulate(ends, max))
    firsts = [0, *compress(range(1, n), map(gt, islice(starts, 1, None), reach))]
    lasts = [i - 1 for i in islice(firsts, 1, None)]
    lasts.append(n - 1)
    return list(map(starts.__getitem__, firsts)), list(map(reach.__getitem__, lasts)), firsts


def _union(a: Intervals, b: Intervals) -> Intervals:
    """The union of two interval lists, each sorted by start."""
    if not b[0]:
        return a
    if not a[0]:
        return b
    starts = a[0] + b[0]
    ends = a[1] + b[1]
    order = sorted(range(len(starts)), key=starts.__getitem__)  # two sorted runs: a linear merge in C
    merged_s, merged_e, _ = _merge(list(map(starts.__getitem__, order)), list(map(ends.__getitem__, order)))
    return merged_s, merged_e


def _intersection_length(a: Intervals, b: Intervals) -> float:
    """Length of a ∩ b for disjoint sorted lists (a two-pointer walk)."""
    a_s, a_e = a
    b_s, b_e = b
    i = j = 0
    total = 0.0
    while i < len(a_s) and j < len(b_s):
        lo = max(a_s[i], b_s[j])
        hi = min(a_e[i], b_e[j])
        if hi > lo:
            total += hi - lo
        if a_e[i] < b_e[j]:
            i += 1
        else:
            j += 1
    return total


def _intervals_of(events: Sequence[TraceEvent]) -> Intervals:
    """The union of events given in trace order (sorted by start)."""
    starts = list(map(_START, events))
    merged_s, merged_e, _ = _merge(starts, list(map(add, starts, map(_DURATION, events))))
    return merged_s, merged_e


# ---------------------------------------------------------------------------------------------
# The breakdown of one trace


def work_kind(e: TraceEvent) -> WorkKind:
    """Memcpy/memset by category, communication by kernel name, else compute."""
    return work_kind_of(e.name, e.category)


def work_kind_of(name: str, category: str) -> WorkKind:
    """The kind of device work called ``name`` in ``category``."""
    cat = category.lower()
    if "memcpy" in cat:
        return WorkKind.MEMCPY
    if "memset" in cat:
        return WorkKind.MEMSET
    return WorkKind.COMMUNICATION if COMMUNICATION_RE.search(name) else WorkKind.COMPUTE


@dataclass
class _Scan:
    """What the passes over the events collect (private)."""

    device: list[TraceEvent]
    cpu: Intervals
    runtime: Intervals
    launch_start_us: dict[int, float]
    span: tuple[float, float]


def _scan(events: Sequence[TraceEvent], steps: list[TraceEvent]) -> _Scan:
    """Device work; the union of host ops (steps excluded) and of runtime calls; launch times; the trace span."""
    framework, runtime, dev = Lane.FRAMEWORK, Lane.RUNTIME, Lane.DEVICE
    step_ids = {id(s) for s in steps}
    host = [e for e in events if e.lane is framework]
    if step_ids:
        host = [e for e in host if id(e) not in step_ids]
    calls = [e for e in events if e.lane is runtime]
    device = [e for e in events if e.lane is dev and is_device_work(e)]
    launch = {e.correlation: e.start_us for e in calls if e.correlation is not None}
    span = (events[0].start_us, max(map(add, map(_START, events), map(_DURATION, events)))) if events else (0.0, 0.0)
    return _Scan(device, _intervals_of(host), _intervals_of(calls), launch, span)


def _windows(steps: list[TraceEvent], scan: _Scan) -> list[tuple[str, float, float]]:
    """(name, start, end) of each step window: disjoint, in time order; device work it launched included."""
    device = scan.device
    launched = list(map(scan.launch_start_us.get, map(_CORRELATION, device)))  # get(None) is None
    linked = [(t, e.start_us + e.duration_us) for t, e in zip(launched, device, strict=True) if t is not None]
    linked.sort()
    launch_times = [t for t, _ in linked]
    ends = [end for _, end in linked]
    out = []
    for i, s in enumerate(steps):
        host_end = s.start_us + s.duration_us
        lo, hi = bisect_left(launch_times, s.start_us), bisect_left(launch_times, host_end)
        end = max(host_end, max(ends[lo:hi], default=host_end))
        if i + 1 < len(steps):
            end = min(end, steps[i + 1].start_us)
        out.append((s.name, s.start_us, max(end, s.start_us)))
    return out


def _gaps_by_cause(busy: Intervals, openers: list[TraceEvent], launch: dict[int, float],
                   span: tuple[float, float]) -> dict[str, _Span]:
    """The gaps in device work inside ``span``, grouped by cause: host wait, between kernels, unknown.

    The gap before busy interval k runs from the end of interval k-1 (the span's start for the
    first) to its start; its cause comes from the launch time of the work opening interval k.
    """
    busy_s, busy_e = busy
    gap_s = [span[0], *busy_e]  # every launch is inside the span, so span[0] stands in for -inf
    gap_e = [*busy_s, span[1]]
    launched = [math.nan if t is None else t for t in map(launch.get, map(_CORRELATION, openers))]
    launched.append(math.inf)  # after the last device work: the host issued nothing more
    host = list(map(ge, launched, gap_s))  # NaN (no launch) compares False
    unknown = list(map(ne, launched, launched))  # only NaN differs from itself
    between = [not (h or u) for h, u in zip(host, unknown, strict=True)]
    out = {}
    for cause, mask in (("host", host), ("between", between), ("unknown", unknown)):
        out[cause] = _Span(list(compress(gap_s, mask)), list(compress(gap_e, mask)))
    return out


def build_breakdown(trace: Trace, launchers: Sequence[str | None]) -> TraceBreakdown:
    """The kernel and temporal breakdown of ``trace``; ``launchers`` is ``OpTable.device_launchers``."""
    steps = profiler_steps(trace)
    scan = _scan(trace.events, steps)
    device = scan.device
    if len(launchers) != len(device):
        launchers = [None] * len(device)
    starts = list(map(_START, device))
    busy_s, busy_e, firsts = _merge(starts, list(map(add, starts, map(_DURATION, device))))
    kind_of = {key: work_kind_of(*key) for key in set(zip(map(_NAME, device), map(_CATEGORY, device), strict=True))}
    present = set(kind_of.values())
    kinds: dict[WorkKind, Intervals] = dict.fromkeys(WorkKind, ([], []))
    if len(present) == 1:  # the common case: all device work is of one kind
        kinds[present.pop()] = (busy_s, busy_e)
    elif present:
        per_event = list(map(kind_of.__getitem__, zip(map(_NAME, device), map(_CATEGORY, device), strict=True)))
        for kind in present:
            kinds[kind] = _intervals_of(list(compress(device, map(eq, per_event, repeat(kind)))))
    layers = _priority_layers(kinds, scan)
    busy_span = _Span(busy_s, busy_e)
    gaps = _gaps_by_cause((busy_s, busy_e), [device[i] for i in firsts], scan.launch_start_us, scan.span)

    def window(name: str, w0: float, w1: float) -> StepBreakdown:
        cumulative = [layer.measure(w0, w1) for layer in layers]
        parts = [max(b - a, 0.0) for a, b in zip([0.0, *cumulative], cumulative, strict=False)]
        wall = w1 - w0
        dev_busy = busy_span.measure(w0, w1)
        kernel, memcpy, memset, comm_us, runtime, cpu = parts
        return StepBreakdown(name, wall, dev_busy, max(wall - dev_busy, 0.0), gaps["host"].measure(w0, w1),
                             gaps["between"].measure(w0, w1), gaps["unknown"].measure(w0, w1),
                             kernel, memcpy, memset, comm_us, runtime, cpu, max(wall - cumulative[-1], 0.0))

    comm = kinds[WorkKind.COMMUNICATION]
    kernels, hidden_n, hidden_us, op_kernels = _kernel_tables(device, launchers,
                                                              {name: k for (name, _), k in kind_of.items()})
    return TraceBreakdown(
        rank=trace.rank,
        stream_count=len({(e.pid, e.tid) for e in device}),
        device_work_count=len(device),
        device_sum_us=math.fsum(map(_DURATION, device)),
        device_busy_us=busy_span.total,
        communication_busy_us=_Span(*comm).total,
        overlap_us=_intersection_length(comm, kinds[WorkKind.COMPUTE]),
        whole=window(WHOLE_TRACE, *scan.span),
        steps=tuple(window(n, w0, w1) for n, w0, w1 in _windows(steps, scan)),
        kernels=kernels,
        hidden_kernel_count=hidden_n,
        hidden_kernel_us=hidden_us,
        op_kernels=op_kernels,
    )


def _priority_layers(kinds: dict[WorkKind, Intervals], scan: _Scan) -> list[_Span]:
    """Cumulative unions: kernel; + memcpy; + memset; + communication; + runtime; + CPU.

    A part's time in a window is its layer's length there minus the layer before it: the time
    it is active while nothing earlier in the priority order is.
    """
    ordered = [kinds[WorkKind.COMPUTE], kinds[WorkKind.MEMCPY], kinds[WorkKind.MEMSET],
               kinds[WorkKind.COMMUNICATION], scan.runtime, scan.cpu]
    layers: list[_Span] = []
    covered: Intervals = ([], [])
    for part in ordered:
        covered = _union(covered, part)
        layers.append(_Span(*covered))
    return layers


def _kernel_tables(device: list[TraceEvent], launchers: Sequence[str | None], kind_of: dict[str, WorkKind]
                   ) -> tuple[tuple[KernelStat, ...], int, float, tuple[OpKernels, ...]]:
    """Per kernel name: count and times, kind, main launcher; per launching op: its kernels."""
    total_all = math.fsum(map(_DURATION, device))
    durations: dict[str, list[float]] = {}
    by_pair: dict[tuple[str, str | None], list[float]] = {}
    for e, who in zip(device, launchers, strict=True):
        d = e.duration_us
        durations.setdefault(e.name, []).append(d)
        by_pair.setdefault((e.name, who), []).append(d)
    launched: dict[str, dict[str, float]] = {}
    per_op: dict[str, list[OpKernel]] = {}
    for (name, who), ds in by_pair.items():
        total = math.fsum(ds)
        launched.setdefault(name, {})[who or ""] = total
        if who is not None:
            per_op.setdefault(who, []).append(OpKernel(name, len(ds), total))
    stats = []
    for name, ds in durations.items():
        total = math.fsum(ds)
        stats.append(KernelStat(name, kind_of[name], len(ds), total, total / len(ds), min(ds), max(ds),
                                total / total_all if total_all > 0 else 0.0, _main_launcher(launched[name])))
    stats.sort(key=lambda k: (-k.total_us, k.name))
    shown, hidden = stats[:MAX_KERNEL_ROWS], stats[MAX_KERNEL_ROWS:]
    ops = []
    for op, lines in per_op.items():
        lines.sort(key=lambda k: (-k.total_us, k.name))
        ops.append(OpKernels(op, math.fsum(k.total_us for k in lines), tuple(lines[:MAX_KERNELS_PER_OP]),
                             max(len(lines) - MAX_KERNELS_PER_OP, 0)))
    ops.sort(key=lambda o: (-o.total_us, o.op))
    return tuple(shown), len(hidden), math.fsum(k.total_us for k in hidden), tuple(ops[:MAX_DRILLDOWN_OPS])


def _main_launcher(times: dict[str, float]) -> str:
    """The launcher with the most time ('' = not linked), ties broken by name."""
    return min(times.items(), key=lambda t: (-t[1], t[0]))[0]


# ---------------------------------------------------------------------------------------------
# At build time: spread over steps, and a folder of ranks


@dataclass(frozen=True)
class PartSpread:
    """One step-time part over the steps: median, min, max, and its share of the summed wall time."""

    part: str
    title: str
    median_us: float
    min_us: float
    max_us: float
    share: float


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def step_spread(steps: Sequence[StepBreakdown]) -> tuple[PartSpread, ...]:
    """Median, min and max over ``steps`` of each step-time part, of device idle and of the wall time."""
    if not steps:
        return ()
    wall = sum(s.wall_us for s in steps)
    out = []
    for part in (*STEP_PARTS, "device_idle_us", "wall_us"):
        values = [s.part(part) for s in steps]
        out.append(PartSpread(part, PART_TITLES[part], _median(values), min(values), max(values),
                              sum(values) / wall if wall > 0 else 0.0))
    return tuple(out)


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
    if b.steps:
        return len(b.steps), _median([s.wall_us for s in b.steps])
    return 0, b.whole.wall_us


def rank_summary(variants: Sequence[tuple[str, TraceBreakdown]]) -> RankSummary | None:
    """Two or more traces side by side (ordered by rank, then name); None for fewer."""
    if len(variants) < 2:
        return None
    ordered = sorted(variants, key=lambda t: (t[1].rank is None, t[1].rank or 0, t[0]))
    times = {name: _step_time(b) for name, b in ordered}
    mid = _median([t for _, t in times.values()])
    straggler = max(ordered, key=lambda t: (times[t[0]][1], t[0]))[0]
    lines = tuple(
        RankLine(name, b.rank, times[name][0], times[name][1],
                 b.whole.device_busy_us / b.whole.wall_us if b.device_work_count and b.whole.wall_us > 0 else None,
                 b.communication_busy_us, b.overlap_fraction, name == straggler,
                 (times[name][1] - mid) / mid if mid > 0 else 0.0)
        for name, b in ordered)
    return RankSummary(lines, mid, straggler)


MAX_STEP_ROWS = 50
"""Steps listed one by one on a page; the spread covers all of them."""


@dataclass(frozen=True)
class BreakdownView:
    """What a run page shows of one variant's stored breakdown."""

    stored: TraceBreakdown
    rows: tuple[StepBreakdown, ...]
    """The step windows listed (at most MAX_STEP_ROWS), or the whole trace when it has no steps."""
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
    rows = b.steps[:MAX_STEP_ROWS] if b.steps else (b.whole,)
    busy = b.whole.device_busy_us / b.whole.wall_us if b.device_work_count and b.whole.wall_us > 0 else None
    return BreakdownView(b, rows, max(len(b.steps) - MAX_STEP_ROWS, 0), step_spread(b.steps), busy)
