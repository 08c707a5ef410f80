"""One call's memory from the profiler's memory events: peak, bytes and allocations, the ops that allocate, a timeline.

Pure: it reads the events of a Chrome trace as exported by ``torch.profiler`` with ``profile_memory=True`` (each
allocation or free is an instant event ``[memory]`` whose ``args`` hold ``Bytes`` (negative for a free) and
``Device Type``; ops are complete events of category ``cpu_op``). ``reportgen.profile.memory`` makes the trace.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reportgen.model.memory import (
    MAX_MEMORY_OPS,
    MAX_TIMELINE_POINTS,
    AllocatorCount,
    MemoryOp,
    MemoryPoint,
)

MEMORY_EVENT = "[memory]"
OUTSIDE_OPS = "(outside any op)"
"""Where an allocation made outside every recorded op is listed (e.g. a Python number wrapped as a tensor)."""


@dataclass(frozen=True)
class MemoryEvent:
    """One allocation (``nbytes`` > 0) or free (< 0) of the device measured, at ``ts_us`` on thread ``tid``."""

    ts_us: float
    nbytes: int
    tid: str


@dataclass(frozen=True)
class OpSpan:
    name: str
    start_us: float
    end_us: float
    tid: str


@dataclass(frozen=True)
class CallMemory:
    """What one call's memory events give: the three figures, the ops that allocate and the timeline."""

    count: AllocatorCount
    ops: tuple[MemoryOp, ...]
    timeline: tuple[MemoryPoint, ...]


def memory_events(trace_events: Iterable[Mapping[str, Any]], device_type: int) -> list[MemoryEvent]:
    """The ``[memory]`` events of ``device_type`` (0: CPU, 1: CUDA, as torch's ``DeviceType``), in time order."""
    found = []
    for ev in trace_events:
        args = ev.get("args")
        if ev.get("name") != MEMORY_EVENT or not isinstance(args, Mapping):
            continue
        if args.get("Device Type") != device_type or not isinstance(args.get("Bytes"), int):
            continue
        found.append(MemoryEvent(float(ev.get("ts", 0.0)), int(args["Bytes"]), str(ev.get("tid", ""))))
    return sorted(found, key=lambda e: e.ts_us)


def op_spans(trace_events: Iterable[Mapping[str, Any]]) -> list[OpSpan]:
    """The ``cpu_op`` complete events, by start time."""
    spans = [OpSpan(str(ev.get("name", "")), float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0.0)),
                    str(ev.get("tid", "")))
             for ev in trace_events if ev.get("cat") == "cpu_op" and ev.get("ph") == "X" and "ts" in ev]
    return sorted(spans, key=lambda s: s.start_us)


def count_of(events: Sequence[MemoryEvent]) -> AllocatorCount:
    """Peak of live bytes above the start (never below 0), bytes allocated and allocations."""
    live = peak = 0
    for ev in events:
        live += ev.nbytes
        peak = max(peak, live)
    allocs = [ev.nbytes for ev in events if ev.nbytes > 0]
    return AllocatorCount(peak_bytes=peak, allocated_bytes=sum(allocs), allocation_count=len(allocs))


def allocating_ops(events: Sequence[MemoryEvent], spans: Sequence[OpSpan],
                   limit: int = MAX_MEMORY_OPS) -> tuple[MemoryOp, ...]:
    """Bytes and allocations per op name, each allocation given to the innermost op around it on its thread
    (the latest-starting span that contains it); most bytes first, then name."""
    starts = [s.start_us for s in spans]
    totals: dict[str, tuple[int, int]] = {}
    for ev in events:
        if ev.nbytes <= 0:
            continue
        name = _innermost(ev, spans, starts)
        nbytes, count = totals.get(name, (0, 0))
        totals[name] = (nbytes + ev.nbytes, count + 1)
    rows = [MemoryOp(name, b, c) for name, (b, c) in totals.items()]
    return tuple(sorted(rows, key=lambda r: (-r.allocated_bytes, -r.allocation_count, r.name))[:limit])


def _innermost(ev: MemoryEvent, spans: Sequence[OpSpan], starts: Sequence[float]) -> str:
    for i in range(bisect.bisect_right(starts, ev.ts_us) - 1, -1, -1):
        span = spans[i]
        if span.tid == ev.tid and span.end_us >= ev.ts_us:
            return span.name
    return OUTSIDE_OPS


def timeline(events: Sequence[MemoryEvent], start_us: float, end_us: float,
             max_points: int = MAX_TIMELINE_POINTS) -> tuple[MemoryPoint, ...]:
    """Live bytes above the start after each event (and 0 at the start, the last level at the end), in µs since
    ``start_us``; thinned to ``max_points`` by keeping the highest point of each stretch (the peak survives)."""
    points = [MemoryPoint(0.0, 0)]
    live = 0
    for ev in events:
        live += ev.nbytes
        points.append(MemoryPoint(max(0.0, ev.ts_us - start_us), max(0, live)))
    points.append(MemoryPoint(max(points[-1].t_us, end_us - start_us), max(0, live)))
    return _thin(points, max_points)


def _thin(points: list[MemoryPoint], max_points: int) -> tuple[MemoryPoint, ...]:
    if len(points) <= max_points:
        return tuple(points)
    inner = points[1:-1]
    per = -(-len(inner) // (max_points - 2))
    kept = [max(inner[i:i + per], key=lambda p: p.live_bytes) for i in range(0, len(inner), per)]
    return (points[0], *kept, points[-1])


def call_memory(trace_events: Sequence[Mapping[str, Any]], device_type: int) -> CallMemory:
    """The figures, allocating ops and timeline of the one call a trace holds."""
    events = memory_events(trace_events, device_type)
    spans = op_spans(trace_events)
    start = min([s.start_us for s in spans] + [e.ts_us for e in events], default=0.0)
    end = max([s.end_us for s in spans] + [e.ts_us for e in events], default=start)
    return CallMemory(count_of(events), allocating_ops(events, spans), timeline(events, start, end))
