"""Measuring one variant with torch: cold first call, correctness, timing samples, profiler capture.

Imported only by ``reportgen profile``; it is the one place besides the device backends and
scenarios that touches torch.
"""

from __future__ import annotations

import dataclasses
import math
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from reportgen.devices.backend import Backend
from reportgen.errors import DeviceUnavailable
from reportgen.model.breakdown import TraceBreakdown
from reportgen.model.evidence import compile_info_since, dynamo_snapshot, eager_compile_info
from reportgen.model.run import Correctness, OpRow, VariantResult, VariantStatus
from reportgen.scenario.loader import Tolerance, Variant, where_in_scenario

Progress = Callable[[str], None]
_STEP_PREFIX = "ProfilerStep"  # "ProfilerStep#N" events; key_averages names them "ProfilerStep*"
MAX_ERROR_CHARS = 600
WARMUP_BLOCK = 5
WARMUP_BUDGET_S = 10.0
INPLACE_MAX_CALLS_PER_SAMPLE = 100
"""An in-place variant's sample holds this many fresh input copies at most (each call needs its own)."""


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
    source_file: str = ""
    """The scenario's file: a variant's error names the line in it where it was raised."""


@dataclass(frozen=True)
class CallArgs:
    """A variant's inputs: the same tuple for every call, or (``fresh``) a new clone per call.

    Clones are made by ``batch`` before the calls that use them, so the cloning stays outside every
    timed region and profiled step.
    """

    args: tuple[Any, ...]
    fresh: bool = False

    def batch(self, n: int) -> list[tuple[Any, ...]]:
        """Argument tuples for ``n`` calls."""
        if not self.fresh:
            return [self.args] * n
        return [clone_args(self.args) for _ in range(n)]

    def one(self) -> tuple[Any, ...]:
        """Arguments for one call."""
        return self.batch(1)[0]


