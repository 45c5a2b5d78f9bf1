"""[CORR], [VAR] and [TREND] of claims.md §0.4: correlation across units with a Fisher-z
interval, the ratio of pooled within-cell standard deviations with an F interval (and the
Brown–Forsythe test beside it), and the rank trend of cell means over an ordered factor."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from reinit_tune.inference.bootstrap import RESAMPLES
from reinit_tune.inference.interval import Interval, no_spread, undefined


def correlation(x: ArrayLike, y: ArrayLike, method: str = "spearman",
                level: float = 0.95) -> Interval:
    """Pearson's or Spearman's correlation of paired units, scipy's two-sided p (t
    approximation), and a Fisher-z interval: se = 1/√(N−3) for Pearson, √(1.06/(N−3)) for
    Spearman (Fieller, Hartley & Pearson 1957)."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"x and y: {a.shape} vs {b.shape} units")
    if method == "pearson":
        result = stats.pearsonr(a, b)
        spread = 1.0
    elif method == "spearman":
        result = stats.spearmanr(a, b)
        spread = 1.06
    else:
        raise ValueError(f"method: 'pearson' or 'spearman', got {method!r}")
    r, p = float(result.statistic), float(result.pvalue)
    if a.size <= 3 or not math.isfinite(r):
        return Interval(r, math.nan, math.nan, f"{method} (Fisher z)", (a.size,), level,
                        p_value=p)
    z = math.atanh(min(max(r, -1 + 1e-15), 1 - 1e-15))
    half = float(stats.norm.ppf(0.5 + level / 2)) * math.sqrt(spread / (a.size - 3))
    return Interval(r, math.tanh(z - half), math.tanh(z + half), f"{method} (Fisher z)",
                    (a.size,), level, a.size - 2, p)


def variance_ratio(cells_a: Sequence[ArrayLike], cells_b: Sequence[ArrayLike],
                   level: float = 0.95) -> tuple[Interval, float]:
    """σ_a / σ_b, the ratio of the pooled within-cell standard deviations of two sets of
    cells, with the F distribution's interval (df = Σ(n_j − 1) each); and the
    Brown–Forsythe p of equal spread, on the deviations from each cell's median (a few
    diverged runs dominate a variance)."""
    a = [np.asarray(c, dtype=np.float64) for c in cells_a]
    b = [np.asarray(c, dtype=np.float64) for c in cells_b]
    n = tuple(c.size for c in [*a, *b])
    df_a = sum(c.size - 1 for c in a if c.size > 1)
    df_b = sum(c.size - 1 for c in b if c.size > 1)
    if df_a < 1 or df_b < 1:
        return undefined(math.nan, "F", n, level), math.nan
    var_a = sum(c.var(ddof=1) * (c.size - 1) for c in a if c.size > 1) / df_a
    var_b = sum(c.var(ddof=1) * (c.size - 1) for c in b if c.size > 1) / df_b
    residuals_a = np.concatenate([c - np.median(c) for c in a])
    residuals_b = np.concatenate([c - np.median(c) for c in b])
    p = float(stats.levene(residuals_a, residuals_b, center="median").pvalue)
    if var_a == 0 or var_b == 0:  # one side did not vary at all: no F interval
        return no_spread(math.inf if var_a else 0.0 if var_b else math.nan, "F", n,
                         level), p
    ratio = var_a / var_b
    alpha = (1 - level) / 2
    low = ratio / float(stats.f.ppf(1 - alpha, df_a, df_b))
    high = ratio / float(stats.f.ppf(alpha, df_a, df_b))
    return Interval(math.sqrt(ratio), math.sqrt(low), math.sqrt(high), "F", n, level,
                    p_value=float(2 * min(stats.f.cdf(ratio, df_a, df_b),
                                          stats.f.sf(ratio, df_a, df_b)))), p


def trend(levels: Sequence[float], cells: Sequence[ArrayLike], level: float = 0.95,
          resamples: int = RESAMPLES, seed: int = 0, paired: bool = False) -> Interval:
    """Spearman's ρ between an ordered factor (``levels``: k, a layer) and the means of its
    ``cells``. With one run per level the p is the exact permutation p over the levels
    (Monte Carlo past 8! orderings) and there is no interval; else the interval is the
    bootstrap's: seeds resampled jointly across the cells where they are ``paired`` (every
    cell holds one run per seed, in one seed order), else each cell on its own."""
    x = np.asarray(levels, dtype=np.float64)
    arrays = [np.asarray(c, dtype=np.float64) for c in cells]
    n = tuple(c.size for c in arrays)
    if len(arrays) != x.size or any(size == 0 for size in n):
        raise ValueError("trend: one non-empty cell per level")
    means = np.array([c.mean() for c in arrays])
    if float(np.ptp(means)) == 0:  # every level's mean alike: no ranks to correlate
        return no_spread(math.nan, "Spearman", n, level)
    rho = float(stats.spearmanr(x, means).statistic)
    if max(n) == 1:
        # one sample, the levels held fixed: n! pairings (two samples would permute both)
        test = stats.permutation_test(
            (means,), lambda b: stats.spearmanr(x, b).statistic,
            permutation_type="pairings", n_resamples=resamples,
            rng=np.random.default_rng(seed))
        return Interval(rho, math.nan, math.nan, "Spearman (permutation)", n, level,
                        p_value=float(test.pvalue))
    rng = np.random.default_rng(seed)
    if paired:
        if len(set(n)) > 1:
            raise ValueError("trend: paired cells must hold one run per seed each")
        rows = rng.integers(0, n[0], size=(resamples, n[0]))
        draws = np.column_stack([c[rows].mean(axis=1) for c in arrays])
    else:
        draws = np.column_stack([c[rng.integers(0, c.size, size=(resamples, c.size))]
                                 .mean(axis=1) for c in arrays])
    # Spearman per resample: Pearson's r of the ranks, row by row
    ranked = stats.rankdata(draws, axis=1)
    ranked -= ranked.mean(axis=1, keepdims=True)
    centred = stats.rankdata(x) - stats.rankdata(x).mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        rhos = (ranked @ centred) / (np.linalg.norm(ranked, axis=1) * np.linalg.norm(centred))
    rhos = rhos[np.isfinite(rhos)]
    if rhos.size < 0.99 * resamples:  # resamples whose means tie throughout: no ranks
        return undefined(rho, "Spearman (bootstrap)", n, level)
    alpha = (1 - level) / 2
    low, high = np.quantile(rhos, [alpha, 1 - alpha])
    return Interval(rho, float(low), float(high), "Spearman (bootstrap)", n, level)
