"""The stored breakdown of a trace (``VariantResult.breakdown`` in run.json): kernel, step-time and rank figures.

Records only; ``reportgen.traces.breakdown`` computes them from a trace at import time and
``reportgen.analysis.breakdown`` shapes them for a page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

COMMUNICATION_RE = re.compile(r"nccl|rccl|msccl|c10d::|gloo", re.IGNORECASE)
"""Kernel names of collective communication libraries (NCCL, RCCL, MSCCL, c10d, Gloo)."""
MAX_KERNEL_ROWS = 100
"""Kernel names stored per trace (by total time); the rest are summed into ``hidden_kernel_*``."""
MAX_DRILLDOWN_OPS = 50
"""Ops stored with the kernels they launched (by device time)."""
MAX_KERNELS_PER_OP = 10
MAX_STORED_STEPS = 50
"""Step windows stored one by one; the spread is over all of them."""
WHOLE_TRACE = "whole trace"


class WorkKind(str, Enum):
    """What a piece of device work does."""

    COMPUTE = "compute"
    COMMUNICATION = "communication"
    MEMCPY = "memcpy"
    MEMSET = "memset"


STEP_PARTS = ("kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us", "cpu_us", "other_us")
"""StepBreakdown's step-time parts, in priority order (each instant counts once, for the first active)."""
PART_TITLES = {
    "kernel_us": "kernel (compute)", "memcpy_us": "memcpy", "memset_us": "memset",
    "communication_us": "communication", "runtime_us": "runtime", "cpu_us": "CPU (host ops)",
    "other_us": "other", "device_idle_us": "device idle", "wall_us": "step wall time",
}


@dataclass(frozen=True)
class KernelStat:
    """One kernel name over the whole trace."""

    name: str
    kind: WorkKind
    count: int
    total_us: float
    mean_us: float
    min_us: float
    max_us: float
    share_of_device_sum: float
    """total_us / the sum of all device work durations (over streams) of the trace."""
    launcher: str
    """The op that launched most of this kernel's time ('' when none is linked)."""


@dataclass(frozen=True)
class OpKernel:
    """One kernel name launched by an op."""

    name: str
    count: int
    total_us: float


@dataclass(frozen=True)
class OpKernels:
    """The device work one op name launched (the drill-down of an op-table row)."""

    op: str
    total_us: float
    kernels: tuple[OpKernel, ...]
    hidden_kernel_count: int = 0


@dataclass(frozen=True)
class StepBreakdown:
    """One step window (or the whole trace): device busy and idle, and where the wall time went."""

    name: str
    wall_us: float
    device_busy_us: float
    device_idle_us: float
    idle_host_wait_us: float
    idle_between_kernels_us: float
    idle_unknown_us: float
    kernel_us: float
    memcpy_us: float
    memset_us: float
    communication_us: float
    runtime_us: float
    cpu_us: float
    other_us: float

    def part(self, field_name: str) -> float:
        """One of STEP_PARTS (or another time field) by name."""
        return float(getattr(self, field_name))


@dataclass(frozen=True)
class PartSpread:
    """One step-time part over the steps: median, min, max, and its share of the summed wall time."""

    part: str
    """A StepBreakdown field: one of STEP_PARTS, "device_idle_us" or "wall_us"."""
    median_us: float
    min_us: float
    max_us: float
    share: float

    @property
    def title(self) -> str:
        """The part's name on a page."""
        return PART_TITLES.get(self.part, self.part)


@dataclass(frozen=True)
class TraceBreakdown:
    """Everything the breakdown views show of one trace; stored in run.json."""

    rank: int | None
    stream_count: int
    device_work_count: int
    device_sum_us: float
    """Sum of device work durations over all streams (concurrent work counted once per stream)."""
    device_busy_us: float
    """Union over streams of device work: time the device was doing anything."""
    communication_busy_us: float
    overlap_us: float
    """Time communication and compute kernels ran at once (union of each, intersected)."""
    whole: StepBreakdown
    steps: tuple[StepBreakdown, ...]
    """The first MAX_STORED_STEPS step windows (a run.json stays small and quick to load)."""
    step_count: int
    spread: tuple[PartSpread, ...]
    """Median, min and max of each step-time part over all ``step_count`` steps."""
    kernels: tuple[KernelStat, ...]
    hidden_kernel_count: int
    hidden_kernel_us: float
    op_kernels: tuple[OpKernels, ...]

    @property
    def overlap_fraction(self) -> float | None:
        """Share of communication time hidden under compute; None without communication."""
        return self.overlap_us / self.communication_busy_us if self.communication_busy_us > 0 else None
