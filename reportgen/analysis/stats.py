"""Pure statistics over timing samples: summaries, ratios and their confidence intervals.

Method (stated in every report): per-call time is the median of the samples; a ratio of two
variants' medians gets a 95 % percentile-bootstrap interval (resampling each side's samples
independently, ``BOOTSTRAP_RESAMPLES`` times, fixed seed so builds are reproducible).
Medians resist the heavy right tail that page faults and preemption put on CPU timings.

Bounded work: the resamples are drawn a chunk of ``RESAMPLE_CHUNK_VALUES`` values at a time (the same
draws of the seed as drawing them all at once, so the same intervals), and above ``RESAMPLE_MAX_SAMPLES``
samples the resamples are not drawn at all: each resample's median is drawn from its exact
distribution instead (``_order_statistic_medians``), ~log2(n) binomial draws per resample. Memory is
then the samples plus a few arrays of ``BOOTSTRAP_RESAMPLES`` values, whatever n is; the
interval is the same bootstrap's (same distribution), only the random draws differ from
resampling every value, which no run at or below ``RESAMPLE_MAX_SAMPLES`` samples sees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

MIN_SAMPLES_FOR_INTERVAL = 5
"""Below this many samples no interval or ratio is claimed (a bootstrap of 1-4 values says nothing)."""
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20261130
RESAMPLE_MAX_SAMPLES = 10_000
"""Up to this many samples per side every resample is drawn (at most 2000 x 10,000 values, in chunks)."""
RESAMPLE_CHUNK_VALUES = 1 << 22
"""Resampled values held at once (32 MiB of indices and 32 MiB of values); smaller draws are cached whole."""
METHOD = (
    f"median of samples; {int(CONFIDENCE * 100)} % percentile-bootstrap interval "
    f"({BOOTSTRAP_RESAMPLES} resamples, fixed seed) on the ratio of medians"
)


@dataclass(frozen=True)
class SampleSummary:
    """Location and spread of one variant's per-call timing samples."""

    n: int
    median_us: float
    mean_us: float
    stdev_us: float
    min_us: float
    max_us: float
    p10_us: float
    p90_us: float
    ci_low_us: float
    ci_high_us: float

    @property
    def has_interval(self) -> bool:
        """True when there are enough samples for the interval to mean something."""
        return self.n >= MIN_SAMPLES_FOR_INTERVAL

    @property
    def cv(self) -> float:
        """Coefficient of variation (stdev / mean)."""
        return self.stdev_us / self.mean_us if self.mean_us > 0 else math.nan


@dataclass(frozen=True)
class Ratio:
    """``numerator / denominator`` of two medians with its bootstrap confidence interval."""

    value: float
    ci_low: float
    ci_high: float
    n_numerator: int
    n_denominator: int

    def excludes(self, x: float) -> bool:
        """True when ``x`` lies outside the confidence interval."""
        return not (self.ci_low <= x <= self.ci_high)


def median(values: Sequence[float]) -> float:
    """The median (the mean of the middle two for an even count); ValueError when there are none.

    The one median of reportgen: summaries, ratios, breakdowns, A/B rounds and the PR comment all use it.
    """
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    k = len(s) // 2
    return float(s[k]) if len(s) % 2 else (s[k - 1] + s[k]) / 2.0


def median_or_none(values: Sequence[float]) -> float | None:
    """``median``, or None when there are no values (a variant that failed has no samples)."""
    return median(values) if values else None


def summarize(samples_us: tuple[float, ...] | list[float]) -> SampleSummary | None:
    """Summary of the samples, with a bootstrap CI of the median; None when there are none."""
    if not samples_us:
        return None
    a = np.asarray(samples_us, dtype=float)
    (meds,) = _bootstrap_medians((a,))
    lo, hi = _bootstrap_interval(meds)
    return SampleSummary(
        n=int(a.size),
        median_us=float(np.median(a)),
        mean_us=float(a.mean()),
        stdev_us=float(a.std(ddof=1)) if a.size > 1 else 0.0,
        min_us=float(a.min()),
        max_us=float(a.max()),
        p10_us=float(np.percentile(a, 10)),
        p90_us=float(np.percentile(a, 90)),
        ci_low_us=lo,
        ci_high_us=hi,
    )


def ratio_of_medians(numerator_us: tuple[float, ...], denominator_us: tuple[float, ...]) -> Ratio | None:
    """median(numerator) / median(denominator) with a bootstrap CI; None with too few samples or a zero median."""
    if min(len(numerator_us), len(denominator_us)) < MIN_SAMPLES_FOR_INTERVAL:
        return None
    num = np.asarray(numerator_us, dtype=float)
    den = np.asarray(denominator_us, dtype=float)
    if np.median(den) <= 0:
        return None
    num_meds, den_meds = _bootstrap_medians((num, den))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = num_meds / den_meds
    ratios = ratios[np.isfinite(ratios)]
    lo, hi = _bootstrap_interval(ratios)
    return Ratio(
        value=float(np.median(num) / np.median(den)),
        ci_low=lo,
        ci_high=hi,
        n_numerator=int(num.size),
        n_denominator=int(den.size),
    )


