"""The verdict rules of claims.md §0.5."""

from __future__ import annotations

import math

import pytest
from statsmodels.stats.multitest import multipletests

from reinit_tune.inference import (
    Interval,
    Verdict,
    across_tasks,
    bonferroni_level,
    conjunction,
    directional,
    equivalence,
    holm_adjusted,
    holm_rejects,
    non_superiority,
    threshold,
)

S, C, U, N = (Verdict.SUPPORTED, Verdict.CONTRADICTED, Verdict.INCONCLUSIVE,
              Verdict.NOT_ENOUGH_DATA)


def iv(low, high):
    return Interval((low + high) / 2, low, high, "t", (3, 3))


@pytest.mark.parametrize("low,high,positive,want", [
    (0.01, 0.05, True, S), (-0.05, -0.01, True, C), (-0.01, 0.02, True, U),
    (-0.05, -0.01, False, S), (0.01, 0.05, False, C), (math.nan, math.nan, True, N)])
def test_directional(low, high, positive, want):
    assert directional(iv(low, high), positive) is want


def test_threshold_equivalence_non_superiority():
    assert threshold(iv(0.6, 0.7), 0.5) is S and threshold(iv(0.3, 0.4), 0.5) is C
    assert threshold(iv(0.45, 0.55), 0.5) is U and threshold(iv(0.3, 0.4), 0.5, above=False) is S
    assert equivalence(iv(-0.005, 0.008), 0.01) is S
    assert equivalence(iv(0.02, 0.05), 0.01) is C and equivalence(iv(0.0, 0.02), 0.01) is U
    assert non_superiority(iv(-0.1, 0.005), 0.01) is S
    assert non_superiority(iv(0.02, 0.04), 0.01) is C


def test_conjunction_and_tasks():
    assert conjunction([S, S]) is S and conjunction([S, C]) is C and conjunction([S, U]) is U
    assert conjunction([S, N]) is N and conjunction([N, C]) is C
    assert across_tasks([S, S, U]) is S and across_tasks([S, S, C]) is U
    assert across_tasks([C, C, S]) is C and across_tasks([S, U]) is U
    assert across_tasks([N, N]) is N and across_tasks([S, N]) is S


def test_multiplicity():
    assert bonferroni_level(5) == pytest.approx(0.99)
    p = [0.001, 0.02, 0.03, 0.5]
    assert holm_rejects(p) == list(multipletests(p, method="holm")[0])
    assert holm_rejects(p) == [True, False, False, False]


def test_holm_rejects_what_statsmodels_rejects(monkeypatch):
    """Against statsmodels' ``multipletests``: random families, ties, p-values exactly at
    a step's level, and NaN (a test of runs that did not vary: rejects nothing)."""
    import gc

    import numpy as np

    monkeypatch.setattr(gc, "collect", lambda *args: 0)  # the reference's, on every call

    rng = np.random.default_rng(0)
    families = [list(rng.uniform(0, 0.05, m) ** rng.uniform(0.5, 3)) for m in range(1, 40)
                for _ in range(25)]
    families += [[0.01, 0.01, 0.01], [0.025 / 3, 0.025 / 2, 0.025], [0.0125, 0.0125, 0.3],
                 [0.025 / 2, 0.025 / 2 + 1e-12], [1.0, 0.0], [0.0] * 5]
    for p in families:
        expected = multipletests(p, alpha=0.025, method="holm")[0].tolist()
        assert holm_rejects(p) == expected, p
        assert holm_rejects(p, alpha=0.05) == multipletests(p, method="holm")[0].tolist(), p
        assert holm_adjusted(p) == pytest.approx(
            multipletests(p, method="holm")[1].tolist(), rel=1e-12, abs=0), p
    assert holm_rejects([0.001, float("nan"), 0.002]) == [True, False, True]
    assert holm_rejects([]) == []
