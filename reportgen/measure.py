"""Measuring one variant with torch: cold first call, correctness, timing samples, profiler capture.

Imported only by ``reportgen profile``; it is the one place besides the device backends and
scenarios that touches torch.
"""

from __future__ import annotations

import dataclasses
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reportgen.devices.backend import Backend
from reportgen.errors import DeviceUnavailable
from reportgen.evidence import compile_info_since, dynamo_snapshot, eager_compile_info
from reportgen.model import Correctness, OpRow, VariantResult, VariantStatus
from reportgen.scenario import Tolerance, Variant

Progress = Callable[[str], None]
_STEP_PREFIX = "ProfilerStep"  # "ProfilerStep#N" events; key_averages names them "ProfilerStep*"
MAX_ERROR_CHARS = 600
WARMUP_BLOCK = 5
WARMUP_BUDGET_S = 10.0


@dataclass(frozen=True)
class MeasureSettingsIn:
    """Requested repetitions; ``calls_per_sample=None`` calibrates so a sample lasts ``min_sample_us``."""

    samples: int = 50
    warmup: int = 3
    calls_per_sample: int | None = None
    min_sample_us: float = 2000.0
    profile_wait: int = 1
    profile_warmup: int = 1
    profile_active: int = 3


@dataclass
class VariantOutcome:
    """A measured variant plus the files (trace, device artifacts) to store with it."""

    result: VariantResult
    trace_file: Path | None = None
    artifacts: list[tuple[Path, str]] = field(default_factory=list)


@dataclass(frozen=True)
class VariantInputs:
    args: tuple[Any, ...]
    reference: Any
    tolerance: Tolerance
    bytes_per_call: int
    flops_per_call: int


def measure_variant(backend: Backend, variant: Variant, inputs: VariantInputs, settings: MeasureSettingsIn,
                    work_dir: Path, progress: Progress) -> VariantOutcome:
    """All measurements of one variant; any exception marks it FAILED with its error, never drops it."""
    base = VariantResult(name=variant.name, status=VariantStatus.FAILED, description=variant.description,
                         time_basis=backend.time_basis, bytes_per_call=inputs.bytes_per_call,
                         flops_per_call=inputs.flops_per_call)
    try:
        return _measure(backend, variant, inputs, settings, work_dir, progress, base)
    except DeviceUnavailable:
        raise
    except (Exception, SystemExit) as exc:  # a variant's failure (compile error, OOM, sys.exit) must not stop the others
        progress(f"{variant.name}: FAILED: {_one_line(exc)}")
        return VariantOutcome(dataclasses.replace(base, error=_one_line(exc)))


