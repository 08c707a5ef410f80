"""The profiled steps of a variant: a scheduled torch.profiler capture, its op rows and its trace's counts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen.devices.backend import Backend
from reportgen.model.breakdown import TraceBreakdown
from reportgen.model.run import OpRow
from reportgen.profile.timing import CallArgs

_STEP_PREFIX = "ProfilerStep"  # "ProfilerStep#N" events; key_averages names them "ProfilerStep*"


@dataclass(frozen=True)
class ProfileSchedule:
    """torch.profiler's schedule: steps skipped, warmed up, then recorded (``active``)."""

    wait: int
    warmup: int
    active: int

    @property
    def steps(self) -> int:
        """Every step the capture calls the variant for."""
        return self.wait + self.warmup + self.active


@dataclass(frozen=True)
class Capture:
    """What a profile of a variant yields: op rows, per-step counts, its trace and device artifacts."""

    ops: tuple[OpRow, ...]
    dispatches_per_step: int | None
    aten_ops_per_step: int | None
    device_events_per_step: int | None
    trace: Path | None
    artifacts: list[tuple[Path, str]]
    breakdown: TraceBreakdown | None = None
    """Kernels, steps and idle time of the captured trace, as an import computes them; only with a device lane."""


def capture_profile(backend: Backend, fn: Callable[..., Any], args: CallArgs, schedule: ProfileSchedule,
                    work_dir: Path) -> Capture:
    """A scheduled torch.profiler capture: key_averages rows, per-step counts from the trace, artifacts."""
    import torch

    work_dir.mkdir(parents=True, exist_ok=True)
    torch_schedule = torch.profiler.schedule(wait=schedule.wait, warmup=schedule.warmup, active=schedule.active,
                                             repeat=1)
    batch = args.batch(schedule.steps)  # an in-place variant's clones, made before the profiler starts
    with backend.profile_session(work_dir) as extra:
        with torch.profiler.profile(activities=backend.profiler_activities(), schedule=torch_schedule,
                                    record_shapes=True, **extra) as prof:
            for call_args in batch:
                fn(*call_args)
                backend.synchronize()
                prof.step()
    trace, artifacts = backend.collect_artifacts(work_dir)
    counts, breakdown = _trace_counts(trace, schedule.active)
    return Capture(op_rows(prof), *counts, trace, artifacts, breakdown)


def _trace_counts(trace_file: Path | None, active: int
                  ) -> tuple[tuple[int | None, int | None, int | None], TraceBreakdown | None]:
    """(top-level ATen ops, all ATen ops, device events) per step, by the same rules as an import, and the
    trace's kernel and step breakdown where it has a device lane (as ``reportgen import`` makes it)."""
    if trace_file is None:
        return (None, None, None), None
    from reportgen.traces.breakdown import build_breakdown
    from reportgen.traces.optable import build_op_table, per_step
    from reportgen.traces.reader import read_trace

    trace = read_trace(trace_file)
    table = build_op_table(trace)
    device = per_step(table.device_work_count, active) if trace.has_device_lane else None
    breakdown = build_breakdown(trace, table.device_launchers, table.steps) if trace.has_device_lane else None
    return (per_step(table.op_dispatch_count, active), per_step(table.aten_op_count, active), device), breakdown


def op_rows(prof: Any) -> tuple[OpRow, ...]:
    """key_averages() rows of the host ops, grouped by op name (ProfilerStep annotations dropped), input shapes joined.

    Device-side events are left out: torch keeps each kernel as a device-typed event of its own and also adds its
    time to the host op that launched it, and GPU annotations are device-typed spans over those kernels; summing
    every row would count a kernel two or three times. PyTorch's own table sums the kernels once; here each
    kernel's time is on its launcher, as in an import of the same trace.
    """
    shapes: dict[str, list[str]] = {}
    for avg in prof.key_averages(group_by_input_shape=True):
        text = str(avg.input_shapes) if avg.input_shapes else ""
        if text and text not in shapes.setdefault(avg.key, []):
            shapes[avg.key].append(text)
    rows = []
    for avg in prof.key_averages():
        if avg.key.startswith(_STEP_PREFIX) or not _is_host(avg):
            continue
        rows.append(OpRow(
            name=avg.key,
            calls=int(avg.count),
            self_cpu_us=float(avg.self_cpu_time_total),
            total_cpu_us=float(avg.cpu_time_total),
            self_device_us=float(getattr(avg, "self_device_time_total", 0.0)),
            total_device_us=float(getattr(avg, "device_time_total", 0.0)),
            input_shapes="; ".join(shapes.get(avg.key, [])),
        ))
    return tuple(sorted(rows, key=lambda r: (-r.self_device_us, -r.self_cpu_us, r.name)))


def _is_host(avg: Any) -> bool:
    """True for a host (CPU-typed) row; the stand-ins' rows without a device type are host rows."""
    device_type = getattr(avg, "device_type", None)
    return device_type is None or getattr(device_type, "name", str(device_type)) == "CPU"
