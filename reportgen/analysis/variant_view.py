"""What the page says about one variant: its op table and hotspot, timing summary, and bandwidth against the roofline.

Pure analysis of one variant of a run bundle: no disk, no matplotlib, dataclasses in and out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from reportgen.analysis import stats
from reportgen.analysis.breakdown import BreakdownView, breakdown_view
from reportgen.analysis.ceilings import is_over_ceiling
from reportgen.model.memory import VariantMemory
from reportgen.model.run import OpRow, TimeBasis, VariantResult, VariantStatus

MAX_OP_ROWS = 20
"""Op-table rows shown per variant; the rest are summed into one "other ops" line."""


# ---------------------------------------------------------------------------------------------
# Op breakdown


@dataclass(frozen=True)
class OpLine:
    """One op-table row as the article shows it: totals over the profiled steps."""

    name: str
    calls: int
    self_device_us: float
    total_device_us: float
    share: float
    per_call_us: float
    input_shapes: str
    is_hotspot: bool


@dataclass(frozen=True)
class OpBreakdown:
    """A variant's op table, sorted by self device time, with the hotspot and the device total."""

    time_basis: TimeBasis
    device_label: str
    lines: tuple[OpLine, ...]
    hidden_count: int
    hidden_self_device_us: float
    total_self_device_us: float
    profiled_steps: int
    step_overhead_us: float = 0.0
    """Self time of the ``ProfilerStep*`` rows: host time between ops, not an op; kept out of the table."""

    @property
    def hotspot(self) -> OpLine | None:
        """The op with the largest self device time, or None for an empty table."""
        return next((line for line in self.lines if line.is_hotspot), None)


def is_step_row(name: str) -> bool:
    """True for key_averages' ``ProfilerStep*`` rows: the step wrapper, whose self time is loop overhead."""
    return name.startswith("ProfilerStep")


def device_label(basis: TimeBasis) -> str:
    """Column label for "device time": the CPU itself on a CPU run, so say so."""
    return "CPU (device)" if basis is TimeBasis.CPU else "device"


def _device_times(row: OpRow, basis: TimeBasis) -> tuple[float, float]:
    """(self, total) device time of ``row`` under ``basis``."""
    if basis is TimeBasis.CPU:
        return row.self_cpu_us, row.total_cpu_us
    return row.self_device_us, row.total_device_us


def op_breakdown(v: VariantResult, max_rows: int = MAX_OP_ROWS) -> OpBreakdown:
    """The op table of ``v``: share = self device time / sum of self device times in the variant."""
    timed = [(row, *_device_times(row, v.time_basis)) for row in v.ops if not is_step_row(row.name)]
    overhead = sum(_device_times(row, v.time_basis)[0] for row in v.ops if is_step_row(row.name))
    timed.sort(key=lambda t: (-t[1], -t[2], t[0].name))
    total = sum(t[1] for t in timed)
    lines = tuple(
        OpLine(
            name=row.name,
            calls=row.calls,
            self_device_us=self_us,
            total_device_us=total_us,
            share=self_us / total if total > 0 else 0.0,
            per_call_us=self_us / row.calls if row.calls > 0 else 0.0,
            input_shapes=row.input_shapes,
            is_hotspot=(i == 0 and self_us > 0),
        )
        for i, (row, self_us, total_us) in enumerate(timed[:max_rows])
    )
    hidden = timed[max_rows:]
    return OpBreakdown(
        time_basis=v.time_basis,
        device_label=device_label(v.time_basis),
        lines=lines,
        hidden_count=len(hidden),
        hidden_self_device_us=sum(t[1] for t in hidden),
        total_self_device_us=total,
        profiled_steps=v.profiled_steps,
        step_overhead_us=overhead,
    )


# ---------------------------------------------------------------------------------------------
# Timing, roofline, fusion evidence


@dataclass(frozen=True)
class Roofline:
    """Achieved bandwidth of a memory-bound op against the device's peak."""

    bytes_per_call: int
    achieved_bytes_per_s: float | None
    peak_bytes_per_s: float | None
    fraction_of_peak: float | None
    floor_us: float | None
    """The fastest a call could be at peak bandwidth: bytes moved / peak."""
    level: str | None = None
    """The memory level the call's working set fits in (``L2``, ``DRAM`` ...); None when unknown."""

    @property
    def over_ceiling(self) -> bool:
        """True when the fraction exceeds 100 %: the ceiling is wrong for this call, never a fast kernel."""
        return is_over_ceiling(self.fraction_of_peak)


def roofline(bytes_per_call: int, median_us: float | None, peak_bytes_per_s: float | None,
             level: str | None = None) -> Roofline:
    """Bandwidth achieved = bytes per call / median per-call time; fraction = achieved / peak."""
    seconds = median_us * 1e-6 if median_us else 0.0
    # seconds == 0 also for a subnormal median, whose product underflows: no meaningful bandwidth then.
    achieved = bytes_per_call / seconds if bytes_per_call > 0 and seconds > 0 else None
    if achieved is not None and not math.isfinite(achieved):
        achieved = None
    usable_peak = peak_bytes_per_s if peak_bytes_per_s and peak_bytes_per_s > 0 else None
    fraction = achieved / usable_peak if achieved is not None and usable_peak else None
    floor = bytes_per_call / usable_peak * 1e6 if usable_peak and bytes_per_call > 0 else None
    return Roofline(bytes_per_call, achieved, usable_peak, fraction, floor, level)


@dataclass(frozen=True)
class VariantView:
    """Everything the page says about one variant."""

    name: str
    description: str
    status: VariantStatus
    error: str | None
    timing: stats.SampleSummary | None
    calls_per_sample: int
    ops: OpBreakdown
    roofline: Roofline
    op_dispatch_count: int | None
    aten_op_count: int | None
    device_event_count: int | None
    compile_time_us: float | None
    first_call_us: float | None
    correctness_passed: bool | None
    max_abs_error: float | None
    max_rel_error: float | None
    atol: float | None
    rtol: float | None
    trace_path: str | None
    breakdown: BreakdownView | None = None
    memory: VariantMemory | None = None
    """One call's memory (peak, bytes, allocations, allocating ops, timeline); None: not measured."""

    @property
    def ran(self) -> bool:
        """True unless the variant failed outright."""
        return self.status is not VariantStatus.FAILED


def variant_view(v: VariantResult, peak_bytes_per_s: float | None, level: str | None = None) -> VariantView:
    """The analysed view of one variant; ``peak_bytes_per_s`` is the ceiling for its working set."""
    timing = stats.summarize(v.samples_us) if v.status is not VariantStatus.FAILED else None
    c = v.correctness
    return VariantView(
        name=v.name,
        description=v.description,
        status=v.status,
        error=v.error,
        timing=timing,
        calls_per_sample=v.calls_per_sample,
        ops=op_breakdown(v),
        roofline=roofline(v.bytes_per_call, timing.median_us if timing else None, peak_bytes_per_s, level),
        op_dispatch_count=v.op_dispatch_count,
        aten_op_count=v.aten_op_count,
        device_event_count=v.device_event_count,
        compile_time_us=v.compile_time_us,
        first_call_us=v.first_call_us,
        correctness_passed=c.passed if c else None,
        max_abs_error=c.max_abs_error if c else None,
        max_rel_error=c.max_rel_error if c else None,
        atol=c.atol if c else None,
        rtol=c.rtol if c else None,
        trace_path=v.trace_path,
        breakdown=breakdown_view(v.breakdown) if v.breakdown is not None else None,
        memory=v.memory,
    )

