"""NVIDIA GPUs through CUDA: the backend (also used by ROCm builds of torch), Kineto's GPU lanes, CUDA versions.

Profiling: CPU + CUDA activities, inductor, copy-benchmark peak.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

from reportgen.devices.backend import Backend, import_torch, measure_copy_bandwidth
from reportgen.devices.lanes import KINETO_GPU_DEVICE_CATEGORIES, KINETO_GPU_WORK_CATEGORIES, LaneRules
from reportgen.devices.spec import Device, EnvField, TraceEvidence, TraceHeader
from reportgen.errors import DeviceUnavailable
from reportgen.model.memory import AllocatorCount
from reportgen.model.run import DeviceKind, DevicePeak, TimeBasis

COPY_BENCH_BYTES = 2 * 1024 * 1024 * 1024
FLUSH_MIN_BYTES = 256 * 1024 * 1024
"""At least this much is written to flush the L2 (Triton's do_bench writes 256 MB); twice the L2 when larger."""


class CudaBackend(Backend):
    """Runs on torch's current CUDA device (the first visible one unless the process chose another); device time
    comes from CUPTI kernel records."""

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

        return torch.device("cuda", torch.cuda.current_device())

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def profiler_activities(self) -> list[Any]:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        return torch.compile(fn, backend="inductor")

    memory_device_type = 1

    def allocator_count(self, call: Callable[[], None]) -> tuple[AllocatorCount, str] | None:
        """The caching allocator's statistics around ``call()`` (synchronized before each read)."""
        import torch

        self.synchronize()
        live_before = int(torch.cuda.memory_allocated())
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_stats()
        call()
        self.synchronize()
        return allocator_count_from_stats(before, torch.cuda.memory_stats(), live_before,
                                          int(torch.cuda.max_memory_allocated()))

    def device_name(self) -> str:
        import torch

        return str(torch.cuda.get_device_name(torch.cuda.current_device()))

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

        l2 = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or 0)
        return max(FLUSH_MIN_BYTES, 2 * l2)

    def cache_flush_bytes(self) -> int:
        return self._flush_bytes  # asked before every timing block: the device's properties are read once

    def flush_cache(self) -> None:
        import torch

        if self._flush_buffer is None:
            self._flush_buffer = torch.empty(self.cache_flush_bytes() // 4, dtype=torch.int32, device=self.torch_device())
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

        index = torch.cuda.current_device()
        uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "")
        smi = gpu_facts(_nvidia_smi(f"GPU-{uuid}" if uuid and not uuid.startswith("GPU-") else uuid or str(index)))
        return {"cuda_version": torch.version.cuda or torch.version.hip, "cuda_device_index": str(index),
                "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), **smi}


SMI_FIELDS = {"driver_version": "driver_version", "uuid": "gpu_uuid", "compute_mode": "compute_mode",
              "mig.mode.current": "mig_mode", "clocks.sm": "sm_clock", "clocks.max.sm": "sm_clock_max",
              "clocks.mem": "memory_clock"}
"""nvidia-smi --query-gpu fields recorded with a CUDA run, and their names in ``device_extras``."""


def _nvidia_smi(device: str) -> str | None:
    """``nvidia-smi``'s CSV line for one GPU (by UUID or index), None where it cannot run."""
    try:
        out = subprocess.run(["nvidia-smi", "-i", device, f"--query-gpu={','.join(SMI_FIELDS)}",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def gpu_facts(csv_line: str | None) -> dict[str, str | None]:
    """The device extras in ``nvidia-smi --query-gpu=... --format=csv,noheader`` output (values as printed, units
    included: ``1980 MHz``); fields it reports as ``[N/A]`` (MIG mode on a GPU without MIG) are left out."""
    lines = (csv_line or "").strip().splitlines()
    values = [v.strip() for v in lines[0].split(",")] if lines else []
    if len(values) != len(SMI_FIELDS):
        return {"driver_version": None}
    return {name: value for name, value in zip(SMI_FIELDS.values(), values, strict=True)
            if value and value not in ("[N/A]", "N/A", "[Not Supported]")}


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
    # also recorded, shown with the device evidence: cuda_device_index, CUDA_VISIBLE_DEVICES and SMI_FIELDS' names
    backend=CudaBackend,
    auto_rank=20,
    extras_from_trace=_extras_from_trace,
)


VENDOR_DENSE_TFLOPS: dict[str, dict[str, float]] = {
    "NVIDIA H200": {"bfloat16": 990.0, "float16": 990.0, "float32": 67.0},
}
"""Dense TFLOP/s per dtype, keyed by the exact name torch reports (``torch.cuda.get_device_name``). NVIDIA's H200
(SXM) datasheet: BF16 and FP16 Tensor Core 1,979 TFLOPS with sparsity (989.5 dense), FP32 67 TFLOPS. Other
parts sharing a substring (``NVIDIA H200 NVL``, ``NVIDIA GH200 480GB``, a MIG slice) have other figures: no roof
until theirs is recorded."""


def vendor_compute_roof(device_name: str, dtype: str) -> tuple[float | None, str]:
    """The vendor's dense FLOP/s for ``dtype`` on exactly this GPU model; (None, why) otherwise."""
    figures = VENDOR_DENSE_TFLOPS.get(device_name.strip())
    if figures is None or dtype not in figures:
        return None, f"compute roof: none (no vendor {dtype} figure recorded for {device_name})"
    model = device_name.strip().removeprefix("NVIDIA ")
    return figures[dtype] * 1e12, f"vendor: {model} {figures[dtype]:g} TFLOPS dense {dtype}"


CUDA_BYTES_KEY = "allocated_bytes.all.allocated"
CUDA_COUNT_KEYS = ("allocation.all.allocated", "allocated.all.allocated")
"""``torch.cuda.memory_stats`` keys: bytes allocated and allocation requests over the process's life (the count's
key is ``allocation.*`` in torch's allocator, ``allocated.*`` in its docstring; whichever the stats have)."""


def allocator_count_from_stats(before: Mapping[str, Any], after: Mapping[str, Any], live_before: int,
                               max_allocated: int) -> tuple[AllocatorCount, str] | None:
    """One call's figures from ``memory_stats()`` before and after it, ``memory_allocated()`` before it and
    ``max_memory_allocated()`` after it (peak stats reset before the call); None if the stats lack the keys."""
    count_key = next((k for k in CUDA_COUNT_KEYS if k in before and k in after), None)
    if count_key is None or CUDA_BYTES_KEY not in before or CUDA_BYTES_KEY not in after:
        return None
    count = AllocatorCount(peak_bytes=max(0, max_allocated - live_before),
                           allocated_bytes=int(after[CUDA_BYTES_KEY]) - int(before[CUDA_BYTES_KEY]),
                           allocation_count=int(after[count_key]) - int(before[count_key]))
    source = (f"CUDA caching allocator over one call after warm-up: torch.cuda.max_memory_allocated() after "
              f"reset_peak_memory_stats() less memory_allocated() before; memory_stats() '{CUDA_BYTES_KEY}' and "
              f"'{count_key}' differences (sizes as the allocator rounds them)")
    return count, source
