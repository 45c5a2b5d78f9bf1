"""[LIN] contrasts and seed counts against scipy and statsmodels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW

from reinit_tune.inference import (
    paired_contrast,
    seeds_to_decide,
    share_weights,
    stein_seeds,
    unpaired_contrast,
)

RNG = np.random.default_rng(7)


def test_paired_difference_is_scipys_paired_t_interval():
    a, b = RNG.normal(0.8, 0.05, 12), RNG.normal(0.7, 0.05, 12)
    got = paired_contrast(np.column_stack([a, b]), [1, -1])
    ref = stats.ttest_rel(a, b)
    low, high = ref.confidence_interval(0.95)
    assert got.estimate == pytest.approx(np.mean(a - b))
    assert (got.low, got.high) == pytest.approx((low, high))
    assert got.p_value == pytest.approx(ref.pvalue)
    assert got.df == 11 and got.n == (12, 12)


def test_paired_three_cell_contrast_is_a_one_sample_interval_of_per_seed_contrasts():
    x = RNG.normal([0.5, 0.75, 0.9], 0.04, size=(9, 3))
    w = share_weights(0.5)
    got = paired_contrast(x, w)
    per_seed = x @ np.array(w)
    low, high = DescrStatsW(per_seed).tconfint_mean(0.05)
    assert (got.estimate, got.low, got.high) == pytest.approx((per_seed.mean(), low, high))


def test_unpaired_difference_is_welch():
    a, b = RNG.normal(0.8, 0.02, 5), RNG.normal(0.7, 0.09, 40)
    got = unpaired_contrast([a, b], [1, -1])
    low, high = CompareMeans(DescrStatsW(a), DescrStatsW(b)).tconfint_diff(usevar="unequal")
    assert (got.low, got.high) == pytest.approx((low, high))
    assert got.p_value == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)


def test_unpaired_weighted_contrast_by_hand():
    cells = [RNG.normal(m, s, n) for m, s, n in ((0.5, 0.1, 6), (0.7, 0.05, 9), (0.9, 0.02, 4))]
    w = (-0.5, 1.0, -0.5)
    got = unpaired_contrast(cells, w)
    v = np.array([wi ** 2 * c.var(ddof=1) / c.size for c, wi in zip(cells, w, strict=True)])
    df = v.sum() ** 2 / sum(vi ** 2 / (c.size - 1) for vi, c in zip(v, cells, strict=True))
    half = stats.t.ppf(0.975, df) * math.sqrt(v.sum())
    est = sum(wi * c.mean() for c, wi in zip(cells, w, strict=True))
    assert (got.estimate, got.low, got.high, got.df) == pytest.approx(
        (est, est - half, est + half, df))


def test_share_weights_decide_the_share_threshold():
    # G(k) = (s(k) - s(0)) / (s(L) - s(0)) >= tau  <=>  weighted contrast >= 0 (T > 0)
    for s0, sk, sl, tau in [(0.5, 0.8, 0.9, 0.5), (0.5, 0.6, 0.9, 0.5), (0.6, 0.7, 0.8, 0.8)]:
        c = np.dot(share_weights(tau), (s0, sk, sl))
        assert (c >= 0) == ((sk - s0) / (sl - s0) >= tau)


def test_too_few_runs_give_an_undefined_interval_not_an_error():
    one = paired_contrast([[0.7, 0.6]], [1, -1])
    assert one.estimate == pytest.approx(0.1) and not one.defined
    assert not unpaired_contrast([[0.7], [0.6, 0.5]], [1, -1]).defined
    assert math.isnan(unpaired_contrast([[], [0.6, 0.5]], [1, -1]).estimate)


def test_seeds_to_decide_reaches_the_boundary_it_predicts():
    a = RNG.normal(0.02, 0.05, 4)
    interval = paired_contrast(np.column_stack([a, np.zeros(4)]), [1, -1])
    n = seeds_to_decide(interval)
    assert n is not None and n > 4
    se1 = interval.half_width / stats.t.ppf(0.975, 3) * math.sqrt(4)  # per-seed sd
    assert stats.t.ppf(0.975, n - 1) * se1 / math.sqrt(n) < abs(interval.estimate)
    assert stats.t.ppf(0.975, n - 2) * se1 / math.sqrt(n - 1) >= abs(interval.estimate)


def test_seeds_to_decide_reads_the_side_that_faces_the_boundary():
    """A collapse bound widens an interval's lower side more: [-0.007, +0.126] around
    +0.070 is 0.077 from its estimate toward 0, so at ten runs it does not decide (the mean
    half-width, 0.0665, would say it does)."""
    import dataclasses

    a = RNG.normal(0.07, 0.01, 10)
    plain = paired_contrast(np.column_stack([a, np.zeros(10)]), [1, -1])
    bounded = dataclasses.replace(plain, estimate=0.070, low=-0.007, high=0.126,
                                  method="paired t + collapse bound")
    n = seeds_to_decide(bounded)
    se1 = 0.077 / stats.t.ppf(0.975, plain.df) * math.sqrt(10)
    assert n > 10
    assert stats.t.ppf(0.975, n - 1) * se1 / math.sqrt(n) < 0.070
    assert stats.t.ppf(0.975, n - 2) * se1 / math.sqrt(n - 1) >= 0.070


def test_stein_two_stage_count():
    first = np.array([0.1, 0.3, 0.2, 0.25, 0.15])
    n = stein_seeds(first, 0.05)
    assert n == math.ceil((stats.t.ppf(0.975, 4) * first.std(ddof=1) / 0.05) ** 2)
    assert stein_seeds(first, 10.0) == 5  # never fewer than the first stage
    with pytest.raises(ValueError):
        stein_seeds([0.1], 0.05)
