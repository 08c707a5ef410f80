"""Timing a variant with torch: its inputs per call, warm-up, calibration, samples and interleaved rounds."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reportgen.devices.backend import Backend
from reportgen.errors import DeviceUnavailable

WARMUP_BLOCK = 5
WARMUP_BUDGET_S = 10.0
INPLACE_MAX_CALLS_PER_SAMPLE = 100
"""An in-place variant's sample holds this many fresh input copies at most (each call needs its own)."""
MAX_ROUNDS = 10
"""Timing samples are taken in at most this many interleaved rounds (each a block of samples per variant)."""


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
                    out[name] += time_samples(backend, t.fn, t.args, block, t.calls)
                except DeviceUnavailable:
                    raise
                except (Exception, SystemExit) as exc:  # a variant's failure (OOM in a later round) ends only it
                    del live[name], out[name]
                    failed(name, exc)
    return out


def timed_call(backend: Backend, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[float, Any]:
    import torch

    backend.synchronize()
    t0 = time.perf_counter_ns()
    with torch.no_grad():
        out = fn(*args)
    backend.synchronize()
    return ((time.perf_counter_ns() - t0) / 1000.0, out)


def warm_up(backend: Backend, fn: Callable[..., Any], args: CallArgs, minimum: int,
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
        block = sorted(timed_call(backend, fn, a)[0] for a in args.batch(WARMUP_BLOCK))[WARMUP_BLOCK // 2]
        done += WARMUP_BLOCK
        if previous is not None and abs(block - previous) <= 0.25 * min(block, previous):
            break
        previous = block
    return done


def calibrate(backend: Backend, fn: Callable[..., Any], args: CallArgs, min_sample_us: float) -> int:
    one = min(timed_call(backend, fn, a)[0] for a in args.batch(3))
    return max(1, min(1000, math.ceil(min_sample_us / max(one, 1e-3))))


def time_samples(backend: Backend, fn: Callable[..., Any], args: CallArgs, n: int, calls: int,
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
    calls = requested or calibrate(backend, fn, args, min_sample_us)
    return min(calls, INPLACE_MAX_CALLS_PER_SAMPLE) if inplace else calls
