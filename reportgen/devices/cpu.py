"""The host CPU: CPU activity only, inductor compile, peak from a copy benchmark; no device lane."""

from __future__ import annotations

import platform
from collections.abc import Callable
from typing import Any

from reportgen.devices.backend import Backend, import_torch, measure_copy_bandwidth
from reportgen.devices.spec import Device, TraceEvidence
from reportgen.model import DeviceKind, DevicePeak, TimeBasis

COPY_BENCH_BYTES = 256 * 1024 * 1024


class CpuBackend(Backend):
    """Runs on the host CPU; the "device" time in reports is CPU time."""

    kind = DeviceKind.CPU
    time_basis = TimeBasis.CPU

    def check_available(self) -> None:
        import_torch()

    def torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def synchronize(self) -> None:
        return None

    def profiler_activities(self) -> list[Any]:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU]

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        return torch.compile(fn, backend="inductor")

    def device_name(self) -> str:
        from reportgen.environment import cpu_model

        return cpu_model() or platform.processor() or "CPU"

    def measure_peak(self) -> DevicePeak:
        import torch

        override = self.peak_override()
        if override:
            return override
        bw, how = measure_copy_bandwidth(torch, torch.device("cpu"), self.synchronize, COPY_BENCH_BYTES)
        return DevicePeak(bw, None, f"{how}, {torch.get_num_threads()} threads")


DEVICE = Device(
    kind=DeviceKind.CPU,
    title="CPU",
    evidence=TraceEvidence(no_device_activity=True),
    evidence_rank=20,
    backend=CpuBackend,
    auto_rank=30,
)
