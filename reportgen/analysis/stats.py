"""Pure statistics over timing samples: summaries, ratios and their confidence intervals.

Method (stated in every report): per-call time is the median of the samples; a ratio of two
variants' medians gets a 95 % percentile-bootstrap interval (resampling each side's samples
independently, ``BOOTSTRAP_RESAMPLES`` times, fixed seed so builds are reproducible).
Medians resist the heavy right tail that page faults and preemption put on CPU timings.
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
    (idx,) = _resample_indices((a.size,))
    lo, hi = _bootstrap_interval(_row_medians(a[idx]))
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
    num_idx, den_idx = _resample_indices((num.size, den.size))
    num_meds = _row_medians(num[num_idx])
    den_meds = _row_medians(den[den_idx])
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
