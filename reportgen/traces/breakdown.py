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
from reportgen.devices.lanes import Lane
from reportgen.model.breakdown import (
    MAX_STORED_STEPS,
    STEP_PARTS,
    WHOLE_TRACE,
    PartSpread,
    StepBreakdown,
    TraceBreakdown,
    WorkKind,
)
from reportgen.traces.events import Trace, TraceEvent, is_device_work
from reportgen.traces.intervals import EMPTY, Floats, Indices, Span, floats, merge, union
from reportgen.traces.kernels import KernelNames, kernel_names, kernel_tables
from reportgen.traces.reader import profiler_steps

_START = attrgetter("start_us")
_DURATION = attrgetter("duration_us")
_CATEGORY = attrgetter("category")
_CORRELATION = attrgetter("correlation")
_LANE = attrgetter("lane")
_STREAM = attrgetter("pid", "tid")


@dataclass(frozen=True)
class _Lanes:
    """A trace's events split by what the breakdown needs, with their times as arrays."""

    device: list[TraceEvent]
    device_starts: Floats
    device_ends: Floats
    device_durations: Floats
    host: Span
    runtime: Span
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
    """Device work, the union of host ops (step annotations excluded) and of runtime calls, launch times."""
    n = len(events)
    if n == 0:
        return _Lanes([], EMPTY, EMPTY, EMPTY, Span(EMPTY, EMPTY), Span(EMPTY, EMPTY),
                      np.zeros(0, dtype=np.int64), EMPTY, (0.0, 0.0))
    starts = floats(map(_START, events), n)
    durations = floats(map(_DURATION, events), n)
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
        host=Span(*merge(starts[host], ends[host])[:2]),
        runtime=Span(*merge(starts[calls], ends[calls])[:2]),
        launch_corr=call_corr[linked][by_corr],
        launch_start_us=starts[calls][linked][by_corr],
        span=(float(starts[0]), float(ends.max())),
    )


def _windows(steps: list[TraceEvent], launched: Floats, lanes: _Lanes) -> tuple[Floats, Floats]:
    """Start and end of each step window: disjoint, in time order; device work it launched included."""
    starts = floats(map(_START, steps), len(steps))
    host_ends = starts + floats(map(_DURATION, steps), len(steps))
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


def _gaps_by_cause(busy: Span, opener_launch: Floats, span: tuple[float, float]) -> dict[str, Span]:
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
    return {cause: Span(gap_s[mask], gap_e[mask])
            for cause, mask in (("host", host), ("between", between), ("unknown", unknown))}


def _kinds(lanes: _Lanes, names: KernelNames, busy: Span, timed: Indices) -> dict[WorkKind, Span]:
    """The union of each kind of device work (a name's kind is its first event's)."""
    present = set(names.kinds)
    spans = dict.fromkeys(WorkKind, Span(EMPTY, EMPTY))
    if len(present) == 1:  # the common case: all of it is one kind
        spans[present.pop()] = busy
        return spans
    order = list(WorkKind)
    codes = np.array([order.index(k) for k in names.kinds], dtype=np.int8)[names.index[timed]]
    for k, kind in enumerate(order):
        mask = codes == k
        if mask.any():
            spans[kind] = Span(*merge(lanes.device_starts[timed][mask], lanes.device_ends[timed][mask])[:2])
    return spans


def build_breakdown(trace: Trace, launchers: Sequence[str | None],
                    steps: Sequence[TraceEvent] | None = None) -> TraceBreakdown | None:
    """The kernel and temporal breakdown of ``trace``; None when its times overflow a float.

    ``launchers`` and ``steps`` are ``OpTable.device_launchers`` and ``OpTable.steps`` of the same
    trace (``steps`` is found again when not given). A trace whose ``ts + dur`` (or a span) is not
    a finite float has no meaningful breakdown: it is left out rather than stored as infinity.
    """
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
    busy_s, busy_e, firsts = merge(lanes.device_starts[timed], lanes.device_ends[timed])
    busy = Span(busy_s, busy_e)
    names = kernel_names(device)
    kinds = _kinds(lanes, names, busy, timed)
    launched = lanes.launch_times(device)
    gaps = _gaps_by_cause(busy, launched[timed[firsts]], lanes.span)
    step_s, step_e = _windows(steps, launched, lanes)
    w0 = np.concatenate(([lanes.span[0]], step_s))
    w1 = np.concatenate(([lanes.span[1]], step_e))
    layers = [kinds[WorkKind.COMPUTE]]
    for part in (kinds[WorkKind.MEMCPY], kinds[WorkKind.MEMSET], kinds[WorkKind.COMMUNICATION], lanes.runtime, lanes.host):
        layers.append(union(layers[-1], part))
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
    kernels, hidden_n, hidden_us, op_kernels = kernel_tables(lanes.device_durations, names, launchers)
    return TraceBreakdown(
        rank=trace.rank,
        stream_count=len(set(map(_STREAM, device))),
        device_work_count=len(device),
        device_sum_us=float(lanes.device_durations.sum()),
        device_busy_us=busy.total,
        communication_busy_us=comm.total,
        overlap_us=max(comm.total + kinds[WorkKind.COMPUTE].total - union(comm, kinds[WorkKind.COMPUTE]).total, 0.0),
        whole=windows[0],
        steps=tuple(windows[1:1 + MAX_STORED_STEPS]),
        step_count=len(windows) - 1,
        spread=step_spread(windows[1:]),
        kernels=kernels,
        hidden_kernel_count=hidden_n,
        hidden_kernel_us=hidden_us,
        op_kernels=op_kernels,
    )


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
