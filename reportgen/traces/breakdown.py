"""Kernel, temporal and rank breakdowns of a trace: what the TensorBoard profiler plugin's views answered (pure).

No I/O and no plotting: a ``Trace`` (and the launcher of each device work event, from the op
table) in, frozen dataclasses out. ``build_breakdown`` runs at import time and its result is
stored in ``run.json`` (``VariantResult.breakdown``), so a page is built without reading the
trace again; ``reportgen.analysis.breakdown`` shapes them at build time on the stored figures.
Interval arithmetic runs on numpy arrays (C-level passes, not a Python loop per event), so an
import pays about a tenth of ``json.load``'s time for it.
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

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter

import numpy as np
from numpy.typing import NDArray

from reportgen.analysis.stats import median
from reportgen.model.breakdown import (
    COMMUNICATION_RE,
    MAX_DRILLDOWN_OPS,
    MAX_KERNEL_ROWS,
    MAX_KERNELS_PER_OP,
    MAX_STORED_STEPS,
    STEP_PARTS,
    WHOLE_TRACE,
    KernelStat,
    OpKernel,
    OpKernels,
    PartSpread,
    StepBreakdown,
    TraceBreakdown,
    WorkKind,
)
from reportgen.traces.reader import Trace, TraceEvent

# ---------------------------------------------------------------------------------------------
# Interval arithmetic on numpy arrays (a trace has millions of events: no Python loop per event)

Floats = NDArray[np.float64]
Indices = NDArray[np.intp]
_EMPTY: Floats = np.zeros(0)
_START = attrgetter("start_us")
_DURATION = attrgetter("duration_us")
_NAME = attrgetter("name")
_CATEGORY = attrgetter("category")
_CORRELATION = attrgetter("correlation")
_LANE = attrgetter("lane")
_STREAM = attrgetter("pid", "tid")


@dataclass(frozen=True)
class _Span:
    """Sorted, disjoint intervals with prefix sums of their lengths: the length inside windows by binary search."""

    starts: Floats
    ends: Floats

    @property
    def total(self) -> float:
        """Length of all intervals."""
        return float(np.sum(self.ends - self.starts))

    def measure(self, lo: Floats, hi: Floats) -> Floats:
        """Length inside each window [lo[k], hi[k])."""
        prefix = np.concatenate(([0.0], np.cumsum(self.ends - self.starts)))
        i = np.searchsorted(self.ends, lo, side="right")  # first interval ending after lo
        j = np.searchsorted(self.starts, hi, side="left")  # intervals [i, j) start before hi
        inside = i < j
        total = prefix[j] - prefix[i]
        if len(self.starts):
            first = np.minimum(i, len(self.starts) - 1)
            last = np.maximum(j - 1, 0)
            total = total - np.maximum(lo - self.starts[first], 0.0) - np.maximum(self.ends[last] - hi, 0.0)
        return np.where(inside, np.maximum(total, 0.0), 0.0)


def _merge(starts: Floats, ends: Floats) -> tuple[Floats, Floats, Indices]:
    """Union of intervals sorted by start (touching ones join): merged starts, ends, index opening each."""
    n = len(starts)
    if n == 0:
        return _EMPTY, _EMPTY, np.zeros(0, dtype=np.intp)
    reach = np.maximum.accumulate(ends)
    firsts = np.flatnonzero(np.concatenate(([True], starts[1:] > reach[:-1])))
    lasts = np.append(firsts[1:] - 1, n - 1)
    return starts[firsts], reach[lasts], firsts


def _union(a: _Span, b: _Span) -> _Span:
    """The union of two sorted, disjoint interval sets."""
    if not len(b.starts):
        return a
    if not len(a.starts):
        return b
    starts = np.concatenate((a.starts, b.starts))
    order = np.argsort(starts, kind="stable")  # two sorted runs: merged in linear time
    merged_s, merged_e, _ = _merge(starts[order], np.concatenate((a.ends, b.ends))[order])
    return _Span(merged_s, merged_e)


def _floats(values: Iterable[float], count: int) -> Floats:
    return np.fromiter(values, dtype=np.float64, count=count)


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


@dataclass(frozen=True)
class _Lanes:
    """A trace's events split by what the breakdown needs, with their times as arrays."""

    device: list[TraceEvent]
    device_starts: Floats
    device_ends: Floats
    device_durations: Floats
    host: _Span
    runtime: _Span
    launch_corr: NDArray[np.int64]
    """Correlation ids of the runtime calls, sorted (stable: the last of equal ids is the last call)."""
    launch_start_us: Floats
    """The start of the runtime call of each ``launch_corr``."""
    span: tuple[float, float]

    def launch_times(self, events: list[TraceEvent]) -> Floats:
        """When the runtime call that launched each event started (NaN: no such call in the trace)."""
        if not len(self.launch_corr):
            return np.full(len(events), np.nan)
        corr = _ids(map(_CORRELATION, events), len(events))
        k = np.maximum(np.searchsorted(self.launch_corr, corr, side="right") - 1, 0)
        found = (corr >= 0) & (self.launch_corr[k] == corr)
        return np.where(found, self.launch_start_us[k], np.nan)


