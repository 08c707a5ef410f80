"""NVIDIA GPUs through CUDA: the backend (also used by ROCm builds of torch), Kineto's GPU lanes, CUDA versions.

Profiling: CPU + CUDA activities, inductor, copy-benchmark peak.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Callable
from typing import Any

from reportgen.devices.backend import Backend, import_torch, measure_copy_bandwidth
from reportgen.devices.lanes import KINETO_GPU_DEVICE_CATEGORIES, KINETO_GPU_WORK_CATEGORIES, LaneRules
from reportgen.devices.spec import Device, EnvField, TraceEvidence, TraceHeader
from reportgen.errors import DeviceUnavailable
from reportgen.model.run import DeviceKind, DevicePeak, TimeBasis

COPY_BENCH_BYTES = 2 * 1024 * 1024 * 1024
FLUSH_MIN_BYTES = 256 * 1024 * 1024
"""At least this much is written to flush the L2 (Triton's do_bench writes 256 MB); twice the L2 when larger."""


class CudaBackend(Backend):
    """Runs on GPU 0; device time comes from CUPTI kernel records."""

    kind = DeviceKind.CUDA
    time_basis = TimeBasis.DEVICE

    def check_available(self) -> None:
        torch = import_torch()
        if not torch.cuda.is_available():
            raise DeviceUnavailable("device cuda: torch.cuda.is_available() is False here; "
                                    "use the cpu device or a machine with an NVIDIA GPU and a CUDA build of torch",
                                    field="device")

    def torch_device(self) -> Any:
        import torch

        return torch.device("cuda", 0)

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def profiler_activities(self) -> list[Any]:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        return torch.compile(fn, backend="inductor")

    def device_name(self) -> str:
        import torch

        return str(torch.cuda.get_device_name(0))

    def measure_peak(self) -> DevicePeak:
        import torch

        override = self.peak_override()
        if override:
            return override
        bw, how = measure_copy_bandwidth(torch, self.torch_device(), self.synchronize, COPY_BENCH_BYTES)
        return DevicePeak(bw, None, how)

    def compute_peak(self, dtype: str) -> tuple[float | None, str]:
        return vendor_compute_roof(self.device_name(), dtype)

    _flush_buffer: Any = None

    @functools.cached_property
    def _flush_bytes(self) -> int:
        import torch

        l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0)
        return max(FLUSH_MIN_BYTES, 2 * l2)

    def cache_flush_bytes(self) -> int:
        return self._flush_bytes  # asked before every timing block: the device's properties are read once

    def flush_cache(self) -> None:
        import torch

        if self._flush_buffer is None:
            self._flush_buffer = torch.empty(self.cache_flush_bytes() // 4, dtype=torch.int32, device="cuda")
        self._flush_buffer.zero_()

    def time_one_call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> float:
        """CUDA events around the call: device time of the call, without the host's launch and sync overhead."""
        import torch

        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) * 1000.0

    def environment_extras(self) -> dict[str, str | None]:
        import torch

        return {"cuda_version": torch.version.cuda or torch.version.hip, "driver_version": _nvidia_driver()}


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def _extras_from_trace(trace: TraceHeader) -> dict[str, str]:
    """Kineto writes the CUDA runtime version as an integer (12040 -> "12.4")."""
    runtime = trace.cuda_runtime_version
    return {"cuda_version": f"{runtime // 1000}.{runtime % 1000 // 10}"} if runtime else {}


DEVICE = Device(
    kind=DeviceKind.CUDA,
    title="NVIDIA GPU (CUDA)",
    lanes=LaneRules(device_categories=KINETO_GPU_DEVICE_CATEGORIES | {"cuda_sync", "cuda_profiler_range"},
                    device_work_categories=KINETO_GPU_WORK_CATEGORIES),
    evidence=TraceEvidence(runtime_name_prefixes=("cu",), device_name_contains=("nvidia",),
                           category_prefixes=("cuda",)),
    evidence_rank=40,
    environment_fields=(EnvField("cuda_version", "CUDA"), EnvField("driver_version", "driver", compared=False)),
    backend=CudaBackend,
    auto_rank=20,
    extras_from_trace=_extras_from_trace,
)


VENDOR_DENSE_TFLOPS: dict[str, dict[str, float]] = {
    "H200": {"bfloat16": 990.0, "float32": 67.0},
}
"""Dense TFLOP/s per dtype of the GPUs with a documented figure (``../shared/design/trainium-profiling-facts.md``)."""


def vendor_compute_roof(device_name: str, dtype: str) -> tuple[float | None, str]:
    """The vendor's dense FLOP/s for ``dtype`` on a GPU whose name holds a known model; (None, why) otherwise."""
    model = next((m for m in VENDOR_DENSE_TFLOPS if m in device_name.upper()), None)
    if model is None or dtype not in VENDOR_DENSE_TFLOPS[model]:
        return None, f"compute roof: none (no vendor {dtype} figure recorded for {device_name})"
    tflops = VENDOR_DENSE_TFLOPS[model][dtype]
    return tflops * 1e12, f"vendor: {model} {tflops:g} TFLOPS dense {dtype}"
