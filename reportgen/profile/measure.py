"""Measuring one variant with torch: cold first call, correctness, timing samples, profiler capture.

Imported only by ``reportgen profile``; it is the one place besides the device backends and
scenarios that touches torch. The timing itself is in ``reportgen.profile.timing``, the output check
in ``reportgen.profile.correctness`` and the profiled steps in ``reportgen.profile.capture``.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from reportgen.devices.backend import Backend
from reportgen.errors import DeviceUnavailable
from reportgen.model.evidence import compile_info_since, dynamo_snapshot, eager_compile_info
from reportgen.model.run import Correctness, VariantResult, VariantStatus
from reportgen.profile.capture import ProfileSchedule, capture_profile
from reportgen.profile.correctness import check_correctness, describe_correctness, first_bad_leaf
from reportgen.profile.memory import measure_memory_or_reason
from reportgen.profile.timing import (
    CallArgs,
    Timed,
    calls_per_sample,
    interleaved_samples,
    round_blocks,
    timed_call,
    warm_up,
)
from reportgen.scenario.loader import Tolerance, Variant, where_in_scenario

Progress = Callable[[str], None]
MAX_ERROR_CHARS = 600
MAX_SAMPLES = 100_000
"""Most timing samples per variant ``profile`` takes: a sample lasts about ``min_sample_us`` (2 ms), so this is minutes
per variant and shape already, and the interval of the median is far narrower than the drift between runs."""
MAX_WARMUP = 10_000
"""Most warm-up calls per variant: one call of a large shape can take a second."""


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

    @property
    def schedule(self) -> ProfileSchedule:
        """The profiler's schedule of steps."""
        return ProfileSchedule(self.profile_wait, self.profile_warmup, self.profile_active)


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
    source_file: str = ""
    """The scenario's file: a variant's error names the line in it where it was raised."""


@dataclass(frozen=True)
class MeasureContext:
    """What every phase of measuring a scenario's variants shares: the device, the inputs and reference,
    the requested repetitions and the progress line."""

    backend: Backend
    inputs: VariantInputs
    settings: MeasureSettingsIn
    progress: Progress


Outcomes = dict[str, VariantOutcome]
"""The outcome of each variant by name, recorded as it fails or finishes."""


def measure_variant(ctx: MeasureContext, variant: Variant, work_dir: Path) -> VariantOutcome:
    """All measurements of one variant; any exception marks it FAILED with its error, never drops it."""
    return measure_variants(ctx, [(variant, work_dir)])[0]


@dataclass
class _Prepared:
    """A variant after its first call, warm-up and calibration, ready for timing rounds and the profiler."""

    variant: Variant
    work_dir: Path
    base: VariantResult
    fn: Callable[..., Any]
    args: CallArgs
    first_us: float
    correctness: Correctness
    bad_leaf: str | None
    calls: int
    dynamo_before: Any
    dynamo_after: Any
    """dynamo's counters before and after this variant's compile and warm-up (None for an eager variant): taken
    here, not after the rounds, so another compiled variant's graphs are never counted as this one's."""
    samples: list[float] = field(default_factory=list)


def measure_variants(ctx: MeasureContext, variants: Sequence[tuple[Variant, Path]],
                     step: Callable[[], None] = lambda: None) -> list[VariantOutcome]:
    """Every variant: first call, warm-up and calibration each; then the timing samples in interleaved rounds
    (a block of samples of every variant per round, the order rotating and reversing from round to round, so
    a slow moment of the machine falls on all alike and speedups resist drift); then each one's profile.

    A variant that raises in any phase is FAILED with its error and leaves the later rounds; the others go on.
    ``step`` is called as each unit of work starts (a variant's preparation, the rounds, a profile): 2N + 1 calls.
    """
    backend, inputs = ctx.backend, ctx.inputs
    outcomes: Outcomes = {}
    ready: dict[str, _Prepared] = {}
    for variant, work_dir in variants:
        step()
        base = VariantResult(name=variant.name, status=VariantStatus.FAILED, description=variant.description,
                             time_basis=backend.time_basis, bytes_per_call=inputs.bytes_per_call,
                             flops_per_call=inputs.flops_per_call)
        prepared = _guarded(ctx, base, outcomes, partial(_prepare, ctx, variant, work_dir, base))
        if prepared is not None:
            ready[variant.name] = prepared
    step()
    _timing_rounds(ctx, ready, outcomes)
    for name, p in list(ready.items()):
        step()
        done = _guarded(ctx, p.base, outcomes, partial(_finish, ctx, p))
        if done is not None:
            outcomes[name] = done
    return [outcomes[v.name] for v, _ in variants]


def _guarded(ctx: MeasureContext, base: VariantResult, outcomes: Outcomes, step: Callable[[], Any]) -> Any:
    """``step()``; on a variant's failure (compile error, OOM, sys.exit) record it FAILED and return None."""
    try:
        return step()
    except DeviceUnavailable:
        raise
    except (Exception, SystemExit) as exc:  # a variant's failure must not stop the others
        _record_failure(ctx, base, exc, outcomes)
        return None