def _measure(backend: Backend, variant: Variant, inputs: VariantInputs, settings: MeasureSettingsIn, work_dir: Path,
             progress: Progress, base: VariantResult) -> VariantOutcome:
    import torch

    dynamo_before = dynamo_snapshot(torch) if variant.compile else None
    fn = backend.compile(variant.fn) if variant.compile else variant.fn
    progress(f"{variant.name}: first call" + (" (compiling)" if variant.compile else ""))
    first_us, out = _timed_call(backend, fn, inputs.args)
    correctness = check_correctness(out, inputs.reference, inputs.tolerance)
    progress(f"{variant.name}: warm-up x{settings.warmup}; correctness {_describe(correctness)}")
    if variant.compile:
        _release_compile_workers()
    with torch.no_grad():
        warmed = _warm_up(backend, fn, inputs.args, settings.warmup)
        if warmed > settings.warmup:
            progress(f"{variant.name}: timings settled after {warmed} warm-up calls")
        calls = settings.calls_per_sample or _calibrate(backend, fn, inputs.args, settings.min_sample_us)
        progress(f"{variant.name}: timing {settings.samples} samples x {calls} call(s)")
        samples = _samples(backend, fn, inputs.args, settings.samples, calls)
        progress(f"{variant.name}: profiling ({settings.profile_active} active steps)")
        capture = _profile(backend, fn, inputs.args, settings, work_dir)
    evidence = backend.variant_evidence(work_dir, settings.profile_active, capture.device_events_per_step)
    compile_info = (compile_info_since(dynamo_before, dynamo_snapshot(torch), evidence)
                    if dynamo_before is not None else eager_compile_info(evidence))
    median = sorted(samples)[len(samples) // 2]
    result = dataclasses.replace(
        base,
        status=VariantStatus.OK if correctness.passed else VariantStatus.INCORRECT,
        error=None if correctness.passed else f"wrong result: {_describe(correctness)}",
        first_call_us=first_us,
        compile_time_us=max(0.0, first_us - median),
        samples_us=tuple(samples),
        calls_per_sample=calls,
        correctness=correctness,
        ops=capture.ops,
        profiled_steps=settings.profile_active,
        op_dispatch_count=capture.dispatches_per_step,
        aten_op_count=capture.aten_ops_per_step,
        device_event_count=capture.device_events_per_step,
        time_basis=evidence.time_basis or base.time_basis,
        compile_info=compile_info,
        device_evidence=evidence.device,
    )
    return VariantOutcome(result, capture.trace, [*capture.artifacts, *evidence.files])


def _timed_call(backend: Backend, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[float, Any]:
    import torch

    backend.synchronize()
    t0 = time.perf_counter_ns()
    with torch.no_grad():
        out = fn(*args)
    backend.synchronize()
    return ((time.perf_counter_ns() - t0) / 1000.0, out)


def _release_compile_workers() -> None:
    """Stop inductor's compile-worker pool: right after a cold compile it keeps the CPU busy for seconds."""
    try:
        from torch._inductor.async_compile import shutdown_compile_workers
    except ImportError:
        return
    shutdown_compile_workers()


def _warm_up(backend: Backend, fn: Callable[..., Any], args: tuple[Any, ...], minimum: int,
             budget_s: float = WARMUP_BUDGET_S) -> int:
    """At least ``minimum`` calls, then blocks of calls until two consecutive blocks agree within 25 %.

    Returns the number of warm-up calls made. Bounded by ``budget_s`` of wall time.
    """
    for _ in range(minimum):
        fn(*args)
    backend.synchronize()
    done, previous = minimum, None
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        block = sorted(_timed_call(backend, fn, args)[0] for _ in range(WARMUP_BLOCK))[WARMUP_BLOCK // 2]
        done += WARMUP_BLOCK
        if previous is not None and abs(block - previous) <= 0.25 * min(block, previous):
            break
        previous = block
    return done


def _calibrate(backend: Backend, fn: Callable[..., Any], args: tuple[Any, ...], min_sample_us: float) -> int:
    one = min(_timed_call(backend, fn, args)[0] for _ in range(3))
    return max(1, min(1000, math.ceil(min_sample_us / max(one, 1e-3))))


def _samples(backend: Backend, fn: Callable[..., Any], args: tuple[Any, ...], n: int, calls: int) -> list[float]:
    """``n`` per-call times in µs, each the mean over ``calls`` back-to-back calls between syncs."""
    out: list[float] = []
    for _ in range(n):
        backend.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn(*args)
        backend.synchronize()
        out.append((time.perf_counter_ns() - t0) / 1000.0 / calls)
    return out


def check_correctness(out: Any, reference: Any, tol: Tolerance) -> Correctness:
    """allclose against the float64 reference; relative error is max|diff| / max|ref|."""
    import torch

    got = out.detach().to("cpu", torch.float64)
    if got.shape != reference.shape or not bool(torch.isfinite(got).all()):
        return Correctness(False, None, None, tol.atol, tol.rtol)
    diff = (got - reference).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    scale = float(reference.abs().max()) if reference.numel() else 0.0
    max_rel = max_abs / scale if scale > 0 else max_abs
    passed = bool((diff <= tol.atol + tol.rtol * reference.abs()).all())
    return Correctness(passed, max_abs, max_rel, tol.atol, tol.rtol)


@dataclass(frozen=True)
class _Capture:
    ops: tuple[OpRow, ...]
    dispatches_per_step: int | None
    aten_ops_per_step: int | None
    device_events_per_step: int | None
    trace: Path | None
    artifacts: list[tuple[Path, str]]


def _profile(backend: Backend, fn: Callable[..., Any], args: tuple[Any, ...], settings: MeasureSettingsIn,
             work_dir: Path) -> _Capture:
    """A scheduled torch.profiler capture: key_averages rows, per-step counts from the trace, artifacts."""
    import torch

    work_dir.mkdir(parents=True, exist_ok=True)
    schedule = torch.profiler.schedule(wait=settings.profile_wait, warmup=settings.profile_warmup,
                                       active=settings.profile_active, repeat=1)
    steps = settings.profile_wait + settings.profile_warmup + settings.profile_active
    with backend.profile_session(work_dir) as extra:
        with torch.profiler.profile(activities=backend.profiler_activities(), schedule=schedule,
                                    record_shapes=True, **extra) as prof:
            for _ in range(steps):
                fn(*args)
                backend.synchronize()
                prof.step()
    trace, artifacts = backend.collect_artifacts(work_dir)
    counts = _trace_counts(trace, settings.profile_active)
    return _Capture(op_rows(prof), *counts, trace, artifacts)


def _trace_counts(trace_file: Path | None, active: int) -> tuple[int | None, int | None, int | None]:
    """(top-level ATen ops, all ATen ops, device events) per step, by the same rules as an import."""
    if trace_file is None:
        return (None, None, None)
    from reportgen.optable import build_op_table, per_step
    from reportgen.trace import read_trace

    trace = read_trace(trace_file)
    table = build_op_table(trace)
    device = per_step(table.device_work_count, active) if trace.has_device_lane else None
    return (per_step(table.op_dispatch_count, active), per_step(table.aten_op_count, active), device)


def op_rows(prof: Any) -> tuple[OpRow, ...]:
    """key_averages() rows grouped by op name (ProfilerStep annotations dropped), input shapes joined."""
    shapes: dict[str, list[str]] = {}
    for avg in prof.key_averages(group_by_input_shape=True):
        text = str(avg.input_shapes) if avg.input_shapes else ""
        if text and text not in shapes.setdefault(avg.key, []):
            shapes[avg.key].append(text)
    rows = []
    for avg in prof.key_averages():
        if avg.key.startswith(_STEP_PREFIX):
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


def _describe(c: Correctness) -> str:
    if c.max_abs_error is None:
        return "FAILED: output has the wrong shape or non-finite values"
    verdict = "ok" if c.passed else f"FAILED (beyond atol={c.atol:g}, rtol={c.rtol:g})"
    return f"{verdict}, max abs error {c.max_abs_error:.3g}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return text + where