def clone_args(value: Any) -> Any:
    """A copy of ``value`` in which every tensor (inside tuples, lists and dicts too) is cloned."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(clone_args(v) for v in value)
    if isinstance(value, list):
        return [clone_args(v) for v in value]
    if isinstance(value, dict):
        return {k: clone_args(v) for k, v in value.items()}
    return value


def measure_variant(backend: Backend, variant: Variant, inputs: VariantInputs, settings: MeasureSettingsIn,
                    work_dir: Path, progress: Progress) -> VariantOutcome:
    """All measurements of one variant; any exception marks it FAILED with its error, never drops it."""
    return measure_variants(backend, [(variant, work_dir)], inputs, settings, progress)[0]


MAX_ROUNDS = 10
"""Timing samples are taken in at most this many interleaved rounds (each a block of samples per variant)."""


def round_order(names: Sequence[str], index: int) -> list[str]:
    """The variants' order in round ``index``: rotated by the round, reversed on odd rounds (ABBA for two)."""
    n = len(names)
    if n == 0:
        return []
    rotated = [names[(i + index // 2) % n] for i in range(n)]
    return rotated[::-1] if index % 2 else rotated


def round_blocks(samples: int, rounds: int = MAX_ROUNDS) -> list[int]:
    """``samples`` split into at most ``rounds`` blocks as equal as possible: 50 -> ten blocks of 5."""
    k = max(1, min(rounds, samples))
    return [samples // k + (1 if i < samples % k else 0) for i in range(k)]


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


def measure_variants(backend: Backend, variants: Sequence[tuple[Variant, Path]], inputs: VariantInputs,
                     settings: MeasureSettingsIn, progress: Progress,
                     step: Callable[[], None] = lambda: None) -> list[VariantOutcome]:
    """Every variant: first call, warm-up and calibration each; then the timing samples in interleaved rounds
    (a block of samples of every variant per round, the order rotating and reversing from round to round, so
    a slow moment of the machine falls on all alike and speedups resist drift); then each one's profile.

    A variant that raises in any phase is FAILED with its error and leaves the later rounds; the others go on.
    ``step`` is called as each unit of work starts (a variant's preparation, the rounds, a profile): 2N + 1 calls.
    """
    outcomes: dict[str, VariantOutcome] = {}
    ready: dict[str, _Prepared] = {}
    for variant, work_dir in variants:
        step()
        base = VariantResult(name=variant.name, status=VariantStatus.FAILED, description=variant.description,
                             time_basis=backend.time_basis, bytes_per_call=inputs.bytes_per_call,
                             flops_per_call=inputs.flops_per_call)
        prepared = _guarded(partial(_prepare, backend, variant, inputs, settings, work_dir, progress, base),
                            variant.name, base, inputs, progress, outcomes)
        if prepared is not None:
            ready[variant.name] = prepared
    step()
    _timing_rounds(backend, ready, inputs, settings, progress, outcomes)
    for name, p in list(ready.items()):
        step()
        done = _guarded(partial(_finish, backend, p, settings, progress), name, p.base, inputs, progress, outcomes)
        if done is not None:
            outcomes[name] = done
    return [outcomes[v.name] for v, _ in variants]


def _guarded(step: Callable[[], Any], name: str, base: VariantResult, inputs: VariantInputs, progress: Progress,
             outcomes: dict[str, VariantOutcome]) -> Any:
    """``step()``; on a variant's failure (compile error, OOM, sys.exit) record it FAILED and return None."""
    try:
        return step()
    except DeviceUnavailable:
        raise
    except (Exception, SystemExit) as exc:  # a variant's failure must not stop the others
        _record_failure(name, base, exc, inputs, progress, outcomes)
        return None


def _record_failure(name: str, base: VariantResult, exc: BaseException, inputs: VariantInputs, progress: Progress,
                    outcomes: dict[str, VariantOutcome]) -> None:
    """The variant FAILED with ``exc`` as its one-line error (naming the scenario's line where it was raised)."""
    error = _one_line(exc, inputs.source_file)
    progress(f"{name}: FAILED: {error}")
    outcomes[name] = VariantOutcome(dataclasses.replace(base, error=error))


def _prepare(backend: Backend, variant: Variant, inputs: VariantInputs, settings: MeasureSettingsIn, work_dir: Path,
             progress: Progress, base: VariantResult) -> _Prepared:
    import torch

    dynamo_before = dynamo_snapshot(torch) if variant.compile else None
    fn = backend.compile(variant.fn) if variant.compile else variant.fn
    args = CallArgs(inputs.args, fresh=variant.inplace)
    progress(f"{variant.name}: first call" + (" (compiling)" if variant.compile else ""))
    first_us, out = _timed_call(backend, fn, args.one())
    correctness = check_correctness(out, inputs.reference, inputs.tolerance)
    bad_leaf = first_bad_leaf(out, inputs.reference, inputs.tolerance)
    del out
    progress(f"{variant.name}: warm-up x{settings.warmup}; correctness {_describe(correctness, bad_leaf)}")
    if variant.compile:
        _release_compile_workers()
    with torch.no_grad():
        warmed = _warm_up(backend, fn, args, settings.warmup)
        if warmed > settings.warmup:
            progress(f"{variant.name}: timings settled after {warmed} warm-up calls")
        calls = calls_per_sample(backend, fn, args, settings.calls_per_sample, settings.min_sample_us, variant.inplace)
    dynamo_after = dynamo_snapshot(torch) if variant.compile else None
    return _Prepared(variant, work_dir, base, fn, args, first_us, correctness, bad_leaf, calls, dynamo_before,
                     dynamo_after)


def _timing_rounds(backend: Backend, ready: dict[str, _Prepared], inputs: VariantInputs, settings: MeasureSettingsIn,
                   progress: Progress, outcomes: dict[str, VariantOutcome]) -> None:
    """``settings.samples`` samples per variant, taken in interleaved rounds (see ``measure_variants``)."""
    if not ready:
        return
    blocks = round_blocks(settings.samples)
    flush = backend.cache_flush_bytes()
    calls = ", ".join(f"{n} x {p.calls}" for n, p in ready.items())
    progress(f"timing {settings.samples} samples per variant in {len(blocks)} interleaved round(s) (calls per "
             f"sample: {calls})" + (f"; cache flushed before each call: {flush // 2**20} MiB written" if flush else ""))

    def failed(name: str, exc: BaseException) -> None:
        _record_failure(name, ready.pop(name).base, exc, inputs, progress, outcomes)

    timed = {n: Timed(p.fn, p.args, p.calls) for n, p in ready.items()}
    for name, samples in interleaved_samples(backend, timed, blocks, failed).items():
        ready[name].samples = samples


@dataclass(frozen=True)
class Timed:
    """What a timing round calls: a variant's callable, its arguments and its calls per sample."""

    fn: Callable[..., Any]
    args: CallArgs
    calls: int


def interleaved_samples(backend: Backend, timed: dict[str, Timed], blocks: Sequence[int],
                        failed: Callable[[str, BaseException], None]) -> dict[str, list[float]]:
    """Samples of every variant in ``timed``, round ``r`` a block of ``blocks[r]`` samples of each, in
    ``round_order``. A variant that raises is reported to ``failed`` and left out of the later rounds and
    of the result; the others go on. The one home of the rounds for ``profile`` and for sweeps."""
    import torch

    live = dict(timed)
    out: dict[str, list[float]] = {name: [] for name in timed}
    with torch.no_grad():
        for r, block in enumerate(blocks):
            for name in round_order(list(live), r):
                t = live[name]
                try:
                    out[name] += _samples(backend, t.fn, t.args, block, t.calls)
                except DeviceUnavailable:
                    raise
                except (Exception, SystemExit) as exc:  # a variant's failure (OOM in a later round) ends only it
                    del live[name], out[name]
                    failed(name, exc)
    return out


def _finish(backend: Backend, p: _Prepared, settings: MeasureSettingsIn, progress: Progress) -> VariantOutcome:
    """The variant's profile, compile evidence and result."""
    import torch

    progress(f"{p.variant.name}: profiling ({settings.profile_active} active steps)")
    with torch.no_grad():
        capture = _profile(backend, p.fn, p.args, settings, p.work_dir)
    evidence = backend.variant_evidence(p.work_dir, settings.profile_active, capture.device_events_per_step)
    compile_info = (compile_info_since(p.dynamo_before, p.dynamo_after, evidence)
                    if p.dynamo_before is not None else eager_compile_info(evidence))
    samples = p.samples
    median = sorted(samples)[len(samples) // 2]
    c = p.correctness
    result = dataclasses.replace(
        p.base,
        status=VariantStatus.OK if c.passed else VariantStatus.INCORRECT,
        error=None if c.passed else f"wrong result: {_describe(c, p.bad_leaf)}",
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


def _warm_up(backend: Backend, fn: Callable[..., Any], args: CallArgs, minimum: int,
             budget_s: float = WARMUP_BUDGET_S) -> int:
    """At least ``minimum`` calls, then blocks of calls until two consecutive blocks agree within 25 %.

    Returns the number of warm-up calls made. Bounded by ``budget_s`` of wall time.
    """
    for call_args in args.batch(minimum):
        fn(*call_args)
    backend.synchronize()
    done, previous = minimum, None
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        block = sorted(_timed_call(backend, fn, a)[0] for a in args.batch(WARMUP_BLOCK))[WARMUP_BLOCK // 2]
        done += WARMUP_BLOCK
        if previous is not None and abs(block - previous) <= 0.25 * min(block, previous):
            break
        previous = block
    return done


def _calibrate(backend: Backend, fn: Callable[..., Any], args: CallArgs, min_sample_us: float) -> int:
    one = min(_timed_call(backend, fn, a)[0] for a in args.batch(3))
    return max(1, min(1000, math.ceil(min_sample_us / max(one, 1e-3))))


def _samples(backend: Backend, fn: Callable[..., Any], args: CallArgs, n: int, calls: int,
             clock: Callable[[], int] = time.perf_counter_ns) -> list[float]:
    """``n`` per-call times in µs, each the mean over ``calls`` back-to-back calls between syncs, by ``clock``
    (nanoseconds: the wall clock, or ``time.process_time_ns`` for the CPU time of the whole process).

    An in-place variant's fresh inputs for a sample are cloned before its clock starts. On a device
    that flushes its cache (``Backend.cache_flush_bytes``) every sample is one call after a flush,
    the flush outside the clock, timed by the device's own clock (never the CPU's: ``ab --clock cpu`` is refused
    off the CPU).
    """
    if backend.cache_flush_bytes():
        return _flushed_samples(backend, fn, args, n)
    out: list[float] = []
    for _ in range(n):
        batch = args.batch(calls)
        backend.synchronize()
        t0 = clock()
        for call_args in batch:
            fn(*call_args)
        backend.synchronize()
        out.append((clock() - t0) / 1000.0 / calls)
    return out


def _flushed_samples(backend: Backend, fn: Callable[..., Any], args: CallArgs, n: int) -> list[float]:
    """``n`` single-call times in µs, the cache flushed before each (outside the timing)."""
    out: list[float] = []
    for call_args in args.batch(n):
        backend.flush_cache()
        out.append(backend.time_one_call(fn, call_args))
    return out


def calls_per_sample(backend: Backend, fn: Callable[..., Any], args: CallArgs, requested: int | None,
                     min_sample_us: float, inplace: bool) -> int:
    """Calls per timing sample: 1 where the cache is flushed per call, else as requested or calibrated."""
    if backend.cache_flush_bytes():
        return 1
    calls = requested or _calibrate(backend, fn, args, min_sample_us)
    return min(calls, INPLACE_MAX_CALLS_PER_SAMPLE) if inplace else calls


def check_correctness(out: Any, reference: Any, tol: Tolerance) -> Correctness:
    """allclose against the float64 reference, leaf by leaf when the output is a tuple, list or dict of tensors.

    The structures must match (same container kinds, lengths and keys). Errors are the largest over the
    leaves; relative error is max|diff| / max|ref| of that leaf. Not comparable (None errors) when a
    structure, a shape or a value's finiteness differs in any leaf.
    """
    results = [_check_leaf(o, r, tol) for _path, o, r in _paired_leaves(out, reference)]
    if not results or any(c is None for c in results):
        return Correctness(False, None, None, tol.atol, tol.rtol)
    leaves = [c for c in results if c is not None]
    return Correctness(all(c.passed for c in leaves), max(c.max_abs_error or 0.0 for c in leaves),
                       max(c.max_rel_error or 0.0 for c in leaves), tol.atol, tol.rtol)


def first_bad_leaf(out: Any, reference: Any, tol: Tolerance) -> str | None:
    """The path (``[1]``, ``['out']``) of the first leaf that fails, for a structured output; None otherwise."""
    pairs = _paired_leaves(out, reference)
    if len(pairs) == 1 and pairs[0][0] == "":
        return None
    for path, o, r in pairs:
        c = _check_leaf(o, r, tol)
        if c is None or not c.passed:
            return path or "output"
    return None


_MISMATCH = object()


def _paired_leaves(out: Any, ref: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``(path, output leaf, reference leaf)``; a structural mismatch pairs the output with ``_MISMATCH``."""
    for kind in (tuple, list):
        if isinstance(ref, kind):
            if not isinstance(out, (tuple, list)) or len(out) != len(ref):
                return [(path or "output", out, _MISMATCH)]
            return [leaf for i, (o, r) in enumerate(zip(out, ref, strict=True))
                    for leaf in _paired_leaves(o, r, f"{path}[{i}]")]
    if isinstance(ref, dict):
        if not isinstance(out, dict) or set(out) != set(ref):
            return [(path or "output", out, _MISMATCH)]
        return [leaf for k in ref for leaf in _paired_leaves(out[k], ref[k], f"{path}[{k!r}]")]
    return [(path, out, ref)]


def _check_leaf(out: Any, reference: Any, tol: Tolerance) -> Correctness | None:
    """One tensor against its reference; None when not comparable (shape, finiteness, type)."""
    import torch

    if reference is _MISMATCH:
        return None
    if not isinstance(reference, torch.Tensor) or not isinstance(out, torch.Tensor):
        same = not isinstance(reference, torch.Tensor) and not isinstance(out, torch.Tensor) and out == reference
        return Correctness(True, 0.0, 0.0, tol.atol, tol.rtol) if same else None
    got = out.detach().to("cpu", torch.float64)
    ref = reference.detach().to("cpu", torch.float64)
    if got.shape != ref.shape or not bool(torch.isfinite(got).all()):
        return None
    diff = (got - ref).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    max_rel = max_abs / scale if scale > 0 else max_abs
    passed = bool((diff <= tol.atol + tol.rtol * ref.abs()).all())
    return Correctness(passed, max_abs, max_rel, tol.atol, tol.rtol)


@dataclass(frozen=True)
class _Capture:
    ops: tuple[OpRow, ...]
    dispatches_per_step: int | None
    aten_ops_per_step: int | None
    device_events_per_step: int | None
    trace: Path | None
    artifacts: list[tuple[Path, str]]
    breakdown: TraceBreakdown | None = None
    """Kernels, steps and idle time of the captured trace, as an import computes them; only with a device lane."""


def _profile(backend: Backend, fn: Callable[..., Any], args: CallArgs, settings: MeasureSettingsIn,
             work_dir: Path) -> _Capture:
    """A scheduled torch.profiler capture: key_averages rows, per-step counts from the trace, artifacts."""
    import torch

    work_dir.mkdir(parents=True, exist_ok=True)
    schedule = torch.profiler.schedule(wait=settings.profile_wait, warmup=settings.profile_warmup,
                                       active=settings.profile_active, repeat=1)
    steps = settings.profile_wait + settings.profile_warmup + settings.profile_active
    batch = args.batch(steps)  # an in-place variant's clones, made before the profiler starts
    with backend.profile_session(work_dir) as extra:
        with torch.profiler.profile(activities=backend.profiler_activities(), schedule=schedule,
                                    record_shapes=True, **extra) as prof:
            for call_args in batch:
                fn(*call_args)
                backend.synchronize()
                prof.step()
    trace, artifacts = backend.collect_artifacts(work_dir)
    counts, breakdown = _trace_counts(trace, settings.profile_active)
    return _Capture(op_rows(prof), *counts, trace, artifacts, breakdown)


def _trace_counts(trace_file: Path | None, active: int
                  ) -> tuple[tuple[int | None, int | None, int | None], TraceBreakdown | None]:
    """(top-level ATen ops, all ATen ops, device events) per step, by the same rules as an import, and the
    trace's kernel and step breakdown where it has a device lane (as ``reportgen import`` makes it)."""
    if trace_file is None:
        return (None, None, None), None
    from reportgen.traces.breakdown import build_breakdown
    from reportgen.traces.optable import build_op_table, per_step
    from reportgen.traces.reader import read_trace

    trace = read_trace(trace_file)
    table = build_op_table(trace)
    device = per_step(table.device_work_count, active) if trace.has_device_lane else None
    breakdown = build_breakdown(trace, table.device_launchers, table.steps) if trace.has_device_lane else None
    return (per_step(table.op_dispatch_count, active), per_step(table.aten_op_count, active), device), breakdown


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


def _describe(c: Correctness, bad_leaf: str | None = None) -> str:
    leaf = f" in output {bad_leaf}" if bad_leaf else ""
    if c.max_abs_error is None:
        return f"FAILED{leaf}: output has the wrong structure, shape or non-finite values"
    verdict = "ok" if c.passed else f"FAILED{leaf} (beyond atol={c.atol:g}, rtol={c.rtol:g})"
    return f"{verdict}, max abs error {c.max_abs_error:.3g}"


def _one_line(exc: BaseException, source_file: str = "") -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    frames = traceback.extract_tb(exc.__traceback__)
    inside = where_in_scenario(exc, source_file) if source_file else None
    if inside is not None:
        return f"{text} (at {inside})"
    return text + (f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else "")
