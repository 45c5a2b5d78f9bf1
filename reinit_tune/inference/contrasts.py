"""[LIN] linear contrasts of cell means (claims.md §0.4) and the seeds they need.

A contrast is c = Σ_j w_j s̄_j over cells j (a cell: one condition of one task and size).
Paired, when every seed has a run in every cell on the same data subset: c_i = Σ_j w_j s_ij
per seed, then a one-sample t interval with n − 1 degrees of freedom. Unpaired: Var(c) =
Σ_j w_j² s_j² / n_j with Welch–Satterthwaite degrees of freedom. A threshold claim on a share
of the pretraining gain is a contrast too (``share_weights``), so no ratio interval decides
a verdict. All intervals are two-sided t intervals (003 App. B).

``seeds_to_decide`` and ``stein_seeds`` turn an observed spread into a seed count: the first
for a verdict's "seeds needed", the second Stein's (1945) two-stage rule for a fixed-width
interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from reinit_tune.inference.interval import Interval, no_spread, undefined

# A standard error this small next to the estimate is the rounding of identical runs.
NO_SPREAD_SE = 1e-12


def _t_interval(estimate: float, se: float, df: float, level: float, method: str,
                n: tuple[int, ...]) -> Interval:
    if se <= NO_SPREAD_SE * max(1.0, abs(estimate)):
        # every run alike: a t interval of width 0 would decide on no evidence
        return no_spread(estimate, method, n, level)
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    p = float(2 * stats.t.sf(abs(estimate) / se, df))
    return Interval(estimate, estimate - half, estimate + half, method, n, level, df, p)


def paired_contrast(scores: ArrayLike, weights: Sequence[float],
                    level: float = 0.95) -> Interval:
    """The contrast of ``scores`` (one row per seed, one column per cell, in ``weights``'
    order), paired by seed: a one-sample t interval of the per-seed contrasts."""
    x = np.asarray(scores, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != w.size:
        raise ValueError(f"scores: expected (seeds, {w.size}) values, got shape {x.shape}")
    per_seed = x @ w
    n = per_seed.size
    cells = (n,) * w.size
    if n == 0:
        return undefined(math.nan, "paired t", cells, level)
    estimate = float(per_seed.mean())
    if n < 2:
        return undefined(estimate, "paired t", cells, level)
    se = float(per_seed.std(ddof=1)) / math.sqrt(n)
    return _t_interval(estimate, se, n - 1, level, "paired t", cells)


def unpaired_contrast(samples: Sequence[ArrayLike], weights: Sequence[float],
                      level: float = 0.95) -> Interval:
    """The contrast of independent cells (``samples[j]``: the runs of cell j): Var = Σ w_j²
    s_j²/n_j, Welch–Satterthwaite degrees of freedom; of one cell, the one-sample t
    interval (what Welch's reduces to), labelled so."""
    if len(samples) != len(weights):
        raise ValueError(f"samples: {len(samples)} cells for {len(weights)} weights")
    cells = [np.asarray(s, dtype=np.float64) for s in samples]
    n = tuple(c.size for c in cells)
    used = [(c, w) for c, w in zip(cells, weights, strict=True) if w]
    method = "Welch t" if len(used) > 1 else "one-sample t"
    if any(c.size == 0 for c, _ in used):
        return undefined(math.nan, method, n, level)
    estimate = float(sum(w * c.mean() for c, w in used))
    if any(c.size < 2 for c, _ in used):
        return undefined(estimate, method, n, level)
    parts = np.array([w * w * c.var(ddof=1) / c.size for c, w in used])
    se = math.sqrt(parts.sum())
    sizes = np.array([c.size for c, _ in used])
    denominator = float(np.sum(parts ** 2 / (sizes - 1)))
    df = float(parts.sum() ** 2 / denominator) if denominator > 0 else math.inf
    return _t_interval(estimate, se, df, level, method, n)


def share_weights(tau: float) -> tuple[float, float, float]:
    """Weights on (s̄(0), s̄(k), s̄(L)) of the contrast that decides G(k) ≥ τ, where G(k) =
    (s̄(k) − s̄(0)) / (s̄(L) − s̄(0)): for T = s̄(L) − s̄(0) > 0 it holds exactly where
    s̄(k) − (1 − τ) s̄(0) − τ s̄(L) ≥ 0 (claims.md §0.4)."""
    return (-(1.0 - tau), 1.0, -tau)


def seeds_to_decide(interval: Interval, boundary: float = 0.0,
                    limit: int = 10_000) -> int | None:
    """Runs per cell at which ``interval`` would exclude ``boundary``, if the spread and the
    estimate stayed as observed: the smallest n with t(n−1) · se · √(n_now / n) below
    |estimate − boundary|, ``se`` read off the interval's side that faces the boundary. An
    estimate, not a promise. None where no n up to ``limit`` would do (the estimate sits on
    the boundary) or the interval is undefined."""
    distance = abs(interval.estimate - boundary)
    if not interval.defined or interval.df is None or distance == 0 or interval.n_min < 2:
        return None
    now = interval.n_min
    quantile = float(stats.t.ppf(0.5 + interval.level / 2, interval.df))
    # the side that faces the boundary: a collapse bound widens one side more than the other
    side = interval.estimate - interval.low if boundary < interval.estimate \
        else interval.high - interval.estimate
    se = side / quantile
    if se == 0:
        return now
    for n in range(2, limit + 1):
        if float(stats.t.ppf(0.5 + interval.level / 2, n - 1)) * se * math.sqrt(now / n) \
                < distance:
            return n
    return None


def stein_seeds(first_stage: ArrayLike, half_width: float, level: float = 0.95) -> int:
    """Stein's (1945) two-stage rule: after n0 paired runs with spread s0, N = max(n0,
    ⌈(t(n0−1) · s0 / W)²⌉) runs in all give a mean whose t(n0−1) interval of half-width W
    covers with at least the nominal probability, whatever the true variance."""
    x = np.asarray(first_stage, dtype=np.float64)
    if x.size < 2:
        raise ValueError("stein_seeds: the first stage needs at least 2 runs")
    if half_width <= 0:
        raise ValueError(f"half_width: must be positive, got {half_width}")
    quantile = float(stats.t.ppf(0.5 + level / 2, x.size - 1))
    return max(x.size, math.ceil((quantile * float(x.std(ddof=1)) / half_width) ** 2))
