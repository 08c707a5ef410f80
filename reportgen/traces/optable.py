"""The op table of a trace, as ``key_averages()`` would give it, built from the events alone (pure).

Rules (docs/importing.md says the same for users):

- **Host ops** are FRAMEWORK-lane events (``cpu_op``, ``user_annotation``, ``python_function`` ...).
  On each (pid, tid) they nest by time: an event is the child of the innermost open event
  that contains it (ends no later, within ``NEST_EPS_US``). ``total_cpu_us`` of a name is the sum
  of its events' durations; ``self_cpu_us`` subtracts the durations of direct child host ops
  (runtime calls such as ``cudaLaunchKernel`` are not host ops: their time stays in the op's
  self time). A child that overlaps its parent only partly is not nested; self time never
  goes below zero.
- **Device time**: each device work event (kernel, memcpy, memset; not annotations, syncs or
  profiler ranges) is attributed to the host op that launched it: its correlation id names a
  RUNTIME event, and the innermost host op open on its thread when that runtime event starts is
  the launcher (a launch may end after its op: it neither closes the op nor counts as a child).
  Fallback: the host op with the same ``External id``, unless the kernel's External id equals its
  correlation id (older Kineto wrote a copy of the correlation id there, not an op's id). The kernel's duration adds to
  the launcher's ``self_device_us`` and to ``total_device_us`` of the launcher and every
  enclosing op. Device work that links to no host op is one row, ``UNATTRIBUTED_ROW``, so the
  rows' self device time always sums to the trace's device time.
- **ATen op count**: every ``aten::*`` host op, nested ones included: a composite such as
  CPU ``aten::rms_norm`` is one dispatch but many ATen ops.
- **Dispatch count**: top-level ATen ops: host ops named ``aten::*`` with no ``aten::`` op
  enclosing them on their thread (the calls user code made into ATen; the ops ATen calls
  internally are not counted). A fused op is one dispatch; the naive RMSNorm is four or more.
"""

from __future__ import annotations

from dataclasses import dataclass

from reportgen.devices.lanes import Lane
from reportgen.model.run import OpRow
from reportgen.traces.events import Trace, TraceEvent, is_device_work
from reportgen.traces.reader import profiler_steps

NEST_EPS_US = 0.01
"""Slack when testing containment: float ``ts + dur`` at 1e12 µs is only exact to ~0.5 ns."""

UNATTRIBUTED_ROW = "(device work not linked to a host op)"
ATEN_PREFIX = "aten::"


@dataclass(frozen=True)
class OpTable:
    """What the site shows for a profiled variant, computed from one trace."""

    rows: tuple[OpRow, ...]
    has_device_lane: bool
    device_work_count: int
    device_work_us: float
    unattributed_device_count: int
    op_dispatch_count: int
    aten_op_count: int
    host_op_count: int
    step_durations_us: tuple[float, ...]
    device_launchers: tuple[str | None, ...] = ()
    """The launching op's name of each device work event of the trace, in trace order (None: not linked)."""
    steps: tuple[TraceEvent, ...] = ()
    """The trace's ProfilerStep events (``profiler_steps``), for the breakdowns."""


@dataclass(slots=True)
class _Frame:
    """One host op while the table is built (mutable accumulator, never leaves this module)."""

    name: str
    duration_us: float
    end_us: float
    parent: _Frame | None
    inside_aten: bool
    child_us: float = 0.0
    self_device_us: float = 0.0
    total_device_us: float = 0.0


def per_step(count: int, steps: int) -> int:
    """A whole-trace count as a per-step figure (the trace's own count when it has no steps)."""
    return round(count / steps) if steps > 0 else count


