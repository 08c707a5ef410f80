"""The op table of a trace in the shape torch 2.13 writes on CUDA: each kernel's time counted once.

torch 2.13's Kineto trace for one CUDA step holds, on the host, ``ProfilerStep#N`` (user_annotation),
the ATen ops (cpu_op, nested: a composite calls its parts) and each launch (cuda_runtime
``cudaLaunchKernel`` with a ``correlation`` and the ``External id`` of its op); on the GPU the kernels
(``kernel``, same correlation) and ``gpu_user_annotation`` spans that repeat the host annotations over
the kernels they enclose. A GPU annotation is not device work: counting it, or counting a kernel in
both its own row and its launcher's, is how 40 µs of kernels became 124 µs.
"""

from __future__ import annotations

from typing import Any

import pytest

from reportgen.traces.optable import UNATTRIBUTED_ROW, build_op_table
from reportgen.traces.reader import read_trace_bytes

KERNELS_US = {"aten::mul": (7.0, 9.0), "aten::mean": (5.0,), "aten::rsqrt": (3.0,), "aten::add": (4.0,)}
"""Each ATen op of one step and the durations of the kernels it launches."""


def _cuda_step(step: int, t0: float, next_corr: list[int]) -> list[dict[str, Any]]:
    host = {"pid": 100, "tid": 100}
    gpu = {"pid": 0, "tid": 7}
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "ts": t0, "dur": 200.0, **host,
         "args": {"External id": 1000 + step}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::rms_norm", "ts": t0 + 1, "dur": 190.0, **host,
         "args": {"External id": 2000 + step}},
    ]
    t_host, t_gpu = t0 + 2, t0 + 20
    gpu_start = t_gpu
    for op, kernels in KERNELS_US.items():
        ext = 3000 + 100 * step + len(events)
        events.append({"ph": "X", "cat": "cpu_op", "name": op, "ts": t_host, "dur": 30.0, **host,
                       "args": {"External id": ext}})
        for i, dur in enumerate(kernels):
            corr = next_corr[0]
            next_corr[0] += 1
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t_host + 2 + 10 * i,
                           "dur": 5.0, **host, "args": {"correlation": corr, "External id": ext}})
            events.append({"ph": "X", "cat": "kernel", "name": f"{op}_kernel_{i}", "ts": t_gpu, "dur": dur, **gpu,
                           "args": {"correlation": corr, "External id": ext, "stream": 7, "device": 0}})
            t_gpu += dur + 1.0
        t_host += 40.0
    events.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{step}", "ts": gpu_start,
                   "dur": t_gpu - gpu_start, **gpu, "args": {"External id": 1000 + step}})
    return events


def cuda_trace(steps: int = 2) -> dict[str, Any]:
    corr = [1]
    events = [e for s in range(steps) for e in _cuda_step(s, 1000.0 + 300.0 * s, corr)]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
            "cuda_runtime_version": 12080, "traceEvents": events, "displayTimeUnit": "ms"}


@pytest.fixture(scope="module")
def table() -> Any:
    import json

    return build_op_table(read_trace_bytes(json.dumps(cuda_trace()).encode(), "cuda.json"))


KERNEL_US_PER_STEP = sum(sum(k) for k in KERNELS_US.values())


def test_the_device_total_is_the_kernel_time(table: Any) -> None:
    assert KERNEL_US_PER_STEP == 28.0
    assert table.device_work_count == 2 * 5
    assert table.device_work_us == pytest.approx(2 * KERNEL_US_PER_STEP)
    assert sum(r.self_device_us for r in table.rows) == pytest.approx(2 * KERNEL_US_PER_STEP)
    assert table.unattributed_device_count == 0
    assert UNATTRIBUTED_ROW not in {r.name for r in table.rows}


def test_each_kernel_counts_once_for_its_launcher_and_within_its_ancestors(table: Any) -> None:
    rows = {r.name: r for r in table.rows}
    assert rows["aten::mul"].self_device_us == pytest.approx(2 * 16.0)
    assert rows["aten::mean"].self_device_us == pytest.approx(2 * 5.0)
    composite = rows["aten::rms_norm"]
    assert composite.self_device_us == 0.0
    assert composite.total_device_us == pytest.approx(2 * KERNEL_US_PER_STEP)
    assert "cudaLaunchKernel" not in rows  # a runtime call is not a host op
    assert not any(name.endswith(("_kernel_0", "_kernel_1")) for name in rows)  # kernels are not op rows


def test_gpu_annotations_are_not_device_work(table: Any) -> None:
    rows = {r.name: r for r in table.rows}
    step = rows.get("ProfilerStep#0")
    assert step is None or step.self_device_us == 0.0
    assert table.op_dispatch_count == 2  # one top-level ATen call per step: the composite
    assert len(table.step_durations_us) == 2


# ---------------------------------------------------------------------------------------------
# A profiled run's op rows (key_averages) in the shape torch 2.13's profiler gives them on CUDA


def _cuda_profile_events() -> Any:
    """The events torch 2.13 builds for one CUDA step, with torch's own classes: a composite ATen op whose child
    launched two kernels (each kernel's time on the child), the kernels as CUDA-typed events of their own, and the
    step's GPU annotation (a CUDA-typed user annotation spanning them)."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import EventList, FunctionEvent

    def event(i: int, name: str, start: float, end: float, device: DeviceType = DeviceType.CPU,
              annotation: bool = False) -> FunctionEvent:
        return FunctionEvent(i, name, thread=1, start_us=start, end_us=end, use_device="cuda", device_type=device,
                             is_user_annotation=annotation, input_shapes=[], stack=[])

    composite = event(1, "aten::rms_norm", 0.0, 100.0)
    child = event(2, "aten::mul", 10.0, 40.0)
    for k, dur in enumerate((16.0, 24.0)):
        child.append_kernel(f"mul_kernel_{k}", 0, dur)
    kernels = [event(3, "mul_kernel_0", 50.0, 66.0, DeviceType.CUDA), event(4, "mul_kernel_1", 70.0, 94.0, DeviceType.CUDA)]
    annotation = event(5, "ProfilerStep#0", 48.0, 96.0, DeviceType.CUDA, annotation=True)
    events = EventList([composite, child, *kernels, annotation], use_device="cuda")
    events._build_tree()  # what torch.profiler does before key_averages: nests the host ops by time
    return events


class _Prof:
    """torch.profiler.profile's key_averages over a prepared EventList."""

    def __init__(self, events: Any) -> None:
        self.events = events

    def key_averages(self, group_by_input_shape: bool = False) -> Any:
        return self.events.key_averages(group_by_input_shapes=group_by_input_shape)  # as torch.profiler.profile does


def test_profiled_op_rows_count_each_kernel_once_as_pytorchs_own_table_does() -> None:
    from reportgen.profile.capture import op_rows

    events = _cuda_profile_events()
    averages = events.key_averages()
    naive_sum = sum(a.self_device_time_total for a in averages)
    assert naive_sum == pytest.approx(40.0 + 40.0 + 48.0)  # every row summed: kernels twice, the annotation too
    rows = {r.name: r for r in op_rows(_Prof(events))}
    assert sum(r.self_device_us for r in rows.values()) == pytest.approx(40.0)
    assert rows["aten::mul"].self_device_us == pytest.approx(40.0)
    assert rows["aten::rms_norm"].self_device_us == 0.0 and rows["aten::rms_norm"].total_device_us == pytest.approx(40.0)
    assert set(rows) == {"aten::rms_norm", "aten::mul"}  # device-side events are not op rows
