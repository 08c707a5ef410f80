"""One variant's memory per call, measured after its timing samples so timing is untouched.

Two calls, each under ``torch.profiler.profile(profile_memory=True)`` with the device allocator's statistics read
around it where the device keeps them (CUDA); the figures are the second call's, exact when both calls agree. The
profiler's memory events give the ops that allocate and the timeline (``reportgen.analysis.memory``).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reportgen.analysis.memory import CallMemory, call_memory
from reportgen.devices.backend import Backend
from reportgen.model.memory import AllocatorCount, VariantMemory
from reportgen.profile.timing import CallArgs

PROFILER_SOURCE = ("torch.profiler memory events (profile_memory=True) of one call after warm-up, outside the timed "
                   "samples: every allocation and free of the {device} allocator")
TIMELINE_SOURCE = "torch.profiler memory events (profile_memory=True) of the same call"
MEASURED_CALLS = 2
MAX_REASON_CHARS = 300


def measure_memory(backend: Backend, fn: Callable[..., Any], args: CallArgs) -> VariantMemory:
    """Peak above the inputs, bytes allocated and allocations of one call, with the ops and timeline."""
    reason = backend.memory_unavailable()
    if reason is not None or backend.memory_device_type is None:
        return VariantMemory(source="", unavailable=reason or "the profiler records no memory events on this device")
    import torch

    calls: list[tuple[AllocatorCount, str, CallMemory]] = []
    with tempfile.TemporaryDirectory(prefix="reportgen-memory-") as scratch, torch.no_grad():
        for i in range(MEASURED_CALLS):
            calls.append(_one_call(backend, fn, args.one(), Path(scratch) / f"call{i}.json"))
    count, source, events = calls[-1]
    exact = all(c[0] == count for c in calls)
    return VariantMemory(source=source, peak_bytes=count.peak_bytes, allocated_bytes=count.allocated_bytes,
                         allocation_count=count.allocation_count, exact=exact, ops=events.ops,
                         timeline=events.timeline, timeline_source=TIMELINE_SOURCE)


def measure_memory_or_reason(backend: Backend, fn: Callable[..., Any], args: CallArgs) -> VariantMemory:
    """``measure_memory``, or its failure (out of memory under the profiler ...) as the reason there are no figures:
    the variant's timing and profile stand without them."""
    from reportgen.errors import DeviceUnavailable

    try:
        return measure_memory(backend, fn, args)
    except DeviceUnavailable:
        raise
    except Exception as exc:  # the variant ran for timing; only its memory is lost
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:MAX_REASON_CHARS]
        return VariantMemory(source="", unavailable=f"measuring memory failed: {text}")


def _one_call(backend: Backend, fn: Callable[..., Any], call_args: tuple[Any, ...],
              trace_file: Path) -> tuple[AllocatorCount, str, CallMemory]:
    import torch

    held: list[Any] = []

    def call() -> None:
        held.append(fn(*call_args))  # the output stays live to the end of the call, as the caller holds it
        backend.synchronize()

    backend.synchronize()
    with torch.profiler.profile(activities=backend.profiler_activities(), profile_memory=True) as prof:
        counted = backend.allocator_count(call)
        if counted is None:
            call()
    held.clear()
    prof.export_chrome_trace(str(trace_file))
    data = json.loads(trace_file.read_text(encoding="utf-8"))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    memory = call_memory(events, backend.memory_device_type or 0)
    if counted is not None:
        return counted[0], counted[1], memory
    return memory.count, PROFILER_SOURCE.format(device=backend.kind.value.upper()), memory