def _ids(values: Iterable[int | None], count: int) -> NDArray[np.int64]:
    """Correlation ids as int64; -1 for a missing one (and for one that is negative or past int64, never linked)."""
    items = list(values)
    try:
        return np.fromiter(items, dtype=np.int64, count=count)
    except (TypeError, OverflowError):
        return np.fromiter((v if v is not None and 0 <= v < 2**63 else -1 for v in items), dtype=np.int64, count=count)


def _lanes(events: Sequence[TraceEvent], steps: list[TraceEvent]) -> _Lanes:
    from reportgen.devices.lanes import Lane
    from reportgen.traces.reader import is_device_work

    """Device work, the union of host ops (step annotations excluded) and of runtime calls, launch times."""
    n = len(events)
    if n == 0:
        return _Lanes([], _EMPTY, _EMPTY, _EMPTY, _Span(_EMPTY, _EMPTY), _Span(_EMPTY, _EMPTY),
                      np.zeros(0, dtype=np.int64), _EMPTY, (0.0, 0.0))
    starts = _floats(map(_START, events), n)
    durations = _floats(map(_DURATION, events), n)
    ends = starts + durations
    lane_ids = np.fromiter(map(id, map(_LANE, events)), dtype=np.int64, count=n)
    host = lane_ids == id(Lane.FRAMEWORK)
    for s in steps:  # the step annotations span whole steps: they are not host work
        k = int(np.searchsorted(starts, s.start_us, side="left"))
        while k < n and events[k] is not s:
            k += 1
        if k < n:
            host[k] = False
    calls = np.flatnonzero(lane_ids == id(Lane.RUNTIME))
    call_corr = _ids(map(_CORRELATION, map(events.__getitem__, calls.tolist())), len(calls))
    linked = call_corr >= 0
    by_corr = np.argsort(call_corr[linked], kind="stable")
    on_device_idx = np.flatnonzero(lane_ids == id(Lane.DEVICE))
    on_device = list(map(events.__getitem__, on_device_idx.tolist()))
    is_work = {e.category: is_device_work(e) for e in {e.category: e for e in on_device}.values()}
    work = np.fromiter(map(is_work.__getitem__, map(_CATEGORY, on_device)), dtype=bool, count=len(on_device))
    device_idx = on_device_idx[work]
    return _Lanes(
        device=list(compress(on_device, work.tolist())),
        device_starts=starts[device_idx],
        device_ends=ends[device_idx],
        device_durations=durations[device_idx],
        host=_Span(*_merge(starts[host], ends[host])[:2]),
        runtime=_Span(*_merge(starts[calls], ends[calls])[:2]),
        launch_corr=call_corr[linked][by_corr],
        launch_start_us=starts[calls][linked][by_corr],
        span=(float(starts[0]), float(ends.max())),
    )


