"""Statistics: exact where the maths is exact, reproducible where it is resampled."""

from __future__ import annotations

import pytest

from reportgen.analysis.stats import ratio_of_medians, summarize


def test_summary_of_known_samples() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s is not None
    assert (s.n, s.median_us, s.mean_us, s.min_us, s.max_us) == (5, 3.0, 22.0, 1.0, 100.0)
    assert s.stdev_us == pytest.approx((7610 / 4) ** 0.5)  # squared deviations 441+400+361+324+6084
    assert s.ci_low_us <= 3.0 <= s.ci_high_us
    assert summarize([]) is None


def test_constant_samples_give_an_exact_ratio_with_a_zero_width_interval() -> None:
    r = ratio_of_medians((50.0,) * 10, (100.0,) * 20)
    assert r is not None
    assert (r.value, r.ci_low, r.ci_high, r.n_numerator, r.n_denominator) == (0.5, 0.5, 0.5, 10, 20)
    assert r.excludes(1.0) and not r.excludes(0.5)


def test_noisy_overlapping_samples_do_not_exclude_one() -> None:
    a = tuple(100.0 + (i % 7) * 3 for i in range(30))
    b = tuple(101.0 + (i % 5) * 4 for i in range(30))
    r = ratio_of_medians(a, b)
    assert r is not None and r.ci_low < 1.0 < r.ci_high
    assert r == ratio_of_medians(a, b)  # fixed seed: identical on every build


def test_clearly_separated_samples_exclude_one() -> None:
    fast = tuple(10.0 + 0.1 * (i % 3) for i in range(20))
    slow = tuple(30.0 + 0.5 * (i % 4) for i in range(20))
    r = ratio_of_medians(slow, fast)
    assert r is not None and r.ci_low > 2.5 and r.excludes(1.0)


def test_degenerate_inputs() -> None:
    assert ratio_of_medians((), (1.0,)) is None
    assert ratio_of_medians((1.0,), (0.0, 0.0)) is None


def test_too_few_samples_give_no_ratio_and_no_interval() -> None:
    assert ratio_of_medians((1.0, 2.0, 3.0, 4.0), (1.0,) * 10) is None
    assert ratio_of_medians((1.0,) * 5, (2.0,) * 5) is not None
    s4, s5 = summarize([1.0, 2.0, 3.0, 4.0]), summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s4 is not None and not s4.has_interval
    assert s5 is not None and s5.has_interval


def test_row_medians_equal_numpy_median_bit_for_bit() -> None:
    """The bootstrap's fast row median must not change a single interval bound."""
    import numpy as np

    from reportgen.analysis.stats import _row_medians

    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 6, 49, 50):
        m = rng.lognormal(3.0, 1.0, size=(300, n))
        m[:, 0] = m[:, -1]  # ties
        m[:3] = -0.0  # signed zeros: np.median gives +0.0
        ours, numpy = _row_medians(m.copy()), np.median(m, axis=1)
        assert np.array_equal(ours, numpy) and np.array_equal(np.signbit(ours), np.signbit(numpy))
