"""The stopping rule of seeds on demand against its definition: t-interval half-widths
(checked against statsmodels' own interval), the upper confidence limit of σ, the decision
at each stage (a contrast without spread stays open), that only widths decide, the
reported fixed-width interval, and the batched rule a simulation uses."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.weightstats import DescrStatsW

from reinit_tune.errors import InputError
from reinit_tune.inference.sequential import (
    Reason,
    SeedRule,
    decide,
    half_widths,
    planning_half_widths,
    reported_half_widths,
    stopping_points,
    stopping_seeds,
)


def test_half_widths_are_the_t_intervals_of_each_contrast():
    rng = np.random.default_rng(0)
    diffs = rng.normal(0.02, 0.05, size=(7, 3))
    ours = half_widths(diffs)
    for j in range(3):
        low, high = DescrStatsW(diffs[:, j]).tconfint_mean(alpha=0.05)
        assert ours[j] == pytest.approx((high - low) / 2, rel=1e-12)


def test_the_rule_plans_with_the_upper_95_percent_limit_of_sigma():
    rng = np.random.default_rng(1)
    diffs = rng.normal(0, 0.03, size=(6, 2))
    rule = SeedRule(0.01)
    factor = math.sqrt(5 / stats.chi2.ppf(0.05, 5))
    assert planning_half_widths(diffs, rule) == pytest.approx(half_widths(diffs) * factor)
    assert factor > 1  # more seeds where σ is least known


def test_decisions_below_min_between_and_at_max():
    rule = SeedRule(0.01, min_seeds=3, max_seeds=6)
    noisy = np.random.default_rng(2).normal(0, 0.1, size=(6, 2))
    assert decide(noisy[:1], rule) == decide(noisy[:1], rule)
    first = decide(noisy[:2], rule)
    assert (first.wanted, first.reason) == (3, Reason.MIN_SEEDS)
    middle = decide(noisy[:4], rule)
    assert (middle.wanted, middle.reason, middle.closed) == (5, Reason.OPEN, False)
    last = decide(noisy, rule)
    assert (last.wanted, last.reason, last.closed) == (6, Reason.MAX_SEEDS, True)
    same = decide(np.full((3, 2), -0.1), rule)  # no spread: nothing to plan with, open
    assert (same.wanted, same.reason, same.closed) == (4, Reason.NO_SPREAD, False)
    assert same.half_width == pytest.approx(0.0, abs=1e-12) and same.reported == 0.01
    assert decide(np.full((6, 2), -0.1), rule).reason == Reason.MAX_SEEDS
    quiet = decide(np.array([[-0.1, 0.2], [-0.1005, 0.2001], [-0.0995, 0.1999]]), rule)
    assert (quiet.wanted, quiet.reason) == (3, Reason.REACHED)
    assert quiet.half_width < 0.01 and quiet.reported == 0.01  # the fixed width, not less
    assert decide(np.zeros((0, 2)), rule).wanted == 3


def test_only_the_widths_decide_never_the_sign_or_size_of_an_effect():
    rng = np.random.default_rng(3)
    rule = SeedRule(0.02, max_seeds=50)
    for _ in range(20):
        diffs = rng.normal(0, 0.03, size=(50, 3))
        n = stopping_seeds(diffs, rule)
        assert stopping_seeds(-diffs, rule) == n
        assert stopping_seeds(diffs + 0.3, rule) == n
        widths = planning_half_widths(diffs[:n], rule)
        assert n == rule.max_seeds or widths.max() <= rule.target_ci
        if n > rule.min_seeds:  # it did not stop one seed earlier
            assert planning_half_widths(diffs[:n - 1], rule).max() > rule.target_ci


def test_stopping_seeds_refuses_too_few_rows_and_agrees_with_the_batched_rule():
    rule = SeedRule(0.02, min_seeds=3, max_seeds=20)
    rng = np.random.default_rng(4)
    with pytest.raises(ValueError, match="more than the 5 seeds"):
        stopping_seeds(rng.normal(0, 1.0, size=(5, 2)), rule)  # never closes: used to loop
    batch = rng.normal(0, 1, size=(300, 20, 3)) * rng.choice([0.002, 0.01, 0.03, 0.2],
                                                             size=(300, 1, 1))
    batch[:5] = -0.1  # no spread: open to --max-seeds
    expected = [stopping_seeds(d, rule) for d in batch]
    assert list(stopping_points(batch, rule)) == expected
    assert len(set(expected)) > 5 and expected[:5] == [20] * 5
    widths = reported_half_widths(batch[:, :7], rule)
    assert widths.shape == (300, 3) and (widths >= 0.02).all()
    assert np.allclose(widths, np.maximum(0.02, half_widths(batch[:, :7])))
    assert np.allclose(half_widths(batch[7, :7]), half_widths(batch[:, :7])[7])


@pytest.mark.parametrize(("kwargs", "flag"), [
    ({"target_ci": 0}, "--target-ci"), ({"target_ci": float("nan")}, "--target-ci"),
    ({"target_ci": 0.01, "min_seeds": 1}, "--min-seeds"),
    ({"target_ci": 0.01, "min_seeds": 5, "max_seeds": 4}, "--max-seeds"),
])
def test_bad_rules_name_their_flag(kwargs, flag):
    with pytest.raises(InputError, match=flag):
        SeedRule(**kwargs)
