"""Paired statistics over interleaved A/B rounds in sessions: pure functions, no I/O, no torch.

A *round* holds one block of timing samples per side (base, head), taken back to back in
ABBA order. Per round and side the block's median is taken; the round's ratio is
``median(head) / median(base)``. Slow drift of the machine (clock, thermal, other tenants)
moves both sides of a round together, so it cancels in the ratio. Rounds 2k and 2k+1 are an ABBA
pair: each side runs first in one of them, so the pair's geometric mean ratio cancels what the
position in a round does to a side, and a linear trend inside the pair. The position matters: the side
that runs first in a round ran last in the round before, back to back, and finds its input still in
the cache the other process evicts (a row sum over 16 MiB on a 2-core VM: the first side 12-19 % faster
than the second in 6 of 6 A/A pairs; docs/ab-testing.md, "ABBA pairs of rounds").

A *session* is one pair of worker processes. Two processes running the same code differ by an
amount fixed for their lifetime (memory placement, core, allocator state; measured on a 2-core VM:
up to ±20 % at a cache-resident shape), identical in every round of the session, so rounds of
one session cannot measure it. The session is therefore the unit: a session's ratio is the
Hodges-Lehmann centre of its ABBA pairs' ratios (:func:`session_ratio`), and the interval is over sessions.

Interval method: the Wilcoxon signed-rank 95 % interval (Hodges-Lehmann) for the centre of the
logarithms of the per-session ratios: form the n(n+1)/2 Walsh averages (x_i + x_j)/2, i <= j, of the
logs, take their median as the estimate and their k-th smallest and k-th largest as the interval, k
the largest rank with 2 * P(W+ < k) <= 5 % under the exact null distribution of the signed-rank
statistic W+ (its exact coverage, >= 95 %, is stated); back to ratios with exp. It needs at least 6
sessions (with 6 the interval is the smallest and the largest ratio, 96.9 %).

Why this interval: it assumes the sessions are independent and their log-ratios symmetric about
the centre. For same code on both sides the symmetry is close to given: a session's offset is
the difference of two processes' offsets drawn from nearly the same distribution (the same
machine, the same way of starting them; not exactly, since base loads and warms first), and
such a difference is symmetric about zero. Against the sign test (used up to 2026-12-02) it
needs about two thirds of the sessions for the same width with normal-like data (asymptotic
efficiency 0.955 against 0.637); re-scored on the recorded idle benchmark sessions it detected 9
of 10 injected 10 % slowdowns where the sign test detected 6, with no A/A verdict changed to a
regression (benchmarks/README.md).

Outliers: a session's ratio is the Hodges-Lehmann centre of its ABBA pairs' ratios. A preempted block
spoils its pair, which moves only the n of the n(n+1)/2 Walsh averages that hold it: with at least 3 pairs
the centre stays within the other pairs' range. With the default 8 pairs (16 rounds), 3 wild pairs (3 of 16
rounds, where the median of the rounds' ratios needed 8) can move it anywhere; a wild session (0.2 or 6, as
single rounds gave under load) needs about 29 % of its pairs disturbed. One wild session pulls the interval's
end on its own side towards it, so the pair comes out inconclusive and runs more sessions. It moves the opposite end by at most n
Walsh averages, no further than the k-th smallest (largest) Walsh average of the other sessions
alone. The sign test moves by one order statistic; the signed-rank interval breaks down sooner
when many sessions are wild (about 29 % of them against 50 %), and then says inconclusive or is
wrong, so under heavy load read the spread between sessions in the comment. A t-interval would
be widened on both sides; a percentile bootstrap over few values is too narrow (the false-alarm
direction).

Verdict against a threshold t (percent): *regression* when the whole interval of the ratio
lies at or above 1 + t/100, *improvement* when it lies at or below 1 - t/100, *no change* when
it lies strictly inside, *inconclusive* when it straddles either edge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from reportgen.analysis.stats import CONFIDENCE, median

MIN_SESSIONS_FOR_INTERVAL = 6
"""The fewest values with a 95 % signed-rank interval (with 5, even the extreme values cover only 93.8 %)."""



class AbVerdict(str, Enum):
    """The answer for one variant (or a whole pair)."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_CHANGE = "no change"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class SessionRounds:
    """One session's blocks of samples (µs) of one variant: ``base[i]`` and ``head[i]`` are round i's."""

    base: tuple[tuple[float, ...], ...]
    head: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class PairStats:
    """One variant's paired result over ``rounds`` rounds in ``sessions`` sessions.

    ``ratio`` is the Hodges-Lehmann estimate over the per-session ratios head/base (``session_ratios``, each
    the centre of its ABBA pairs' ratios, :func:`session_ratio`); ``ci_low``/``ci_high`` its signed-rank interval, whose
    exact coverage (>= 95 %) is ``coverage``. ``base_noise_pct``/``head_noise_pct`` are the pair's own noise: the robust
    spread (1.4826 x MAD of the logs, in percent, about a coefficient of variation) of one side's round
    medians. ``ratio_noise_pct``: the same for the per-round ratios; ``process_noise_pct``: for the
    per-session ratios (the difference between pairs of processes).
    """

    rounds: int
    sessions: int
    base_round_medians_us: tuple[float, ...]
    head_round_medians_us: tuple[float, ...]
    round_ratios: tuple[float, ...]
    session_ratios: tuple[float, ...]
    ratio: float
    ci_low: float
    ci_high: float
    coverage: float
    base_noise_pct: float
    head_noise_pct: float
    ratio_noise_pct: float
    process_noise_pct: float
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

    @property
    def half_width_pct(self) -> float:
        """Half the interval's width, in percent of the ratio's scale: how far the estimate can be trusted."""
        return (self.ci_high - self.ci_low) * 50.0


