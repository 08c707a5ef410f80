"""A runner's calibration: the gate replayed on A/A sessions (false alarms, resolution, detectable slowdown), the
budget's sessions, and the replay agreeing with the gate's own interval code."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from reportgen.analysis.calibration import (
    GateModel,
    _hl_intervals,
    budget_sessions,
    calibrate_variant,
    simulate,
)
from reportgen.analysis.paired import session_interval, verdict_for


def noise(sigma: float, bias: float = 0.0, n: int = 20, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [math.exp(rng.gauss(bias, sigma)) for _ in range(n)]


def test_the_replay_uses_the_gates_own_interval() -> None:
    """The vectorised Hodges-Lehmann estimate and signed-rank interval equal paired.session_interval, row by row."""
    rng = np.random.default_rng(3)
    for n in (6, 7, 11, 20, 33):
        logs = rng.normal(0.0, 0.05, size=(25, n))
        est, low, high = _hl_intervals(logs)
        for row in range(25):
            expected = session_interval([math.exp(x) for x in logs[row]])
            assert (est[row], low[row], high[row]) == pytest.approx(expected[:3], rel=1e-12)


def test_a_constant_ratio_gets_the_verdict_the_gate_gives_it() -> None:
    gate = GateModel(min_sessions=6, budget_sessions=10, threshold_pct=5.0)
    for ratio in (1.06, 1.02, 0.94, 1.049, 1.05):
        shares = simulate([math.log(ratio)] * 8, 0.0, gate, 50, seed=0)
        expected = verdict_for(ratio, ratio, 5.0).value
        assert shares[expected] == 1.0, (ratio, shares)


def test_quiet_unbiased_sessions_resolve_small_changes_and_never_false_alarm() -> None:
    gate = GateModel(min_sessions=6, budget_sessions=17, threshold_pct=5.0)
    quiet = calibrate_variant("v", noise(0.01), gate)
    assert quiet.false_alarm_pct == 0.0
    assert quiet.resolution_pct is not None and 0.5 < quiet.resolution_pct < 3.0
    assert quiet.detectable_slowdown_pct is not None and 5.0 < quiet.detectable_slowdown_pct < 8.0
    assert abs(quiet.aa_change_pct) < 1.0 and quiet.aa_ci_low_pct < 0 < quiet.aa_ci_high_pct
    noisy = calibrate_variant("v", noise(0.04), gate)
    assert noisy.resolution_pct is not None and noisy.resolution_pct > quiet.resolution_pct
    assert noisy.detectable_slowdown_pct is not None and noisy.detectable_slowdown_pct > quiet.detectable_slowdown_pct
    longer = calibrate_variant("v", noise(0.04), GateModel(6, 60, 5.0))
    assert longer.resolution_pct is not None and longer.resolution_pct <= noisy.resolution_pct  # more budget resolves more


def test_a_biased_runner_false_alarms_and_resolves_nothing_below_its_bias() -> None:
    """Identical code measured 7 % faster on one side (the idle-machine bias issue 32 found): at a 5 % threshold every
    replayed A/A pair is a false improvement, and no threshold below the bias decides."""
    biased = calibrate_variant("v", noise(0.01, bias=math.log(0.93)), GateModel(6, 17, 5.0))
    assert biased.false_alarm_pct == 100.0 and biased.aa_change_pct == pytest.approx(-7.0, abs=1.0)
    assert biased.resolution_pct is not None and biased.resolution_pct > 7.0


def test_sessions_far_noisier_than_the_search_resolve_nothing() -> None:
    wild = calibrate_variant("v", noise(0.6), GateModel(6, 8, 5.0))
    assert wild.resolution_pct is None and wild.detectable_slowdown_pct is None


def test_a_calibration_needs_an_interval_worth_of_sessions() -> None:
    with pytest.raises(ValueError, match="at least 6 sessions"):
        calibrate_variant("v", noise(0.01, n=5), GateModel(6, 17, 5.0))


@pytest.mark.parametrize(("budget", "first", "later", "most", "expected"), [
    (150.0, 20.0, 8.0, 60, 17),  # 20 + 16 x 8 = 148 <= 150: a 17th session still starts
    (150.0, 20.0, 10.0, 60, 14),
    (150.0, 160.0, 8.0, 60, 1),  # the first session alone spends the budget
    (600.0, 5.0, 1.0, 60, 60),  # the gate's max_sessions caps it
])
def test_the_budget_holds_the_sessions_the_coordinator_would_start(budget: float, first: float, later: float,
                                                                    most: int, expected: int) -> None:
    assert budget_sessions(budget, first, later, most) == expected


def test_the_replay_waits_for_a_narrow_no_change_as_the_gate_does() -> None:
    """With a precision, a pair that is *no change* but wide goes on; at the budget's last session it stays *no
    change* (inside the threshold), never *inconclusive*; regressions stop as before."""
    logs = [math.log(r) for r in noise(0.03, n=40)]
    plain = simulate(logs, 0.0, GateModel(6, 6, 5.0), 400, seed=2)
    asked = simulate(logs, 0.0, GateModel(6, 6, 5.0, precision_pct=0.5), 400, seed=2)
    assert asked == plain  # only 6 sessions fit: the precision cannot be waited for
    longer = simulate(logs, 0.0, GateModel(6, 40, 5.0, precision_pct=1.0), 400, seed=2)
    quick = simulate(logs, 0.0, GateModel(6, 40, 5.0), 400, seed=2)
    assert longer["no change"] > 0.9 and longer["inconclusive"] <= quick["inconclusive"] + 0.05
    # a change near the threshold: the quick gate takes an early, wide interval inside ±5 % as no change; waiting
    # for a narrow one moves some of those pairs out of it (to inconclusive), as more sessions of a real 4 % would
    near = [math.log(r) for r in noise(0.03, bias=0.04, n=40)]
    waited = simulate(near, 0.0, GateModel(6, 40, 5.0, precision_pct=1.0), 400, seed=2)
    hasty = simulate(near, 0.0, GateModel(6, 40, 5.0), 400, seed=2)
    assert waited["no change"] < hasty["no change"] - 0.05
    assert waited["inconclusive"] > hasty["inconclusive"]
    slow = math.log(1.15)
    assert (simulate(logs, slow, GateModel(6, 40, 5.0, precision_pct=1.0), 400, seed=2)["regression"]
            == simulate(logs, slow, GateModel(6, 40, 5.0), 400, seed=2)["regression"])