def _windows(steps: list[TraceEvent], launched: Floats, lanes: _Lanes) -> tuple[Floats, Floats]:
    """Start and end of each step window: disjoint, in time order; device work it launched included."""
    starts = _floats(map(_START, steps), len(steps))
    host_ends = starts + _floats(map(_DURATION, steps), len(steps))
    linked = ~np.isnan(launched)
    order = np.argsort(launched[linked], kind="stable")
    launch_times = launched[linked][order]
    work_ends = lanes.device_ends[linked][order]
    lo = np.searchsorted(launch_times, starts, side="left")
    hi = np.searchsorted(launch_times, host_ends, side="left")
    ends = host_ends.copy()
    for k in np.flatnonzero(hi > lo).tolist():
        ends[k] = max(ends[k], float(work_ends[lo[k]:hi[k]].max()))
    if len(steps) > 1:
        ends[:-1] = np.minimum(ends[:-1], starts[1:])
    return starts, np.maximum(ends, starts)


def _gaps_by_cause(busy: _Span, opener_launch: Floats, span: tuple[float, float]) -> dict[str, _Span]:
    """The gaps in device work inside ``span``, by cause: host wait, between kernels, unknown.

    The gap before busy interval k runs from the end of interval k-1 (the span's start for the
    first) to its start; its cause comes from the launch time of the work opening interval k.
    """
    gap_s = np.concatenate(([span[0]], busy.ends))  # every launch is inside the span: span[0] stands in for -inf
    gap_e = np.concatenate((busy.starts, [span[1]]))
    launched = np.concatenate((opener_launch, [np.inf]))  # after the last device work: the host issued nothing
    unknown = np.isnan(launched)
    host = ~unknown & (launched >= gap_s)
    between = ~unknown & ~host
    return {cause: _Span(gap_s[mask], gap_e[mask])
            for cause, mask in (("host", host), ("between", between), ("unknown", unknown))}


@dataclass(frozen=True)
class _Names:
    """Device work grouped by kernel name (ids of the reader's shared strings, so no hashing of long names)."""

    names: list[str]
    """The name of each group."""
    index: Indices
    """The group of each device work event."""
    kinds: list[WorkKind]


def _names(device: list[TraceEvent]) -> _Names:
    n = len(device)
    if n == 0:
        return _Names([], np.zeros(0, dtype=np.intp), [])
    _, first, index = np.unique(np.fromiter(map(id, map(_NAME, device)), dtype=np.int64, count=n),
                                return_index=True, return_inverse=True)
    # Equal names are almost always one shared string; merge the rare equal copies by value.
    canon: dict[str, int] = {}
    names: list[str] = []
    kinds: list[WorkKind] = []
    remap = np.empty(len(first), dtype=np.intp)
    for group in np.argsort(first, kind="stable").tolist():  # groups in the order their names first appear
        e = device[int(first[group])]
        c = canon.get(e.name)
        if c is None:
            c = canon[e.name] = len(names)
            names.append(e.name)
            kinds.append(work_kind(e))
        remap[group] = c
    return _Names(names, remap[index], kinds)


def _kinds(lanes: _Lanes, names: _Names, busy: _Span, timed: Indices) -> dict[WorkKind, _Span]:
    """The union of each kind of device work (a name's kind is its first event's)."""
    present = set(names.kinds)
    spans = dict.fromkeys(WorkKind, _Span(_EMPTY, _EMPTY))
    if len(present) == 1:  # the common case: all of it is one kind
        spans[present.pop()] = busy
        return spans
    order = list(WorkKind)
    codes = np.array([order.index(k) for k in names.kinds], dtype=np.int8)[names.index[timed]]
    for k, kind in enumerate(order):
        mask = codes == k
        if mask.any():
            spans[kind] = _Span(*_merge(lanes.device_starts[timed][mask], lanes.device_ends[timed][mask])[:2])
    return spans


