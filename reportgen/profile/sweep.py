"""Measuring a shape sweep with torch: every variant at every shape, interleaved so drift favours none.

For each shape: make the inputs and the reference, then per variant a first call (correctness),
warm-up and calibration of calls per sample; then ``rounds`` rounds, each a block of samples of
every variant, the order rotating and reversing from round to round (ABBA-like), so a slow minute
of the machine lands on every variant alike. No profiler runs here: the profiled shape's page has
the op tables and timelines; a sweep point has timing and correctness.

A point that fails (out of memory, ``make_inputs`` raising) is recorded with its error and the
others go on; a variant that fails at one shape is FAILED there only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reportgen.devices.backend import Backend
from reportgen.errors import DeviceUnavailable
from reportgen.model.memory import VariantMemory
from reportgen.model.run import SweepPoint, SweepSample, VariantStatus
from reportgen.profile.correctness import check_correctness
from reportgen.profile.measure import Progress, VariantInputs, one_line
from reportgen.profile.memory import measure_memory
from reportgen.profile.timing import CallArgs, Timed, calls_per_sample, clone_args, interleaved_samples, timed_call, warm_up
from reportgen.scenario.loader import Scenario, Variant, call_scenario

SWEEP_ROUNDS = 4
SAMPLES_PER_ROUND = 3
SWEEP_MIN_SAMPLE_US = 1000.0
"""A sweep sample lasts at least this long (calls per sample calibrated per variant and shape)."""
SWEEP_WARMUP_BUDGET_S = 3.0


@dataclass(frozen=True)
class SweepPlan:
    """What to run at every shape: the scenario, its chosen variants (compiled ones already wrapped), settings."""

    scenario: Scenario
    variants: tuple[tuple[Variant, Callable[..., Any]], ...]
    dtype: str
    seed: int
    params: dict[str, Any]
    warmup: int = 3
    rounds: int = SWEEP_ROUNDS
    samples_per_round: int = SAMPLES_PER_ROUND


def compiled_variants(backend: Backend, scenario: Scenario, chosen: Sequence[str]
                      ) -> tuple[tuple[Variant, Callable[..., Any]], ...]:
    """(variant, callable) of each chosen variant; a compiled variant is wrapped once for every shape."""
    out = []
    for v in scenario.variants:
        if v.name in chosen:
            out.append((v, backend.compile(v.fn) if v.compile else v.fn))
    return tuple(out)


def measure_point(backend: Backend, plan: SweepPlan, shape: tuple[int, ...], progress: Progress) -> SweepPoint:
    """Every variant of ``plan`` at ``shape``; any failure is recorded in the point, never raised."""
    import torch

    sc = plan.scenario
    src = sc.source_file
    dtype = getattr(torch, plan.dtype)
    try:
        itemsize = torch.empty((), dtype=dtype).element_size()
        bytes_per_call = int(call_scenario(sc.bytes_per_call, "bytes_per_call", shape, itemsize, source_file=src))
        flops_per_call = int(call_scenario(sc.flops_per_call, "flops_per_call", shape, source_file=src))
    except DeviceUnavailable:
        raise
    except (Exception, SystemExit) as exc:
        return SweepPoint(shape, 0, 0, error=one_line(exc, src))
    point = SweepPoint(shape, bytes_per_call, flops_per_call)
    try:
        args = sc.make(shape, dtype, plan.seed, backend.torch_device(), plan.params)
        reference = call_scenario(sc.reference, "reference", *clone_args(args), source_file=src)
    except DeviceUnavailable:
        raise
    except (Exception, SystemExit) as exc:  # out of memory, a bug at this shape: the other points go on
        error = one_line(exc, src)
        progress(f"shape {_shape_text(shape)}: FAILED: {error}")
        return dataclasses.replace(point, error=error)
    inputs = VariantInputs(args, reference, sc.tolerances[plan.dtype], bytes_per_call, flops_per_call, src)
    ready: dict[str, _Ready] = {}
    results: dict[str, SweepSample] = {}
    for variant, fn in plan.variants:
        outcome = _prepare(backend, variant, fn, inputs, plan.warmup)
        if isinstance(outcome, SweepSample):
            results[variant.name] = outcome
        else:
            ready[variant.name] = outcome

    def failed(name: str, exc: BaseException) -> None:
        error = one_line(exc, src)
        progress(f"shape {_shape_text(shape)}: {name}: FAILED: {error}")
        results[name] = SweepSample(name, VariantStatus.FAILED, error=error)

    timed = {name: r.timed for name, r in ready.items()}
    times = interleaved_samples(backend, timed, [plan.samples_per_round] * plan.rounds, failed)
    for name, samples in times.items():
        calls, passed = ready[name].timed.calls, ready[name].passed
        results[name] = SweepSample(name, VariantStatus.OK if passed else VariantStatus.INCORRECT,
                                    tuple(samples), calls, passed, None if passed else "wrong result at this shape",
                                    _memory_at_shape(backend, ready[name].timed))
    del args, reference, inputs
    ordered = tuple(results[v.name] for v, _ in plan.variants)
    return dataclasses.replace(point, samples=ordered, rounds=plan.rounds if ready else 0,
                               cache_flush_bytes=backend.cache_flush_bytes())


@dataclass(frozen=True)
class _Ready:
    """A variant at one shape after its first call, warm-up and calibration: what to time, and its verdict."""

    timed: Timed
    passed: bool


def _prepare(backend: Backend, variant: Variant, fn: Callable[..., Any], inputs: VariantInputs,
             warmup: int) -> _Ready | SweepSample:
    """First call and correctness, warm-up, calls per sample; a SweepSample (FAILED) when the variant raises."""
    import torch

    call_args = CallArgs(inputs.args, fresh=variant.inplace)
    try:
        _, out = timed_call(backend, fn, call_args.one())
        passed = check_correctness(out, inputs.reference, inputs.tolerance).passed
        del out
        with torch.no_grad():
            warm_up(backend, fn, call_args, warmup, budget_s=SWEEP_WARMUP_BUDGET_S)
            calls = calls_per_sample(backend, fn, call_args, None, SWEEP_MIN_SAMPLE_US, variant.inplace)
    except DeviceUnavailable:
        raise
    except (Exception, SystemExit) as exc:
        return SweepSample(variant.name, VariantStatus.FAILED, error=one_line(exc, inputs.source_file))
    return _Ready(Timed(fn, call_args, calls), passed)


def _shape_text(shape: tuple[int, ...]) -> str:
    return ",".join(str(d) for d in shape)


def _memory_at_shape(backend: Backend, timed: Timed) -> VariantMemory | None:
    """One call's memory after the timing at this shape (figures only); None when measuring it failed."""
    try:
        memory = measure_memory(backend, timed.fn, timed.args)
    except DeviceUnavailable:
        raise
    except Exception:  # out of memory under the profiler at a large shape: the timing stands without it
        return None
    return dataclasses.replace(memory, ops=(), timeline=())
