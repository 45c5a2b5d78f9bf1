"""[BOOT] against scipy's bootstrap and an independent delta-method computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from reinit_tune.inference import cluster_bootstrap
from reinit_tune.inference.bootstrap import Group

RNG = np.random.default_rng(3)


def test_one_cell_mean_matches_scipys_percentile_bootstrap():
    x = RNG.normal(0.7, 0.05, 30)
    got = cluster_bootstrap([Group.of([x])], lambda m: m[0][0], seed=1)
    ref = stats.bootstrap((x,), np.mean, n_resamples=10_000, method="percentile",
                          rng=np.random.default_rng(2)).confidence_interval
    assert got.estimate == pytest.approx(x.mean())
    assert got.low == pytest.approx(ref.low, abs=0.004)
    assert got.high == pytest.approx(ref.high, abs=0.004)


def test_few_seeds_widen_the_percentile_tails_as_hesterberg_expands_them():
    """At 6 seeds the interval is scipy's percentile bootstrap at the expanded level
    1 − 2 Φ(−√(6/5) t_5,0.975) (about 99.5%), not at 95%; at 30 seeds nearly 95%."""
    x = RNG.normal(0.7, 0.05, 6)
    tail = stats.norm.cdf(-math.sqrt(6 / 5) * stats.t.ppf(0.975, 5))
    got = cluster_bootstrap([Group.of([x])], lambda m: m[0][0], seed=1, resamples=40_000)
    ref = stats.bootstrap((x,), np.mean, n_resamples=40_000, method="percentile",
                          confidence_level=1 - 2 * tail,
                          rng=np.random.default_rng(2)).confidence_interval
    plain = stats.bootstrap((x,), np.mean, n_resamples=40_000, method="percentile",
                            rng=np.random.default_rng(2)).confidence_interval
    width = ref.high - ref.low
    assert got.low == pytest.approx(ref.low, abs=0.03 * width)
    assert got.high == pytest.approx(ref.high, abs=0.03 * width)
    assert width > 1.3 * (plain.high - plain.low)


def test_paired_cells_resample_seeds_jointly():
    # two cells equal up to a constant: paired resampling gives a zero-width difference
    x = RNG.normal(0.7, 0.05, 20)
    got = cluster_bootstrap([Group.of([x, x - 0.1], paired=True)],
                            lambda m: m[0][0] - m[0][1])
    assert (got.low, got.high) == pytest.approx((0.1, 0.1))
    unpaired = cluster_bootstrap([Group.of([x, x - 0.1])], lambda m: m[0][0] - m[0][1])
    assert unpaired.high - unpaired.low > 0.02


def test_share_difference_across_independent_sizes_covers_the_truth():
    # G(q) at two sizes, each group paired over k in (0, q, L); true shares 0.8 and 0.4
    def cells(share, n):
        base = RNG.normal(0, 0.01, n)  # the seed's subset moves every k alike
        return [0.5 + base + RNG.normal(0, 0.01, n),
                0.5 + 0.3 * share + base + RNG.normal(0, 0.01, n),
                0.8 + base + RNG.normal(0, 0.01, n)]

    def share(m, g):
        return (m[g][1] - m[g][0]) / (m[g][2] - m[g][0])

    got = cluster_bootstrap([Group.of(cells(0.8, 20), True), Group.of(cells(0.4, 20), True)],
                            lambda m: share(m, 0) - share(m, 1))
    assert got.low < 0.4 < got.high and got.low > 0.2
    assert got.method == "bootstrap"


def test_low_n_falls_back_to_the_delta_method():
    a, b = np.array([0.6, 0.65, 0.7]), np.array([0.5, 0.52, 0.55, 0.5])
    got = cluster_bootstrap([Group.of([a, b])], lambda m: m[0][0] / m[0][1])
    # delta method by hand for a ratio of independent means
    ma, mb = a.mean(), b.mean()
    var = (1 / mb) ** 2 * a.var(ddof=1) / 3 + (ma / mb ** 2) ** 2 * b.var(ddof=1) / 4
    half = stats.t.ppf(0.975, 2) * math.sqrt(var)
    assert got.method == "delta (low n)"
    assert (got.low, got.high) == pytest.approx((ma / mb - half, ma / mb + half), rel=1e-5)


def test_a_cell_with_one_run_is_undefined():
    got = cluster_bootstrap([Group.of([[0.5], [0.6, 0.7]])], lambda m: m[0][1] - m[0][0])
    assert not got.defined and got.estimate == pytest.approx(0.15)
