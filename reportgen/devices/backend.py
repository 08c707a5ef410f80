"""The profiling backend interface: placement, sync, profiler set-up, compile, fingerprint, roofline peak.

Each device module (``reportgen/devices/<device>.py``) defines its Backend subclass. Backends
import torch lazily: importing the devices package never needs torch.
"""

from __future__ import annotations

import abc
import importlib
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from reportgen.errors import DeviceUnavailable
from reportgen.model.evidence import VariantEvidence
from reportgen.model.memory import AllocatorCount
from reportgen.model.run import Artifact, BandwidthPoint, DeviceKind, DevicePeak, TimeBasis

PEAK_OVERRIDE_ENV = "REPORTGEN_PEAK_BANDWIDTH_GBPS"


def import_torch() -> Any:
    """``import torch`` or a one-line DeviceUnavailable saying how to install it."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        raise DeviceUnavailable("torch is not installed; profiling needs it: pip install torch==2.13.0 "
                                "then pip install -e '.[profile]' (building reports does not)") from None


class Backend(abc.ABC):
    """One device kind's way of running and profiling torch code."""

    kind: DeviceKind
    time_basis: TimeBasis

    @abc.abstractmethod
    def check_available(self) -> None:
        """Raise DeviceUnavailable with a one-line reason when this device cannot be used here."""

    @abc.abstractmethod
    def torch_device(self) -> Any:
        """The ``torch.device`` inputs are placed on."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until all queued device work is done (timing and profiling need it)."""

    @abc.abstractmethod
    def profiler_activities(self) -> list[Any]:
        """``torch.profiler.ProfilerActivity`` values to record."""

    @abc.abstractmethod
    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` under torch.compile with this device's backend."""

    @abc.abstractmethod
    def device_name(self) -> str:
        """Human-readable device model."""

    @abc.abstractmethod
    def measure_peak(self) -> DevicePeak:
        """Roofline ceiling for this device (measured or vendor figure, with its source)."""

    def cache_flush_bytes(self) -> int:
        """Bytes written to flush the device's last-level cache before each timed call; 0: no flush (default).

        A device that flushes is timed one call per sample: ``flush_cache()`` outside the clock, then
        ``time_one_call``, so a call never finds its inputs in a cache the previous call warmed."""
        return 0

    def flush_cache(self) -> None:
        """Evict the last-level cache (write ``cache_flush_bytes()`` bytes); default: nothing to flush."""
        return None

    def time_one_call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> float:
        """One call's time in µs between synchronizations (a device with its own timer overrides this)."""
        import time

        self.synchronize()
        t0 = time.perf_counter_ns()
        fn(*args)
        self.synchronize()
        return (time.perf_counter_ns() - t0) / 1000.0

    def compute_peak(self, dtype: str) -> tuple[float | None, str]:
        """The compute roof for ``dtype`` in FLOP/s and its source (``measured: ...``, ``vendor: ...``).

        Default: unknown, ``(None, "")``; the roofline chart then draws no compute roof."""
        return None, ""

    def profile_session(self, out_dir: Path) -> AbstractContextManager[dict[str, Any]]:
        """Context giving extra ``torch.profiler.profile`` kwargs; default: export a Chrome trace to out_dir."""
        return _ChromeTraceSession(out_dir)

    def collect_artifacts(self, out_dir: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
        """After profiling: (the Chrome trace file or None, [(device artifact, kind)])."""
        traces = sorted(out_dir.glob("*.json"))
        return (traces[0] if traces else None, [])

    def variant_evidence(self, out_dir: Path, steps: int, device_events_per_step: int | None) -> VariantEvidence:
        """After profiling one variant into ``out_dir``: what the device's own tools add (default: nothing)."""
        return VariantEvidence()

    memory_device_type: int | None = 0
    """torch's ``DeviceType`` the profiler's ``[memory]`` events carry for this device's allocations (0: CPU,
    1: CUDA); None: the profiler sees none of them (``memory_unavailable`` says why)."""

    def memory_unavailable(self) -> str | None:
        """Why memory per call cannot be measured on this device; None: it can (default)."""
        return None

    def allocator_count(self, call: Callable[[], None]) -> tuple[AllocatorCount, str] | None:
        """The device allocator's own figures over ``call()`` and their source; None: it keeps none (the CPU's
        figures then come from the profiler's memory events)."""
        return None

    def environment_extras(self) -> dict[str, str | None]:
        """Device-specific environment fields (versions, driver): the device's ``environment_fields``."""
        return {}

    def peak_override(self) -> DevicePeak | None:
        """A user-given bandwidth ceiling from $REPORTGEN_PEAK_BANDWIDTH_GBPS, if set."""
        value = os.environ.get(PEAK_OVERRIDE_ENV)
        if not value:
            return None
        from reportgen.errors import UsageError

        try:
            gbps = float(value)
        except ValueError:
            raise UsageError(f"${PEAK_OVERRIDE_ENV}={value!r}: expected a number of GB/s, e.g. 2900") from None
        if not gbps > 0:
            raise UsageError(f"${PEAK_OVERRIDE_ENV}={value!r}: must be a positive number of GB/s")
        return DevicePeak(gbps * 1e9, None, f"user-given ${PEAK_OVERRIDE_ENV}={value}")


class _ChromeTraceSession(AbstractContextManager[dict[str, Any]]):
    """Default profiler session: ``on_trace_ready`` writes a Chrome trace into ``out_dir``."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    def __enter__(self) -> dict[str, Any]:
        out = self.out_dir

        def export(prof: Any) -> None:
            prof.export_chrome_trace(str(out / f"trace_step{prof.step_num}.json"))

        return {"on_trace_ready": export}

    def __exit__(self, *exc: object) -> None:
        return None


CURVE_WORKING_SETS_BYTES = (32 * 1024, 256 * 1024, 2 * 1024**2, 16 * 1024**2, 64 * 1024**2)
"""Working sets (source + destination) of the copy-bandwidth curve: cache-resident to DRAM-sized."""
CURVE_MIN_BLOCK_S = 0.001
MATMUL_SIZE = 512


def measure_bandwidth_curve(torch: Any, device: Any, synchronize: Callable[[], None],
                            working_sets: tuple[int, ...] = CURVE_WORKING_SETS_BYTES,
                            repeats: int = 15) -> tuple[BandwidthPoint, ...]:
    """Best-of-N ``dst.copy_(src)`` bandwidth at each working set (read + write), each block at least 1 ms.

    Best of many short blocks: on a shared machine some block runs while the others are off the CPU."""
    import time

    points = []
    for ws in working_sets:
        n = max(ws // 8, 1)
        src = torch.ones(n, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)
        dst.copy_(src)
        synchronize()
        t0 = time.perf_counter()
        dst.copy_(src)
        synchronize()
        calls = max(1, min(10_000, int(CURVE_MIN_BLOCK_S / max(time.perf_counter() - t0, 1e-9))))
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                dst.copy_(src)
            synchronize()
            best = min(best, (time.perf_counter() - t0) / calls)
        points.append(BandwidthPoint(n * 8, n * 8 / best))
        del src, dst
    return tuple(points)


def measure_matmul_flops(torch: Any, device: Any, synchronize: Callable[[], None], dtype: str,
                         size: int = MATMUL_SIZE, repeats: int = 10) -> tuple[float, str]:
    """Best-of-N ``torch.mm`` of two size x size matrices of ``dtype``: FLOP/s (2 n^3 per product) and how."""
    import time

    dt = getattr(torch, dtype)
    a = torch.ones(size, size, dtype=dt, device=device)
    b = torch.ones(size, size, dtype=dt, device=device)
    torch.mm(a, b)
    synchronize()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best, f"measured at profile time: torch.mm {size}×{size} {dtype}, best of {repeats}"


def artifact_for(path: Path, rel: str, kind: str) -> Artifact:
    """An Artifact record for a file stored at bundle-relative ``rel``."""
    return Artifact(path=rel, kind=kind, size_bytes=path.stat().st_size)


def measure_copy_bandwidth(torch: Any, device: Any, synchronize: Callable[[], None], size_bytes: int,
                           repeats: int = 5) -> tuple[float, str]:
    """Best-of-N ``dst.copy_(src)`` bandwidth in bytes/s (read + write counted) and a description."""
    import time

    n = size_bytes // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    synchronize()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        synchronize()
        best = min(best, time.perf_counter() - t0)
    mib = size_bytes // (1024 * 1024)
    return (2 * n * 4 / best, f"measured at profile time: torch copy_ of {mib} MiB float32 (read + write), best of {repeats}")