def _bootstrap_medians(sides: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The medians of ``BOOTSTRAP_RESAMPLES`` resamples of each side, the sides drawn one after the other from the seed.

    Small sides (all their draws within one chunk) take the cached indices; larger ones are drawn a chunk at a
    time, the same draws in the same order; sides over ``RESAMPLE_MAX_SAMPLES`` get their medians drawn
    directly (``_order_statistic_medians``).
    """
    if BOOTSTRAP_RESAMPLES * sum(a.size for a in sides) <= RESAMPLE_CHUNK_VALUES:
        draws = _resample_indices(tuple(a.size for a in sides))
        return tuple(_row_medians(a[idx]) for a, idx in zip(sides, draws, strict=True))
    rng = np.random.default_rng(SEED)
    return tuple(_chunked_medians(a, rng) if a.size <= RESAMPLE_MAX_SAMPLES else _order_statistic_medians(np.sort(a), rng)
                 for a in sides)


def _chunked_medians(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Resample medians as ``_resample_indices`` would give them, at most ``RESAMPLE_CHUNK_VALUES`` values at once."""
    rows = max(1, RESAMPLE_CHUNK_VALUES // a.size)
    out = np.empty(BOOTSTRAP_RESAMPLES)
    for start in range(0, BOOTSTRAP_RESAMPLES, rows):
        stop = min(start + rows, BOOTSTRAP_RESAMPLES)
        out[start:stop] = _row_medians(a[rng.integers(0, a.size, size=(stop - start, a.size))])
    return out


def _order_statistic_medians(s: np.ndarray, rng: np.random.Generator, count: int = BOOTSTRAP_RESAMPLES) -> np.ndarray:
    """The medians of ``count`` resamples of the sorted samples ``s``, drawn without drawing the resamples.

    A resample's median depends only on N(j), how many of its n draws fall at rank j or below: it is the value at
    the first rank where N reaches the middle. N(j) is binomial(n, j/n), and given N at two ranks, N at a rank
    between them is N(lo) + binomial(N(hi) - N(lo), (j - lo) / (hi - lo)), since the draws between them fall
    uniformly on those ranks. Bisecting the ranks with such draws finds the first rank reaching a count exactly
    (in distribution), in ~log2(n) steps; an even n takes a second search for the upper middle value.
    """
    n = s.size
    ranks, counts = _first_rank_reaching((n + 1) // 2, np.zeros(count, np.int64), np.zeros(count, np.int64),
                                         np.full(count, n, np.int64), np.full(count, n, np.int64), rng)
    if n % 2:
        lone: np.ndarray = s[ranks - 1] + 0.0
        return lone
    # The (n/2 + 1)-th smallest draw: at the same rank when that rank already holds it, else above it.
    past = counts > n // 2  # these searches start already found: lo = ranks - 1 (count 0), hi = ranks
    upper, _ = _first_rank_reaching(n // 2 + 1, np.where(past, ranks - 1, ranks), np.where(past, 0, counts),
                                    np.where(past, ranks, n), np.where(past, counts, n), rng)
    middle: np.ndarray = (s[ranks - 1] + s[upper - 1]) / 2 + 0.0
    return middle


def _first_rank_reaching(target: int, lo: np.ndarray, n_lo: np.ndarray, hi: np.ndarray, n_hi: np.ndarray,
                         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per resample, the first rank whose count N reaches ``target``, and N there; needs N(lo) < target <= N(hi)."""
    while (hi - lo > 1).any():
        mid = (lo + hi) // 2
        n_mid = n_lo + rng.binomial(n_hi - n_lo, (mid - lo) / np.maximum(hi - lo, 1))
        left = n_mid >= target
        hi, n_hi = np.where(left, mid, hi), np.where(left, n_mid, n_hi)
        lo, n_lo = np.where(left, lo, mid), np.where(left, n_lo, n_mid)
    return hi, n_hi


@lru_cache(maxsize=4)
def _resample_indices(sizes: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Indices of ``BOOTSTRAP_RESAMPLES`` resamples for each size: successive draws of the fixed seed.

    A summary takes one draw, a ratio two (its sides resampled independently). Cached, read-only:
    the draws depend only on the sizes, and a build bootstraps hundreds of variants with the same
    sample count.
    """
    rng = np.random.default_rng(SEED)
    draws = tuple(rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n)) for n in sizes)
    for idx in draws:
        idx.setflags(write=False)
    return draws


def _row_medians(m: np.ndarray) -> np.ndarray:
    """The median of each row, equal to ``np.median(m, axis=1)``: a full sort of short rows is several times faster.

    Sorts ``m`` in place (callers pass a fresh resample).
    """
    m.sort(axis=1)
    k = m.shape[1] // 2
    # + 0.0 turns -0.0 into 0.0, as np.median's mean of the middle values does.
    middle: np.ndarray = m[:, k] + 0.0 if m.shape[1] % 2 else (m[:, k - 1] + m[:, k]) / 2 + 0.0
    return middle


def _bootstrap_interval(estimates: np.ndarray) -> tuple[float, float]:
    if estimates.size == 0:
        return (math.nan, math.nan)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(estimates, [tail, 100 - tail])
    return (float(lo), float(hi))
