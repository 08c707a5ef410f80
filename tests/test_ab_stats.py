"""reportgen.analysis.paired and reportgen.analysis.drift on synthetic rounds and sessions whose statistics are known exactly."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
from factories import synthetic_run, variant

from reportgen.analysis.drift import (
    compare_after_the_fact,
    consecutive_ratios,
    history_medians,
    minutes_apart,
    not_interleaved_note,
    widen_for_drift,
)
from reportgen.analysis.paired import (
    AbVerdict,
    SessionRounds,
    median,
    overall_verdict,
    pair_stats,
    robust_spread_pct,
    session_interval,
    session_ratio,
    signed_rank_counts,
    signed_rank_rank,
    verdict_for,
)


def blocks(medians: list[float]) -> list[list[float]]:
    """One block per round whose median is exactly the given value (a fast and a slow outlier around it)."""
    return [[m * 0.5, m, m * 4.0] for m in medians]


def sessions_of(base: list[list[float]], head: list[list[float]], per_session: int = 1) -> list[SessionRounds]:
    """Rounds grouped into sessions of ``per_session`` rounds each."""
    return [SessionRounds(tuple(map(tuple, base[i:i + per_session])), tuple(map(tuple, head[i:i + per_session])))
            for i in range(0, len(base), per_session)]


def rounds_with_ratios(ratios: list[float], base_us: float = 128.0) -> list[SessionRounds]:
    """One round per session: base blocks with median ``base_us`` (a power of two: the ratios divide back exactly)
    and head blocks x ratio."""
    return sessions_of(blocks([base_us] * len(ratios)), blocks([base_us * r for r in ratios]))


SLOWER = [1.10, 1.20, 1.06, 1.12, 1.08, 1.30, 1.07, 1.15, 1.09, 1.11]
"""Ten sessions of a head about 10 % slower."""


def w_plus(values: list[float], shift: float) -> int:
    """The signed-rank statistic of ``values - shift``, from its definition: rank |x - shift| (no ties here) and add
    the ranks of the positive differences."""
    diffs = sorted((v - shift for v in values), key=abs)
    return sum(rank for rank, d in enumerate(diffs, start=1) if d > 0)


def test_signed_rank_null_distribution_matches_enumeration() -> None:
    for n in range(1, 11):
        counts = [0] * (n * (n + 1) // 2 + 1)
        for signs in itertools.product((0, 1), repeat=n):
            counts[sum(rank for rank, s in zip(range(1, n + 1), signs, strict=True) if s)] += 1
        assert signed_rank_counts(n) == counts


def test_signed_rank_counts_are_the_same_in_any_order_of_asking() -> None:
    """They are grown from the largest n asked for before: asked up, down and up again, each matches a table built
    from nothing by adding one rank at a time."""
    def from_nothing(n: int) -> list[int]:
        counts = [1] + [0] * (n * (n + 1) // 2)
        for rank in range(1, n + 1):
            for t in range(len(counts) - 1, rank - 1, -1):
                counts[t] += counts[t - rank]
        return counts

    for n in (12, 40, 41, 7, 0, 43, 43, 1, 60):
        assert signed_rank_counts(n) == from_nothing(n), n
    counts = signed_rank_counts(9)
    counts[0] = 99  # the caller's list is its own
    assert signed_rank_counts(9) == from_nothing(9)
    with pytest.raises(ValueError):
        signed_rank_counts(-1)


def test_signed_rank_ranks_match_the_published_table() -> None:
    # Two-sided 5 % critical values of W (the largest w with 2 P(W <= w) <= 5 %): n=6: 0, 7: 2, 10: 8, 20: 52, 30: 137.
    assert signed_rank_rank(5) == (0, 1.0)  # 2 * 1/32 > 5 %: no 95 % interval with 5 values
    assert signed_rank_rank(6) == (1, 1 - 2 / 64)
    assert signed_rank_rank(7) == (3, 1 - 2 * 3 / 128)
    assert signed_rank_rank(10) == (9, 1 - 2 * 25 / 1024)
    assert signed_rank_rank(20)[0] == 53 and signed_rank_rank(30)[0] == 138
    for n in range(6, 61):
        k, coverage = signed_rank_rank(n)
        counts = signed_rank_counts(n)
        assert coverage >= 0.95
        assert 2 * sum(counts[: k + 1]) / 2**n > 0.05  # k is the largest rank that keeps 95 %


def test_six_sessions_give_the_extremes_and_the_centre_of_the_walsh_averages() -> None:
    c = 0.01
    ratios = [math.exp(c * i) for i in (3, 1, 6, 2, 5, 4)]  # logs c*1..c*6: Walsh averages symmetric about 3.5 c
    assert session_interval(ratios) == pytest.approx((math.exp(3.5 * c), math.exp(c), math.exp(6 * c), 1 - 2 / 64))


def test_seven_sessions_with_one_far_value_by_hand() -> None:
    """Logs c x (0, 1, 2, 3, 4, 5, 20). The 28 Walsh averages (units of c): 0, .5, 1, 1, 1.5, 1.5, 2, 2, 2, 2.5, 2.5,
    2.5, 3, 3 | 3, 3.5, 3.5, 4, 4, 4.5, 5, 10, 10.5, 11, 11.5, 12, 12.5, 20. k = 3 at n = 7: [1 c, 12 c], estimate
    3 c. (The sign test's interval at n = 7 is [min, max] = [0, 20 c]; the median 3 c.)"""
    c = 0.01
    ratios = [math.exp(c * v) for v in (5, 0, 20, 1, 4, 2, 3)]
    est, low, high, coverage = session_interval(ratios)
    assert (est, low, high) == pytest.approx((math.exp(3 * c), math.exp(c), math.exp(12 * c)), rel=1e-12)
    assert coverage == 1 - 2 * 3 / 128


def test_refuses_what_has_no_interval() -> None:
    with pytest.raises(ValueError, match="positive and finite"):
        session_interval([1.0, 1.1, 0.9, 1.0, 0.0, 1.2])
    with pytest.raises(ValueError, match="positive and finite"):
        session_interval([1.0, 1.1, 0.9, 1.0, math.inf, 1.2])
    with pytest.raises(ValueError, match="no 99% interval with 6 values"):
        session_interval([1.0, 1.1, 0.9, 1.0, 1.05, 1.2], confidence=0.99)  # 2/64 > 1 %: k = 0


def test_interval_is_the_set_of_centres_the_signed_rank_test_does_not_reject() -> None:
    """The interval from Walsh averages equals the inversion of the test computed from ranks: shifts just inside its
    ends are accepted (k <= W+ <= M - k), shifts just outside are rejected."""
    for ratios in (SLOWER, [1.01, 0.97, 1.04, 0.99, 1.02, 1.0, 0.96, 1.05, 1.03, 0.98, 1.015, 0.975, 1.1]):
        logs = [math.log(r) for r in ratios]
        n = len(logs)
        k, _ = signed_rank_rank(n)
        top = n * (n + 1) // 2
        _, low, high, _ = session_interval(ratios)
        eps = 1e-9
        for shift, accepted in ((math.log(low) + eps, True), (math.log(high) - eps, True),
                                (math.log(low) - eps, False), (math.log(high) + eps, False)):
            assert (k <= w_plus(logs, shift) <= top - k) is accepted


def test_exact_interval_ratio_and_regression() -> None:
    s = pair_stats(rounds_with_ratios(SLOWER), threshold_pct=5.0)
    assert s.rounds == 10 and s.sessions == 10 and s.session_ratios == pytest.approx(SLOWER, rel=1e-15)
    assert s.base_round_medians_us == (128.0,) * 10
    assert s.round_ratios == pytest.approx(SLOWER, rel=1e-15)
    assert s.ci_low == pytest.approx(1.08, rel=1e-12)  # the 9th smallest Walsh average is the value 1.08 itself
    assert s.coverage == 1 - 2 * 25 / 1024
    assert s.verdict is AbVerdict.REGRESSION
    assert s.change_pct == pytest.approx(11.0) and s.ci_low_pct == pytest.approx(8.0)


def test_one_preempted_session_widens_only_its_own_side() -> None:
    wild = [6.0 if r == 1.30 else r for r in SLOWER]  # the largest ratio becomes a preempted session
    s = pair_stats(rounds_with_ratios(wild), threshold_pct=5.0)
    assert s.ci_low == pytest.approx(1.08, rel=1e-12) and s.ci_high > 2.0
    assert s.verdict is AbVerdict.REGRESSION


def test_one_preempted_session_makes_same_code_inconclusive_not_a_regression() -> None:
    same = [1.01, 0.97, 1.04, 0.99, 1.02, 1.0, 0.96, 1.03, 0.98, 1.015]
    assert pair_stats(rounds_with_ratios(same), 5.0).verdict is AbVerdict.NO_CHANGE
    s = pair_stats(rounds_with_ratios([6.0, *same[1:]]), 5.0)
    assert s.verdict is AbVerdict.INCONCLUSIVE and 0.95 < s.ci_low < 1.0


def test_threshold_of_ten_makes_the_same_rounds_inconclusive() -> None:
    s = pair_stats(rounds_with_ratios(SLOWER), threshold_pct=10.0)
    assert s.verdict is AbVerdict.INCONCLUSIVE  # [1.08, 1.18] straddles 1.10


def test_same_code_with_a_systematic_one_percent_is_no_change() -> None:
    ratios = [1.01 * f for f in (0.99, 1.01, 0.98, 1.02, 1.00, 0.995, 1.005, 0.97, 1.03, 1.0)]
    s = pair_stats(rounds_with_ratios(ratios), threshold_pct=5.0)
    assert s.verdict is AbVerdict.NO_CHANGE
    assert 0.95 < s.ci_low <= s.ratio <= s.ci_high < 1.05


def test_a_session_is_the_centre_of_its_abba_pairs_and_the_interval_is_over_sessions() -> None:
    """Six sessions of four rounds: each session's rounds agree closely (within-session noise is small) but the
    sessions differ (one process pair is 9 % off): the interval spans the sessions, not the rounds."""
    offsets = [1.10, 1.0, 0.91, 1.0, 1.03, 0.98]
    per_round = [[o * 1.01, o / 1.01, o * 1.02, o / 1.02] for o in offsets]  # each ABBA pair's geometric mean is o
    ratios = [r for session in per_round for r in session]
    base, head = blocks([128.0] * 24), blocks([128.0 * r for r in ratios])
    s = pair_stats(sessions_of(base, head, per_session=4), 5.0)
    assert s.rounds == 24 and s.sessions == 6
    assert s.session_ratios == pytest.approx(offsets, rel=1e-12)
    assert (s.ci_low, s.ci_high) == pytest.approx((0.91, 1.10), rel=1e-12)  # n = 6: min and max, 96.9 %
    assert s.verdict is AbVerdict.INCONCLUSIVE  # a round-level interval of these 24 would have said no change
    assert s.process_noise_pct == pytest.approx(robust_spread_pct(s.session_ratios))


def test_the_position_in_a_round_cancels_within_each_abba_pair() -> None:
    """The side that runs first in a round takes 1/1.35 of the other's time (its input still cached): the rounds'
    ratios are r*p and r/p in turn. Each session's ratio is r exactly, whichever rounds the noise moved; the median
    of the rounds' ratios would have been anywhere between r/p and r*p."""
    p, r = 1.35, 1.02
    noise = [1.0, 1.03, 0.97, 1.01, 0.99, 1.02, 0.98, 1.0]
    sessions = []
    for k in range(6):
        ratios = [r * (p * noise[(i // 2 + k) % 8]) ** (1 if i % 2 == 0 else -1)
                  for i in range(8)]  # round 2j's noise undone in round 2j+1: each pair's mean is r
        sessions.append(SessionRounds(tuple((128.0,) for _ in ratios), tuple((128.0 * x,) for x in ratios)))
    s = pair_stats(sessions, 5.0)
    assert s.session_ratios == pytest.approx([r] * 6, rel=1e-12)
    assert s.verdict is AbVerdict.NO_CHANGE
    first = median(s.round_ratios[:8])  # what a median of the rounds would have said of session 1: between modes
    assert abs(math.log(first / r)) > 0.03


def test_a_round_without_its_partner_is_left_out_while_a_pair_is_whole() -> None:
    """A stored pair whose block failed in round 3: round 2 alone keeps its position's bias (x1.35), so it is left
    out; a session of single rounds only (no whole pair) still gets a ratio."""
    p = 1.35
    ratios = {i: (p if i % 2 == 0 else 1 / p) for i in range(8)}
    del ratios[3]
    assert session_ratio(ratios) == pytest.approx(1.0, rel=1e-12)
    assert session_ratio({0: 1.1, 2: 1.3, 4: 1.2}) == pytest.approx(1.2, rel=5e-3)


def test_one_wild_round_moves_a_session_little() -> None:
    """Sixteen rounds, one preempted (6x): the session's ratio stays inside the range of the other pairs' means."""
    ratios = {i: 1.0 + 0.01 * ((i * 7) % 5 - 2) for i in range(16)}
    calm = session_ratio(ratios)
    ratios[5] = 6.0
    wild = session_ratio(ratios)
    pair_means = [math.sqrt(ratios[2 * j] * ratios[2 * j + 1]) for j in range(8) if j != 2]
    assert min(pair_means) <= wild <= max(pair_means)
    assert abs(math.log(wild / calm)) < 0.02
    with pytest.raises(ValueError):
        session_ratio({})
    with pytest.raises(ValueError):
        session_ratio({0: 0.0})


def test_improvement_needs_the_whole_interval_below() -> None:
    faster = [1 / r for r in SLOWER]
    s = pair_stats(rounds_with_ratios(faster), threshold_pct=5.0)
    _, low, high, _ = session_interval(SLOWER)
    assert (s.ci_low, s.ci_high) == pytest.approx((1 / high, 1 / low), rel=1e-12)
    assert s.verdict is AbVerdict.IMPROVEMENT


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1 + 5 / 100, 1.2, AbVerdict.REGRESSION),  # touching the threshold counts
        (1.049, 1.2, AbVerdict.INCONCLUSIVE),
        (0.96, 1.04, AbVerdict.NO_CHANGE),
        (0.9, 1 - 5 / 100, AbVerdict.IMPROVEMENT),
        (0.9, 0.951, AbVerdict.INCONCLUSIVE),
        (0.9, 1.1, AbVerdict.INCONCLUSIVE),
    ],
)
def test_verdict_edges(low: float, high: float, expected: AbVerdict) -> None:
    assert verdict_for(low, high, 5.0) is expected


def test_noise_is_the_robust_spread_of_one_sides_round_medians() -> None:
    a = 0.1
    medians = [100.0, 100 * math.exp(a), 100 * math.exp(-a), 100 * math.exp(2 * a), 100 * math.exp(-2 * a)]
    # logs around their median 0: |0|, a, a, 2a, 2a -> MAD a -> 1.4826 a
    assert robust_spread_pct(medians) == pytest.approx(1.4826 * a * 100)
    s = pair_stats(sessions_of(blocks(medians + [100.0]), blocks([m * 1.0 for m in medians + [100.0]])), 5.0)
    assert s.base_noise_pct == pytest.approx(robust_spread_pct(medians + [100.0]))
    assert s.ratio_noise_pct == 0.0 and s.verdict is AbVerdict.NO_CHANGE


def test_median_and_refusals() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([4.0, 1.0, 2.0, 3.0]) == 2.5
    with pytest.raises(ValueError, match="rounds differ"):
        pair_stats([SessionRounds(((1.0,),) * 2, ((1.0,),) * 3)] * 6, 5.0)
    with pytest.raises(ValueError, match="at least 6 values, got 5"):
        pair_stats(sessions_of(blocks([1.0] * 5), blocks([1.0] * 5)), 5.0)


def test_overall_verdict_precedence() -> None:
    R, Up, N, Q = AbVerdict.REGRESSION, AbVerdict.IMPROVEMENT, AbVerdict.NO_CHANGE, AbVerdict.INCONCLUSIVE
    assert overall_verdict([N, Q, R, Up]) is R
    assert overall_verdict([N, Q, Up]) is Q
    assert overall_verdict([N, Up]) is Up
    assert overall_verdict([N, N]) is N and overall_verdict([]) is N


# ---- drift between separate runs ---------------------------------------------------------------------------


def test_drift_widens_by_the_spread_of_consecutive_run_ratios() -> None:
    a = math.log(1.1)
    history = [math.exp(x) for x in (a, -a, a, -a)]  # logs mean 0, sd = sqrt(4 a^2 / 3)
    sd = math.sqrt(4 * a * a / 3)
    d = widen_for_drift(1.0, 1.0, 1.0, history, minutes=42.0)
    assert d.drift_pct == pytest.approx(sd * 100)
    assert (d.ci_low, d.ci_high) == pytest.approx((math.exp(-1.959963984540054 * sd), math.exp(1.959963984540054 * sd)))
    assert (d.within_low, d.within_high) == (1.0, 1.0)
    assert d.note.startswith("not interleaved: taken 42 minutes apart; interval widened by the drift between 5 earlier")


def test_drift_adds_in_quadrature_to_the_within_run_interval() -> None:
    history = [1.0, 1.0, 1.0]  # no drift at all: the interval is unchanged
    d = widen_for_drift(1.2, 1.1, 1.3, history, minutes=3)
    assert (d.ci_low, d.ci_high) == pytest.approx((1.1, 1.3))
    assert d.drift_pct == 0.0


def test_too_little_history_keeps_the_interval_and_says_so() -> None:
    d = widen_for_drift(1.2, 1.1, 1.3, [1.05, 0.97], minutes=0.5)
    assert (d.ci_low, d.ci_high, d.drift_pct) == (1.1, 1.3, None)
    assert d.note.startswith("not interleaved: taken 30 seconds apart; the drift between runs is unknown")
    assert not_interleaved_note(1.0) == "not interleaved: taken 1 minute apart"


def test_history_is_runs_of_the_same_machine_scenario_and_parameters_up_to_base() -> None:
    def run(i: int, median_us: float, **kw: object) -> object:
        return synthetic_run(run_id=f"20261130T00{i:02d}00Z-cpu-test-abc{i:03d}", created_utc=f"2026-11-30T00:{i:02d}:00Z",
                             variants=(variant("naive", median_us, n=31),), **kw)

    same = [run(i, m) for i, m in enumerate([100.0, 110.0, 99.0, 121.0])]
    other_host = run(5, 1000.0, hostname="elsewhere")
    other_shape = run(6, 5.0, shape="8,8")
    head = run(30, 500.0)
    runs = [head, other_shape, *reversed(same), other_host]
    base = same[-1]
    assert history_medians(runs, base, "naive") == pytest.approx((100.0, 110.0, 99.0, 121.0))  # type: ignore[arg-type]
    assert consecutive_ratios([100.0, 110.0, 99.0, 121.0]) == pytest.approx((1.1, 0.9, 121 / 99))
    assert minutes_apart(base.created_utc, head.created_utc) == 27.0  # type: ignore[attr-defined]
    d = compare_after_the_fact(runs, base, head, "naive", 5.0, 4.9, 5.1)  # type: ignore[arg-type]
    assert d.history_ratios == 3 and d.ci_low < 4.9 and d.ci_high > 5.1
    assert d.note.startswith("not interleaved: taken 27 minutes apart")
    missing = dataclasses.replace(base, variants=())  # type: ignore[type-var]
    assert history_medians([missing], missing, "naive") == ()