def build_breakdown(trace: Trace, launchers: Sequence[str | None],
                    steps: Sequence[TraceEvent] | None = None) -> TraceBreakdown | None:
    """The kernel and temporal breakdown of ``trace``; None when its times overflow a float.

    ``launchers`` and ``steps`` are ``OpTable.device_launchers`` and ``OpTable.steps`` of the same
    trace (``steps`` is found again when not given). A trace whose ``ts + dur`` (or a span) is not
    a finite float has no meaningful breakdown: it is left out rather than stored as infinity.
    """
    from reportgen.traces.reader import profiler_steps

    with np.errstate(all="ignore"):  # an overflow is detected below, not printed
        breakdown = _build(trace, launchers, list(profiler_steps(trace) if steps is None else steps))
    return breakdown if _all_finite(breakdown) else None


def _all_finite(obj: object) -> bool:
    """True when every float in a tree of dataclasses and tuples is finite."""
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, tuple):
        return all(_all_finite(x) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return all(_all_finite(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    return True


def _build(trace: Trace, launchers: Sequence[str | None], steps: list[TraceEvent]) -> TraceBreakdown:
    lanes = _lanes(trace.events, steps)
    device = lanes.device
    if len(launchers) != len(device):
        launchers = [None] * len(device)
    timed = np.flatnonzero(lanes.device_durations > 0)  # zero-length work neither fills nor ends a gap
    busy_s, busy_e, firsts = _merge(lanes.device_starts[timed], lanes.device_ends[timed])
    busy = _Span(busy_s, busy_e)
    names = _names(device)
    kinds = _kinds(lanes, names, busy, timed)
    launched = lanes.launch_times(device)
    gaps = _gaps_by_cause(busy, launched[timed[firsts]], lanes.span)
    step_s, step_e = _windows(steps, launched, lanes)
    w0 = np.concatenate(([lanes.span[0]], step_s))
    w1 = np.concatenate(([lanes.span[1]], step_e))
    layers = [kinds[WorkKind.COMPUTE]]
    for part in (kinds[WorkKind.MEMCPY], kinds[WorkKind.MEMSET], kinds[WorkKind.COMMUNICATION], lanes.runtime, lanes.host):
        layers.append(_union(layers[-1], part))
    cumulative = np.array([layer.measure(w0, w1) for layer in layers])
    parts = np.maximum(np.diff(cumulative, axis=0, prepend=0.0), 0.0)
    wall = w1 - w0
    columns = [wall, busy.measure(w0, w1), gaps["host"].measure(w0, w1), gaps["between"].measure(w0, w1),
               gaps["unknown"].measure(w0, w1), *parts, np.maximum(wall - cumulative[-1], 0.0)]
    rows = np.array(columns).T.tolist()
    labels = [WHOLE_TRACE, *(s.name for s in steps)]
    windows = [StepBreakdown(label, r[0], r[1], max(r[0] - r[1], 0.0), *r[2:])
               for label, r in zip(labels, rows, strict=True)]
    comm = kinds[WorkKind.COMMUNICATION]
    kernels, hidden_n, hidden_us, op_kernels = _kernel_tables(lanes, names, launchers)
    return TraceBreakdown(
        rank=trace.rank,
        stream_count=len(set(map(_STREAM, device))),
        device_work_count=len(device),
        device_sum_us=float(lanes.device_durations.sum()),
        device_busy_us=busy.total,
        communication_busy_us=comm.total,
        overlap_us=max(comm.total + kinds[WorkKind.COMPUTE].total - _union(comm, kinds[WorkKind.COMPUTE]).total, 0.0),
        whole=windows[0],
        steps=tuple(windows[1:1 + MAX_STORED_STEPS]),
        step_count=len(windows) - 1,
        spread=step_spread(windows[1:]),
        kernels=kernels,
        hidden_kernel_count=hidden_n,
        hidden_kernel_us=hidden_us,
        op_kernels=op_kernels,
    )


def _kernel_tables(lanes: _Lanes, names: _Names, launchers: Sequence[str | None]
                   ) -> tuple[tuple[KernelStat, ...], int, float, tuple[OpKernels, ...]]:
    """Per kernel name: count and times, kind, main launcher; per launching op: its kernels."""
    n = len(names.index)
    if n == 0:
        return (), 0, 0.0, ()
    durations = lanes.device_durations
    total_all = float(durations.sum())
    groups = len(names.names)
    counts = np.bincount(names.index, minlength=groups)
    totals = np.bincount(names.index, weights=durations, minlength=groups).tolist()
    by_name = np.argsort(names.index, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(counts)[:-1]))
    mins = np.minimum.reduceat(durations[by_name], bounds).tolist()
    maxs = np.maximum.reduceat(durations[by_name], bounds).tolist()
    who_ids, who_first, who_index = np.unique(np.fromiter(map(id, launchers), dtype=np.int64, count=n),
                                              return_index=True, return_inverse=True)
    pair_keys, pair_index = np.unique(names.index * len(who_ids) + who_index, return_inverse=True)
    pair_totals = np.bincount(pair_index, weights=durations, minlength=len(pair_keys)).tolist()
    pair_counts = np.bincount(pair_index, minlength=len(pair_keys)).tolist()
    launched: dict[int, dict[str, float]] = {}
    per_op_acc: dict[str, dict[int, list[float]]] = {}
    for key, total, count in zip(pair_keys.tolist(), pair_totals, pair_counts, strict=True):
        k, w = divmod(key, len(who_ids))
        who = launchers[int(who_first[w])]
        by_who = launched.setdefault(k, {})
        by_who[who or ""] = by_who.get(who or "", 0.0) + total
        if who is not None:
            acc = per_op_acc.setdefault(who, {}).setdefault(k, [0, 0.0])
            acc[0] += count
            acc[1] += total
    per_op = {op: [OpKernel(names.names[k], int(a[0]), a[1]) for k, a in ks.items()] for op, ks in per_op_acc.items()}
    stats = [KernelStat(name, names.kinds[k], int(counts[k]), totals[k], totals[k] / int(counts[k]), mins[k], maxs[k],
                        totals[k] / total_all if total_all > 0 else 0.0, _main_launcher(launched[k]))
             for k, name in enumerate(names.names)]
    stats.sort(key=lambda s: (-s.total_us, s.name))
    shown, hidden = stats[:MAX_KERNEL_ROWS], stats[MAX_KERNEL_ROWS:]
    ops = []
    for op, lines in per_op.items():
        lines.sort(key=lambda line: (-line.total_us, line.name))
        ops.append(OpKernels(op, sum(line.total_us for line in lines), tuple(lines[:MAX_KERNELS_PER_OP]),
                             max(len(lines) - MAX_KERNELS_PER_OP, 0)))
    ops.sort(key=lambda o: (-o.total_us, o.op))
    return tuple(shown), len(hidden), sum(s.total_us for s in hidden), tuple(ops[:MAX_DRILLDOWN_OPS])


def _main_launcher(times: dict[str, float]) -> str:
    """The launcher with the most time ('' = not linked), ties broken by name."""
    return min(times.items(), key=lambda t: (-t[1], t[0]))[0]


# ---------------------------------------------------------------------------------------------
# At build time: spread over steps, and a folder of ranks


def step_spread(steps: Sequence[StepBreakdown]) -> tuple[PartSpread, ...]:
    """Median, min and max over ``steps`` of each step-time part, of device idle and of the wall time."""
    if not steps:
        return ()
    wall = sum(s.wall_us for s in steps)
    out = []
    for part in (*STEP_PARTS, "device_idle_us", "wall_us"):
        values = [s.part(part) for s in steps]
        out.append(PartSpread(part, median(values), min(values), max(values),
                              sum(values) / wall if wall > 0 else 0.0))
    return tuple(out)
