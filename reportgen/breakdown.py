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
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

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


def _union_sorted(pairs: Sequence[tuple[float, float]]) -> Intervals:
    """Merge intervals given sorted by start (touching ones join)."""
    starts: list[float] = []
    ends: list[float] = []
    for s, e in pairs:
        if ends and s <= ends[-1]:
            if e > ends[-1]:
                ends[-1] = e
        else:
            starts.append(s)
            ends.append(e)
    return starts, ends


def _union(a: Intervals, b: Intervals) -> Intervals:
    return _union_sorted(sorted([*zip(*a, strict=True), *zip(*b, strict=True)]))


def _subtract(a: Intervals, b: Intervals) -> Intervals:
    """``a`` minus ``b``."""
    out_s: list[float] = []
    out_e: list[float] = []
    bs, be = b
    j = 0
    for s, e in zip(*a, strict=True):
        while j < len(bs) and be[j] <= s:
            j += 1
        k, cur = j, s
        while k < len(bs) and bs[k] < e:
            if bs[k] > cur:
                out_s.append(cur)
                out_e.append(bs[k])
            cur = max(cur, be[k])
            k += 1
        if cur < e:
            out_s.append(cur)
            out_e.append(e)
    return out_s, out_e


def _intersect(a: Intervals, b: Intervals) -> Intervals:
    return _subtract(a, _subtract(a, b))


def _measure(a: Intervals, lo: float = -math.inf, hi: float = math.inf) -> float:
    """Length of ``a`` inside [lo, hi)."""
    starts, ends = a
    i = bisect_right(ends, lo)
    total = 0.0
    while i < len(starts) and starts[i] < hi:
        total += min(ends[i], hi) - max(starts[i], lo)
        i += 1
    return total


# ---------------------------------------------------------------------------------------------
# The breakdown of one trace


def work_kind(e: TraceEvent) -> WorkKind:
    """Memcpy/memset by category, communication by kernel name, else compute."""
    cat = e.category.lower()
    if "memcpy" in cat:
        return WorkKind.MEMCPY
    if "memset" in cat:
        return WorkKind.MEMSET
    return WorkKind.COMMUNICATION if COMMUNICATION_RE.search(e.name) else WorkKind.COMPUTE


@dataclass
class _Scan:
    """What one pass over the events collects (private)."""

    device: list[TraceEvent]
    cpu: Intervals
    runtime: Intervals
    launch_start_us: dict[int, float]
    span: tuple[float, float]


def _scan(events: Sequence[TraceEvent], step_ids: set[int]) -> _Scan:
    """One pass: device work, the union of host ops and of runtime calls, launch times, the trace span."""
    device: list[TraceEvent] = []
    cpu_s: list[float] = []
    cpu_e: list[float] = []
    rt_s: list[float] = []
    rt_e: list[float] = []
    launch: dict[int, float] = {}
    framework, runtime, dev = Lane.FRAMEWORK, Lane.RUNTIME, Lane.DEVICE
    hi = -math.inf
    cpu_end = rt_end = -math.inf
    for e in events:  # sorted by start, so a running union needs no sort
        lane = e.lane
        start = e.start_us
        end = start + e.duration_us
        if end > hi:
            hi = end
        if lane is framework:
            if id(e) in step_ids:
                continue
            if start <= cpu_end:
                if end > cpu_end:
                    cpu_e[-1] = cpu_end = end
            else:
                cpu_s.append(start)
                cpu_e.append(end)
                cpu_end = end
        elif lane is runtime:
            if e.correlation is not None:
                launch[e.correlation] = start
            if start <= rt_end:
                if end > rt_end:
                    rt_e[-1] = rt_end = end
            else:
                rt_s.append(start)
                rt_e.append(end)
                rt_end = end
        elif lane is dev and is_device_work(e):
            device.append(e)
    span = (events[0].start_us, hi) if events else (0.0, 0.0)
    return _Scan(device, (cpu_s, cpu_e), (rt_s, rt_e), launch, span)


def _windows(steps: list[TraceEvent], scan: _Scan) -> list[tuple[str, float, float]]:
    """(name, start, end) of each step window: disjoint, in time order; device work it launched included."""
    starts = [s.start_us for s in steps]
    ext = [s.start_us + s.duration_us for s in steps]
    for e in scan.device:
        launched = scan.launch_start_us.get(e.correlation) if e.correlation is not None else None
        if launched is None:
            continue
        i = bisect_right(starts, launched) - 1
        if i >= 0 and launched < steps[i].start_us + steps[i].duration_us:
            ext[i] = max(ext[i], e.start_us + e.duration_us)
    out = []
    for i, s in enumerate(steps):
        end = min(ext[i], starts[i + 1]) if i + 1 < len(steps) else ext[i]
        out.append((s.name, s.start_us, max(end, s.start_us)))
    return out


def _gap_causes(busy_ends: list[float], openers: list[TraceEvent], launch: dict[int, float]) -> list[str]:
    """The cause of the gap before each busy interval, and 'host' for the gap after the last."""
    causes = []
    prev_end = -math.inf
    for opener, end in zip(openers, busy_ends, strict=True):
        launched = launch.get(opener.correlation) if opener.correlation is not None else None
        causes.append("unknown" if launched is None else "host" if launched >= prev_end else "between")
        prev_end = end
    causes.append("host")
    return causes


def _idle_by_cause(busy: Intervals, causes: list[str], lo: float, hi: float) -> dict[str, float]:
    """Idle time in [lo, hi) by the cause of each gap (gap k lies before busy interval k)."""
    out = {"host": 0.0, "between": 0.0, "unknown": 0.0}
    starts, ends = busy
    k = bisect_right(ends, lo)
    cur = lo
    while cur < hi:
        gap_end = starts[k] if k < len(starts) else math.inf
        if gap_end > cur:
            out[causes[k]] += min(gap_end, hi) - cur
        if k >= len(starts):
            break
        cur = max(cur, ends[k])
        k += 1
    return out