def build_op_table(trace: Trace) -> OpTable:
    """The op table, device totals and dispatch count of ``trace``."""
    frames, by_correlation, by_external = _nest_host_ops(trace.events)
    device = [e for e in trace.events if e.lane is Lane.DEVICE and is_device_work(e)]
    launchers = tuple(_attribute(e, by_correlation, by_external) for e in device)
    unattributed = [e for e, who in zip(device, launchers, strict=True) if who is None]
    rows = _aggregate(frames, trace.input_shapes)
    steps = profiler_steps(trace)
    if unattributed:
        total = sum(e.duration_us for e in unattributed)
        rows.append(OpRow(UNATTRIBUTED_ROW, len(unattributed), 0.0, 0.0, total, total))
    rows.sort(key=lambda r: (-r.self_device_us, -r.self_cpu_us, r.name))
    return OpTable(
        rows=tuple(rows),
        has_device_lane=trace.has_device_lane,
        device_work_count=len(device),
        device_work_us=sum(e.duration_us for e in device),
        unattributed_device_count=len(unattributed),
        op_dispatch_count=sum(1 for f in frames if f.name.startswith(ATEN_PREFIX) and not f.inside_aten),
        aten_op_count=sum(1 for f in frames if f.name.startswith(ATEN_PREFIX)),
        host_op_count=len(frames),
        step_durations_us=tuple(e.duration_us for e in steps),
        device_launchers=launchers,
        steps=tuple(steps),
    )


def _nest_host_ops(events: tuple[TraceEvent, ...]
                   ) -> tuple[list[_Frame], dict[int, _Frame | None], dict[int, _Frame]]:
    """Host ops with their parents; which op encloses each runtime call (by correlation id) and each External id."""
    frames: list[_Frame] = []
    by_correlation: dict[int, _Frame | None] = {}
    by_external: dict[int, _Frame] = {}
    stacks: dict[tuple[str, str], list[_Frame]] = {}
    last_pid = last_tid = None
    stack: list[_Frame] = []
    for e in events:
        if e.lane is not Lane.FRAMEWORK and e.lane is not Lane.RUNTIME:
            continue
        if e.tid is not last_tid or e.pid is not last_pid:  # the reader shares pid/tid strings
            last_pid, last_tid = e.pid, e.tid
            stack = stacks.setdefault((e.pid, e.tid), [])
        if e.lane is Lane.RUNTIME:  # before popping by end: a launch may outlast the op that made it
            while stack and e.start_us >= stack[-1].end_us:
                stack.pop()
            if e.correlation is not None:
                by_correlation[e.correlation] = stack[-1] if stack else None
            continue
        end = e.start_us + e.duration_us
        while stack and end > stack[-1].end_us + NEST_EPS_US:
            stack.pop()
        parent = stack[-1] if stack else None
        frame = _Frame(e.name, e.duration_us, end, parent,
                       parent is not None and (parent.inside_aten or parent.name.startswith(ATEN_PREFIX)))
        if parent is not None:
            parent.child_us += e.duration_us
        if e.external_id is not None:
            by_external.setdefault(e.external_id, frame)
        frames.append(frame)
        stack.append(frame)
    return frames, by_correlation, by_external


def _attribute(e: TraceEvent, by_correlation: dict[int, _Frame | None], by_external: dict[int, _Frame]) -> str | None:
    """Add a device event's time to its launching op and that op's ancestors; the op's name, None if it has none."""
    frame = by_correlation.get(e.correlation) if e.correlation is not None else None
    if frame is None and e.external_id is not None and e.external_id != e.correlation:  # old Kineto: a copy
        frame = by_external.get(e.external_id)
    if frame is None:
        return None
    frame.self_device_us += e.duration_us
    node: _Frame | None = frame
    while node is not None:
        node.total_device_us += e.duration_us
        node = node.parent
    return frame.name


def _aggregate(frames: list[_Frame], shapes: dict[str, str]) -> list[OpRow]:
    """One row per op name: calls, the four time totals and the input shapes the trace recorded."""
    acc: dict[str, list[float]] = {}
    for f in frames:
        a = acc.get(f.name)
        if a is None:
            a = acc[f.name] = [0, 0.0, 0.0, 0.0, 0.0]
        a[0] += 1
        self_us = f.duration_us - f.child_us
        a[1] += self_us if self_us > 0.0 else 0.0
        a[2] += f.duration_us
        a[3] += f.self_device_us
        a[4] += f.total_device_us
    return [OpRow(name, int(a[0]), a[1], a[2], a[3], a[4], shapes.get(name, "")) for name, a in acc.items()]