def round_medians(rounds: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """The median of each round's block of samples."""
    return tuple(median(block) for block in rounds)


def robust_spread_pct(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation of ``log(values)``, in percent: a standard deviation that one
    disturbed round cannot inflate (it equals the sd for normal data). 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    logs = [math.log(v) for v in values]
    center = median(logs)
    return 1.4826 * median([abs(x - center) for x in logs]) * 100.0


_LARGEST: list[tuple[int, tuple[int, ...]]] = [(0, (1,))]
"""The largest n ``signed_rank_counts`` was asked for, and its counts: a pair asks for n = 6, 7, 8, ... in turn,
and each is grown from the one before in O(n²) instead of built from nothing in O(n³)."""


def signed_rank_counts(n: int) -> list[int]:
    """``counts[t]``: how many of the 2**n sign assignments to the ranks 1..n give the signed-rank statistic W+ = t
    (the exact null distribution, t = 0 .. n(n+1)/2). Adding rank m to the ranks 1..m-1:
    counts_m[t] = counts_{m-1}[t] + counts_{m-1}[t - m]."""
    if n < 0:
        raise ValueError(f"n must be at least 0, got {n}")
    m, counts = _LARGEST[0]
    if m > n:
        m, counts = 0, (1,)
    for rank in range(m + 1, n + 1):
        grown = list(counts) + [0] * rank
        for t in range(rank, len(grown)):
            grown[t] += counts[t - rank]
        counts = tuple(grown)
    if n >= _LARGEST[0][0]:
        _LARGEST[0] = (n, counts)
    return list(counts)


@lru_cache(maxsize=1024)
def signed_rank_rank(n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """(k, coverage): the largest k with 2 * P(W+ <= k - 1) <= 1 - confidence, and the exact coverage
    1 - 2 * P(W+ <= k - 1) of the interval [k-th smallest, k-th largest Walsh average]. k = 0: no interval.
    Cached: a pair asks after every session, for each variant."""
    counts, total, alpha = signed_rank_counts(n), 2**n, 1.0 - confidence
    tail, k = 0, 0
    while k < len(counts) // 2 and 2 * (tail + counts[k]) <= alpha * total:
        tail, k = tail + counts[k], k + 1
    return (k, 1.0 - 2.0 * tail / total)


def walsh_averages(values: Sequence[float]) -> list[float]:
    """All (x_i + x_j) / 2 with i <= j, sorted."""
    n = len(values)
    return sorted((values[i] + values[j]) / 2.0 for i in range(n) for j in range(i, n))


def session_interval(ratios: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """(estimate, low, high, coverage) of the ratios: the Hodges-Lehmann estimate and the Wilcoxon signed-rank
    interval, both computed on the logs (see the module docstring)."""
    n = len(ratios)
    if n < MIN_SESSIONS_FOR_INTERVAL:
        raise ValueError(f"an interval needs at least {MIN_SESSIONS_FOR_INTERVAL} values, got {n}")
    if any(not (math.isfinite(r) and r > 0) for r in ratios):
        raise ValueError("ratios must be positive and finite")
    k, coverage = signed_rank_rank(n, confidence)
    if k == 0:
        raise ValueError(f"no {confidence:.0%} interval with {n} values")
    walsh = walsh_averages([math.log(r) for r in ratios])
    return (math.exp(median(walsh)), math.exp(walsh[k - 1]), math.exp(walsh[-k]), coverage)


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


def settled(stats: PairStats, precision_pct: float) -> bool:
    """Whether a pair may stop for this variant: its interval decides, and a *no change* is also narrow enough that
    its estimate means something (half-width at most ``precision_pct``; 0 stops at the first *no change*).

    Why: an interval inside ±5 % after 6-12 sessions can still be ±4 % wide, and a reader takes the printed change
    at its word. The half-width is about two standard errors, so (for a normal estimate) waiting for ±P keeps an
    A/A estimate within ±1.5 P about 99 times in 100. Replayed on the same recorded sessions, precision 0 left 21 of
    80 unchanged estimates beyond ±1.5 %, precision 2 left 13 (docs/ab-testing.md, "A no change waits for a narrow
    interval"). Regressions and improvements stop at once: their sign is what the gate reports.
    """
    return interval_settled(stats.ci_low, stats.ci_high, stats.threshold_pct, precision_pct)


def interval_settled(ci_low: float, ci_high: float, threshold_pct: float, precision_pct: float) -> bool:
    """:func:`settled` of an interval of the ratio, for callers that hold no :class:`PairStats` (replays)."""
    verdict = verdict_for(ci_low, ci_high, threshold_pct)
    if verdict is AbVerdict.INCONCLUSIVE:
        return False
    return verdict is not AbVerdict.NO_CHANGE or not precision_pct or (ci_high - ci_low) * 50.0 <= precision_pct


def round_ratios(session: SessionRounds) -> tuple[float, ...]:
    """Per round: median(head block) / median(base block)."""
    if len(session.base) != len(session.head) or not session.base:
        raise ValueError(f"rounds differ or none: base {len(session.base)}, head {len(session.head)}")
    base_med, head_med = round_medians(session.base), round_medians(session.head)
    if any(m <= 0 for m in (*base_med, *head_med)):
        raise ValueError("round medians must be positive times")
    return tuple(h / b for h, b in zip(head_med, base_med, strict=True))


def session_ratio(ratios: Mapping[int, float]) -> float:
    """A session's ratio from its rounds' ratios (round index -> ratio): the Hodges-Lehmann centre (median of the
    Walsh averages) of the logs of its ABBA pairs' ratios, a pair (rounds 2k and 2k+1, each side first in one of
    them) giving the geometric mean of its two ratios. A round whose partner is missing (a stored pair whose block of
    this variant failed in one round) is left out, as it keeps its position's bias; only when no pair is whole do
    the single rounds count, each alone.

    Not the median of the rounds' ratios: where the position in a round moves a side by a factor p, those ratios
    are r*p and r/p in turn, and their median lies anywhere between the two; a pair's mean is r. Over the pairs,
    the Hodges-Lehmann centre stays within the other pairs' range whatever one wild round did, and is less noisy
    than their median (measured: benchmarks/session_estimator.py, docs/ab-testing.md "ABBA pairs of rounds").
    """
    if not ratios:
        raise ValueError("a session needs at least one round")
    pairs: dict[int, list[float]] = {}
    for index, r in ratios.items():
        if not r > 0:
            raise ValueError("round ratios must be positive")
        pairs.setdefault(index // 2, []).append(math.log(r))
    whole = [logs for logs in pairs.values() if len(logs) == 2]
    means = [sum(logs) / len(logs) for logs in (whole or list(pairs.values()))]
    return math.exp(median(walsh_averages(means)))


@lru_cache(maxsize=1024)
def _round_ratios_of(session: SessionRounds) -> tuple[float, ...]:
    """``round_ratios``, once per session: a pair scores every session again after each new one."""
    return round_ratios(session)


@lru_cache(maxsize=1024)
def _session_ratio_of(session: SessionRounds) -> float:
    return session_ratio(dict(enumerate(_round_ratios_of(session))))


def pair_stats(sessions: Sequence[SessionRounds], threshold_pct: float) -> PairStats:
    """Paired statistics of one variant over its sessions (see the module docstring)."""
    if threshold_pct <= 0:
        raise ValueError("threshold_pct must be positive")
    per_session = [_round_ratios_of(s) for s in sessions]
    session_ratios = tuple(_session_ratio_of(s) for s in sessions)
    ratio, low, high, coverage = session_interval(session_ratios)
    base_med = tuple(m for s in sessions for m in round_medians(s.base))
    head_med = tuple(m for s in sessions for m in round_medians(s.head))
    ratios = tuple(r for rs in per_session for r in rs)
    return PairStats(
        rounds=len(ratios),
        sessions=len(sessions),
        base_round_medians_us=base_med,
        head_round_medians_us=head_med,
        round_ratios=ratios,
        session_ratios=session_ratios,
        ratio=ratio,
        ci_low=low,
        ci_high=high,
        coverage=coverage,
        base_noise_pct=robust_spread_pct(base_med),
        head_noise_pct=robust_spread_pct(head_med),
        ratio_noise_pct=robust_spread_pct(ratios),
        process_noise_pct=robust_spread_pct(session_ratios),
        threshold_pct=threshold_pct,
        verdict=verdict_for(low, high, threshold_pct),
    )


def overall_verdict(verdicts: Sequence[AbVerdict]) -> AbVerdict:
    """A pair's verdict: any regression; else any inconclusive; else any improvement; else no change."""
    for v in (AbVerdict.REGRESSION, AbVerdict.INCONCLUSIVE, AbVerdict.IMPROVEMENT):
        if v in verdicts:
            return v
    return AbVerdict.NO_CHANGE
