"""The host CPU: CPU activity only, inductor compile, peak from a copy benchmark; no device lane."""

from __future__ import annotations

import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reportgen.devices.backend import (
    Backend,
    import_torch,
    measure_bandwidth_curve,
    measure_copy_bandwidth,
    measure_matmul_flops,
)
from reportgen.devices.spec import Device, TraceEvidence
from reportgen.model.run import BandwidthPoint, CacheLevel, DeviceKind, DevicePeak, TimeBasis

COPY_BENCH_BYTES = 256 * 1024 * 1024
CACHE_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")
_SIZE_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3}


def parse_cache_size(text: str) -> int | None:
    """sysfs cache ``size`` (``48K``, ``2048K``, ``32M``) in bytes; None when unreadable."""
    text = text.strip().upper()
    if not text:
        return None
    factor = _SIZE_UNITS.get(text[-1], 1)
    digits = text[:-1] if text[-1] in _SIZE_UNITS else text
    return int(digits) * factor if digits.isdigit() else None


def cache_levels(folder: Path = CACHE_SYSFS) -> tuple[CacheLevel, ...]:
    """The data and unified caches of CPU 0 as Linux reports them (``L1d``, ``L2``, ``L3``), smallest first."""
    levels: dict[str, int] = {}
    for index in sorted(folder.glob("index*")) if folder.is_dir() else []:
        try:
            kind = (index / "type").read_text().strip()
            level = (index / "level").read_text().strip()
            size = parse_cache_size((index / "size").read_text())
        except OSError:
            continue
        if kind not in ("Data", "Unified") or size is None or not level.isdigit():
            continue
        levels[f"L{level}{'d' if kind == 'Data' else ''}"] = size
    return tuple(sorted((CacheLevel(n, b) for n, b in levels.items()), key=lambda c: c.size_bytes))


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
        from reportgen.devices.host import cpu_model

        return cpu_model() or platform.processor() or "CPU"

    def measure_peak(self) -> DevicePeak:
        import torch

        override = self.peak_override()
        if override:
            return override
        device = torch.device("cpu")
        bw, how = measure_copy_bandwidth(torch, device, self.synchronize, COPY_BENCH_BYTES)
        curve = (*measure_bandwidth_curve(torch, device, self.synchronize), BandwidthPoint(2 * COPY_BENCH_BYTES, bw))
        return DevicePeak(bw, None, f"{how}, {torch.get_num_threads()} threads", bandwidth_curve=curve,
                          cache_levels=cache_levels())

    def compute_peak(self, dtype: str) -> tuple[float | None, str]:
        import torch

        flops, how = measure_matmul_flops(torch, torch.device("cpu"), self.synchronize, dtype)
        return flops, f"{how}, {torch.get_num_threads()} threads"


DEVICE = Device(
    kind=DeviceKind.CPU,
    title="CPU",
    evidence=TraceEvidence(no_device_activity=True),
    evidence_rank=20,
    backend=CpuBackend,
    auto_rank=30,
)
