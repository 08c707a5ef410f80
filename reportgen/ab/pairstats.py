"""Paired statistics over interleaved A/B rounds: pure functions, no I/O, no torch.

A *round* holds one block of timing samples per side (base, head), taken back to back in
ABBA order. Per round and side the block's median is taken; the round's ratio is
``median(head) / median(base)``. Slow drift of the machine (clock, thermal, other tenants)
moves both sides of a round together, so it cancels in the ratio; the ABBA order cancels a
linear trend inside a pair of rounds too.

Interval method: a Student-t interval on the log ratios of the rounds (mean ± t(0.975, n-1) ·
sd/√n, exponentiated). Why this and not a bootstrap over rounds: with the 8-30 rounds a
verdict uses, a percentile bootstrap is known to be too narrow (it behaves like a z-interval
with an n, not n-1, divisor), which is exactly the false-alarm direction; the t-interval is
exact for normal log ratios, and per-round medians of a block are close to normal. Logs make
a 2x slowdown and a 2x speedup symmetric. One disturbed round widens the interval (sd grows),
which makes the verdict *inconclusive* (more rounds), never a false *regression*.

Verdict against a threshold t (percent): *regression* when the whole interval of the change
lies at or above +t, *improvement* when it lies at or below -t, *no change* when it lies
strictly inside (-t, +t), *inconclusive* when it straddles either edge.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

CONFIDENCE = 0.95
MIN_ROUNDS_FOR_INTERVAL = 3
"""Below this many rounds no interval is claimed (df = 1 gives a t quantile of 12.7)."""
METHOD = ("per-round medians, ratio head/base per round, 95 % Student-t interval on the mean log ratio "
          "over rounds (ABBA order)")


class AbVerdict(str, Enum):
    """The answer for one variant (or a whole pair)."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_CHANGE = "no change"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class PairStats:
    """One variant's paired result over ``rounds`` rounds.

    ``ratio`` is the geometric mean of the per-round ratios head/base; ``ci_low``/``ci_high`` its
    95 % interval. ``base_noise_pct``/``head_noise_pct`` are the pair's own noise: the sample
    standard deviation of the log per-round medians of one side, in percent (about the
    coefficient of variation of a side's round medians). ``ratio_noise_pct`` is the same for the
    per-round log ratios.
    """

    rounds: int
    base_round_medians_us: tuple[float, ...]
    head_round_medians_us: tuple[float, ...]
    round_ratios: tuple[float, ...]
    ratio: float
    ci_low: float
    ci_high: float
    base_noise_pct: float
    head_noise_pct: float
    ratio_noise_pct: float
    threshold_pct: float
    verdict: AbVerdict

    @property
    def change_pct(self) -> float:
        """(ratio - 1) in percent."""
        return (self.ratio - 1.0) * 100.0

    @property
    def ci_low_pct(self) -> float:
        return (self.ci_low - 1.0) * 100.0

    @property
    def ci_high_pct(self) -> float:
        return (self.ci_high - 1.0) * 100.0


def median(values: Sequence[float]) -> float:
    """The median (mean of the two middle values for an even count)."""
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    k = len(s) // 2
    return s[k] if len(s) % 2 else (s[k - 1] + s[k]) / 2.0


def round_medians(rounds: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """The median of each round's block of samples."""
    return tuple(median(block) for block in rounds)


def log_spread_pct(values: Sequence[float]) -> float:
    """Sample standard deviation (n-1) of ``log(values)`` in percent; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    logs = [math.log(v) for v in values]
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)) * 100.0


def t_two_sided_cdf(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer ``df`` (exact finite series, Abramowitz & Stegun 26.7.3-4)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if t <= 0:
        return 0.0
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        term, total = math.cos(theta), 0.0
        if df > 1:
            total = term
            for k in range(3, df - 1, 2):  # coefficients 2/3, 2*4/(3*5), ...
                term *= c2 * (k - 1) / k
                total += term
        return 2.0 / math.pi * (theta + math.sin(theta) * total)
    term, total = 1.0, 1.0
    for k in range(2, df - 1, 2):  # coefficients 1/2, 1*3/(2*4), ...
        term *= c2 * (k - 1) / k
        total += term
    return math.sin(theta) * total


def t_quantile(confidence: float, df: int) -> float:
    """The t with P(|T| <= t) = ``confidence`` (e.g. 0.95 -> 2.5706 at df 5), by bisection on the exact CDF."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    lo, hi = 0.0, 1.0
    while t_two_sided_cdf(hi, df) < confidence:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_two_sided_cdf(mid, df) < confidence:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return (lo + hi) / 2.0


def log_ratio_interval(ratios: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(geometric mean, low, high) of positive ratios: a Student-t interval on their logs, exponentiated."""
    n = len(ratios)
    if n < MIN_ROUNDS_FOR_INTERVAL:
        raise ValueError(f"an interval needs at least {MIN_ROUNDS_FOR_INTERVAL} rounds, got {n}")
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = t_quantile(confidence, n - 1) * sd / math.sqrt(n)
    return (math.exp(mean), math.exp(mean - half), math.exp(mean + half))


def verdict_for(ci_low: float, ci_high: float, threshold_pct: float) -> AbVerdict:
    """Where the interval of the ratio lies against ±threshold (see the module docstring)."""
    up, down = 1.0 + threshold_pct / 100.0, 1.0 - threshold_pct / 100.0
    if ci_low >= up:
        return AbVerdict.REGRESSION
    if ci_high <= down:
        return AbVerdict.IMPROVEMENT
    if down < ci_low and ci_high < up:
        return AbVerdict.NO_CHANGE
    return AbVerdict.INCONCLUSIVE


def pair_stats(base_rounds: Sequence[Sequence[float]], head_rounds: Sequence[Sequence[float]],
               threshold_pct: float) -> PairStats:
    """Paired statistics of one variant; ``base_rounds[i]`` and ``head_rounds[i]`` are round i's blocks (µs)."""
    if len(base_rounds) != len(head_rounds):
        raise ValueError(f"rounds differ: base {len(base_rounds)}, head {len(head_rounds)}")
    if threshold_pct <= 0:
        raise ValueError("threshold_pct must be positive")
    base_med = round_medians(base_rounds)
    head_med = round_medians(head_rounds)
    if any(m <= 0 for m in (*base_med, *head_med)):
        raise ValueError("round medians must be positive times")
    ratios = tuple(h / b for h, b in zip(head_med, base_med, strict=True))
    ratio, low, high = log_ratio_interval(ratios)
    return PairStats(
        rounds=len(ratios),
        base_round_medians_us=base_med,
        head_round_medians_us=head_med,
        round_ratios=ratios,
        ratio=ratio,
        ci_low=low,
        ci_high=high,
        base_noise_pct=log_spread_pct(base_med),
        head_noise_pct=log_spread_pct(head_med),
        ratio_noise_pct=log_spread_pct(ratios),
        threshold_pct=threshold_pct,
        verdict=verdict_for(low, high, threshold_pct),
    )


def overall_verdict(verdicts: Sequence[AbVerdict]) -> AbVerdict:
    """A pair's verdict: any regression; else any inconclusive; else any improvement; else no change."""
    for v in (AbVerdict.REGRESSION, AbVerdict.INCONCLUSIVE, AbVerdict.IMPROVEMENT):
        if v in verdicts:
            return v
    return AbVerdict.NO_CHANGE