def build_breakdown(trace: Trace, launchers: Sequence[str | None]) -> TraceBreakdown:
    """The kernel and temporal breakdown of ``trace``; ``launchers`` is ``OpTable.device_launchers``."""
    steps = profiler_steps(trace)
    scan = _scan(trace.events, {id(s) for s in steps})
    device = scan.device
    if len(launchers) != len(device):
        launchers = [None] * len(device)
    by_kind: dict[WorkKind, list[tuple[float, float]]] = {k: [] for k in WorkKind}
    openers: list[TraceEvent] = []
    busy_s: list[float] = []
    busy_e: list[float] = []
    for e in device:
        end = e.start_us + e.duration_us
        by_kind[work_kind(e)].append((e.start_us, end))
        if busy_e and e.start_us <= busy_e[-1]:
            if end > busy_e[-1]:
                busy_e[-1] = end
        else:
            busy_s.append(e.start_us)
            busy_e.append(end)
            openers.append(e)
    busy: Intervals = (busy_s, busy_e)
    kinds = {k: _union_sorted(v) for k, v in by_kind.items()}
    exclusive = _exclusive_parts(kinds, scan)
    causes = _gap_causes(busy_e, openers, scan.launch_start_us)

    def window(name: str, w0: float, w1: float) -> StepBreakdown:
        parts = [_measure(p, w0, w1) for p in exclusive]
        wall = w1 - w0
        dev_busy = _measure(busy, w0, w1)
        idle = _idle_by_cause(busy, causes, w0, w1)
        kernel, memcpy, memset, comm_us, runtime, cpu = parts
        return StepBreakdown(name, wall, dev_busy, max(wall - dev_busy, 0.0), idle["host"], idle["between"],
                             idle["unknown"], kernel, memcpy, memset, comm_us, runtime, cpu,
                             max(wall - sum(parts), 0.0))

    comm = kinds[WorkKind.COMMUNICATION]
    kernels, hidden_n, hidden_us, op_kernels = _kernel_tables(device, launchers)
    return TraceBreakdown(
        rank=trace.rank,
        stream_count=len({(e.pid, e.tid) for e in device}),
        device_work_count=len(device),
        device_sum_us=sum(e.duration_us for e in device),
        device_busy_us=_measure(busy),
        communication_busy_us=_measure(comm),
        overlap_us=_measure(_intersect(comm, kinds[WorkKind.COMPUTE])),
        whole=window(WHOLE_TRACE, *scan.span),
        steps=tuple(window(n, w0, w1) for n, w0, w1 in _windows(steps, scan)),
        kernels=kernels,
        hidden_kernel_count=hidden_n,
        hidden_kernel_us=hidden_us,
        op_kernels=op_kernels,
    )


def _exclusive_parts(kinds: dict[WorkKind, Intervals], scan: _Scan) -> list[Intervals]:
    """Kernel, memcpy, memset, communication, runtime, CPU: each minus everything before it."""
    ordered = [kinds[WorkKind.COMPUTE], kinds[WorkKind.MEMCPY], kinds[WorkKind.MEMSET],
               kinds[WorkKind.COMMUNICATION], scan.runtime, scan.cpu]
    out: list[Intervals] = []
    covered: Intervals = ([], [])
    for part in ordered:
        out.append(_subtract(part, covered))
        covered = _union(covered, part)
    return out


def _kernel_tables(device: list[TraceEvent], launchers: Sequence[str | None]
                   ) -> tuple[tuple[KernelStat, ...], int, float, tuple[OpKernels, ...]]:
    """Per kernel name: count and times, kind, main launcher; per launching op: its kernels."""
    total_all = sum(e.duration_us for e in device)
    acc: dict[str, list[float]] = {}
    kind: dict[str, WorkKind] = {}
    by_launcher: dict[str, dict[str, float]] = {}
    per_op: dict[str, dict[str, list[float]]] = {}
    for e, who in zip(device, launchers, strict=True):
        d = e.duration_us
        a = acc.get(e.name)
        if a is None:
            acc[e.name] = [1, d, d, d]
            kind[e.name] = work_kind(e)
        else:
            a[0] += 1
            a[1] += d
            a[2] = min(a[2], d)
            a[3] = max(a[3], d)
        launched = by_launcher.setdefault(e.name, {})
        launched[who or ""] = launched.get(who or "", 0.0) + d
        if who is not None:
            k = per_op.setdefault(who, {}).setdefault(e.name, [0, 0.0])
            k[0] += 1
            k[1] += d
    stats = [KernelStat(name, kind[name], int(a[0]), a[1], a[1] / a[0], a[2], a[3],
                        a[1] / total_all if total_all > 0 else 0.0, _main_launcher(by_launcher[name]))
             for name, a in acc.items()]
    stats.sort(key=lambda s: (-s.total_us, s.name))
    shown, hidden = stats[:MAX_KERNEL_ROWS], stats[MAX_KERNEL_ROWS:]
    ops = []
    for op, ks in per_op.items():
        lines = sorted((OpKernel(n, int(v[0]), v[1]) for n, v in ks.items()), key=lambda k: (-k.total_us, k.name))
        ops.append(OpKernels(op, sum(k.total_us for k in lines), tuple(lines[:MAX_KERNELS_PER_OP]),
                             max(len(lines) - MAX_KERNELS_PER_OP, 0)))
    ops.sort(key=lambda o: (-o.total_us, o.op))
    return tuple(shown), len(hidden), sum(s.total_us for s in hidden), tuple(ops[:MAX_DRILLDOWN_OPS])


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