def _record_failure(ctx: MeasureContext, base: VariantResult, exc: BaseException, outcomes: Outcomes) -> None:
    """The variant FAILED with ``exc`` as its one-line error (naming the scenario's line where it was raised)."""
    error = one_line(exc, ctx.inputs.source_file)
    ctx.progress(f"{base.name}: FAILED: {error}")
    outcomes[base.name] = VariantOutcome(dataclasses.replace(base, error=error))


def _prepare(ctx: MeasureContext, variant: Variant, work_dir: Path, base: VariantResult) -> _Prepared:
    import torch

    backend, inputs, settings, progress = ctx.backend, ctx.inputs, ctx.settings, ctx.progress
    dynamo_before = dynamo_snapshot(torch) if variant.compile else None
    fn = backend.compile(variant.fn) if variant.compile else variant.fn
    args = CallArgs(inputs.args, fresh=variant.inplace)
    progress(f"{variant.name}: first call" + (" (compiling)" if variant.compile else ""))
    first_us, out = timed_call(backend, fn, args.one())
    correctness = check_correctness(out, inputs.reference, inputs.tolerance)
    bad_leaf = first_bad_leaf(out, inputs.reference, inputs.tolerance)
    del out
    progress(f"{variant.name}: warm-up x{settings.warmup}; correctness {describe_correctness(correctness, bad_leaf)}")
    if variant.compile:
        release_compile_workers()
    with torch.no_grad():
        warmed = warm_up(backend, fn, args, settings.warmup)
        if warmed > settings.warmup:
            progress(f"{variant.name}: timings settled after {warmed} warm-up calls")
        calls = calls_per_sample(backend, fn, args, settings.calls_per_sample, settings.min_sample_us, variant.inplace)
    dynamo_after = dynamo_snapshot(torch) if variant.compile else None
    return _Prepared(variant, work_dir, base, fn, args, first_us, correctness, bad_leaf, calls, dynamo_before,
                     dynamo_after)


def _timing_rounds(ctx: MeasureContext, ready: dict[str, _Prepared], outcomes: Outcomes) -> None:
    """``settings.samples`` samples per variant, taken in interleaved rounds (see ``measure_variants``)."""
    if not ready:
        return
    samples = ctx.settings.samples
    blocks = round_blocks(samples)
    flush = ctx.backend.cache_flush_bytes()
    calls = ", ".join(f"{n} x {p.calls}" for n, p in ready.items())
    flushed = f"; cache flushed before each call: {flush // 2**20} MiB written" if flush else ""
    ctx.progress(f"timing {samples} samples per variant in {len(blocks)} interleaved round(s) (calls per "
                 f"sample: {calls}){flushed}")

    def failed(name: str, exc: BaseException) -> None:
        _record_failure(ctx, ready.pop(name).base, exc, outcomes)

    timed = {n: Timed(p.fn, p.args, p.calls) for n, p in ready.items()}
    for name, taken in interleaved_samples(ctx.backend, timed, blocks, failed).items():
        ready[name].samples = taken


def _finish(ctx: MeasureContext, p: _Prepared) -> VariantOutcome:
    """The variant's profile, compile evidence and result."""
    import torch

    backend, settings = ctx.backend, ctx.settings
    ctx.progress(f"{p.variant.name}: profiling ({settings.profile_active} active steps)")
    with torch.no_grad():
        capture = capture_profile(backend, p.fn, p.args, settings.schedule, p.work_dir)
    ctx.progress(f"{p.variant.name}: memory of one call")
    memory = measure_memory_or_reason(backend, p.fn, p.args)
    evidence = backend.variant_evidence(p.work_dir, settings.profile_active, capture.device_events_per_step)
    compile_info = (compile_info_since(p.dynamo_before, p.dynamo_after, evidence)
                    if p.dynamo_before is not None else eager_compile_info(evidence))
    samples = p.samples
    median = sorted(samples)[len(samples) // 2]
    c = p.correctness
    result = dataclasses.replace(
        p.base,
        status=VariantStatus.OK if c.passed else VariantStatus.INCORRECT,
        error=None if c.passed else f"wrong result: {describe_correctness(c, p.bad_leaf)}",
        first_call_us=p.first_us,
        compile_time_us=max(0.0, p.first_us - median),
        samples_us=tuple(samples),
        calls_per_sample=p.calls,
        correctness=c,
        ops=capture.ops,
        profiled_steps=settings.profile_active,
        op_dispatch_count=capture.dispatches_per_step,
        aten_op_count=capture.aten_ops_per_step,
        device_event_count=capture.device_events_per_step,
        time_basis=evidence.time_basis or p.base.time_basis,
        compile_info=compile_info,
        device_evidence=evidence.device,
        breakdown=capture.breakdown,
        memory=memory,
    )
    return VariantOutcome(result, capture.trace, [*capture.artifacts, *evidence.files])


def release_compile_workers() -> None:
    """Stop inductor's compile-worker pool: right after a cold compile it keeps the CPU busy for seconds."""
    try:
        from torch._inductor.async_compile import shutdown_compile_workers
    except ImportError:
        return
    shutdown_compile_workers()


def one_line(exc: BaseException, source_file: str = "") -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    frames = traceback.extract_tb(exc.__traceback__)
    inside = where_in_scenario(exc, source_file) if source_file else None
    if inside is not None:
        return f"{text} (at {inside})"
    return text + (f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else "")
