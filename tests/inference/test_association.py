"""[CORR], [VAR], [TREND] against scipy and independent formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from reinit_tune.inference import correlation, trend, variance_ratio

RNG = np.random.default_rng(11)


def test_pearson_interval_is_scipys_fisher_interval():
    x = RNG.normal(size=25)
    y = x + RNG.normal(size=25)
    got = correlation(x, y, "pearson")
    ref = stats.pearsonr(x, y)
    ci = ref.confidence_interval(0.95)
    assert (got.estimate, got.low, got.high, got.p_value) == pytest.approx(
        (ref.statistic, ci.low, ci.high, ref.pvalue))


def test_spearman_interval_uses_the_wider_standard_error():
    x = RNG.normal(size=12)
    y = x + RNG.normal(size=12)
    got = correlation(x, y)
    rho = stats.spearmanr(x, y).statistic
    se = math.sqrt(1.06 / 9)
    assert (got.low, got.high) == pytest.approx(
        (math.tanh(math.atanh(rho) - 1.959964 * se), math.tanh(math.atanh(rho) + 1.959964 * se)),
        rel=1e-5)


def test_variance_ratio_and_its_f_interval():
    a = [RNG.normal(0, 0.1, 10), RNG.normal(5, 0.1, 8)]  # cell means differ: pooled within
    b = [RNG.normal(0, 0.03, 12)]
    got, p_bf = variance_ratio(a, b)
    pooled_a = (a[0].var(ddof=1) * 9 + a[1].var(ddof=1) * 7) / 16
    ratio = pooled_a / b[0].var(ddof=1)
    assert got.estimate == pytest.approx(math.sqrt(ratio))
    assert got.low == pytest.approx(math.sqrt(ratio / stats.f.ppf(0.975, 16, 11)))
    assert got.high == pytest.approx(math.sqrt(ratio / stats.f.ppf(0.025, 16, 11)))
    assert got.low > 1 and p_bf < 0.05


def test_trend_with_one_run_per_level_uses_the_exact_permutation_p():
    levels = [0, 1, 2, 3, 4]
    got = trend(levels, [[0.1], [0.2], [0.3], [0.5], [0.4]])
    assert got.estimate == pytest.approx(0.9)
    # exact: orderings of 5 levels with rho >= 0.9 or <= -0.9
    from itertools import permutations
    rhos = [stats.spearmanr(levels, p).statistic for p in permutations(range(5))]
    assert got.p_value == pytest.approx(np.mean(np.abs(rhos) >= 0.9 - 1e-12))


def test_trend_with_replicates_has_a_bootstrap_interval():
    cells = [RNG.normal(0.1 * k, 0.02, 6) for k in range(6)]
    got = trend(range(6), cells)
    assert got.estimate == pytest.approx(1.0)
    assert got.defined and got.low > 0.7


def test_a_paired_trend_resamples_seeds_jointly_so_a_shared_seed_shift_cancels():
    """Each seed shifts every level alike (its data subset): resampling the seeds jointly
    keeps the ranks of the means; resampling each cell alone breaks them."""
    shift = RNG.normal(0, 0.3, size=8)
    cells = [0.02 * k + shift + RNG.normal(0, 0.002, 8) for k in range(6)]
    paired = trend(range(6), cells, paired=True)
    alone = trend(range(6), cells)
    assert paired.estimate == alone.estimate == pytest.approx(1.0)
    assert paired.low > 0.9 and alone.low < 0.5, (paired, alone)
    with pytest.raises(ValueError, match="one run per seed"):
        trend(range(3), [[0.1, 0.2], [0.3], [0.4, 0.5]], paired=True)
