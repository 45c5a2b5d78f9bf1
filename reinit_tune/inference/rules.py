"""The verdict rules of claims.md §0.5: how an interval (or several) becomes exactly one of
supported / contradicted / inconclusive / not enough data. One-sided decisions read a
two-sided 95% interval, so each is made at 2.5%."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

import numpy as np

from reinit_tune.inference.interval import Interval


class Verdict(str, Enum):
    SUPPORTED = "supported"
    CONTRADICTED = "contradicted"
    INCONCLUSIVE = "inconclusive"
    NOT_ENOUGH_DATA = "not enough data"

    def __str__(self) -> str:
        return self.value


def _decide(interval: Interval, supported: bool, contradicted: bool) -> Verdict:
    if not interval.defined:
        return Verdict.NOT_ENOUGH_DATA
    if supported:
        return Verdict.SUPPORTED
    return Verdict.CONTRADICTED if contradicted else Verdict.INCONCLUSIVE


def directional(interval: Interval, positive: bool = True) -> Verdict:
    """θ > 0 (θ < 0 with ``positive=False``): supported where the interval lies past 0 on
    that side, contradicted where it lies past 0 on the other."""
    low, high = interval.low, interval.high
    if not positive:
        low, high = -high, -low
    return _decide(interval, low > 0, high < 0)


def threshold(interval: Interval, tau: float, above: bool = True) -> Verdict:
    """θ ≥ τ (θ ≤ τ with ``above=False``)."""
    if above:
        return _decide(interval, interval.low > tau, interval.high < tau)
    return _decide(interval, interval.high < tau, interval.low > tau)


def equivalence(interval: Interval, delta: float) -> Verdict:
    """|θ| ≤ δ by the interval (TOST): supported inside [−δ, δ], contradicted where the
    interval does not touch it."""
    return _decide(interval, -delta <= interval.low and interval.high <= delta,
                   interval.low > delta or interval.high < -delta)


def non_superiority(interval: Interval, delta: float) -> Verdict:
    """θ ≤ δ ("does not improve by more than δ")."""
    return _decide(interval, interval.high < delta, interval.low > delta)


def conjunction(parts: Sequence[Verdict]) -> Verdict:
    """All parts: supported if every part is, contradicted if any part is; a part without
    data leaves the whole without data unless another part already contradicts."""
    if any(p is Verdict.CONTRADICTED for p in parts):
        return Verdict.CONTRADICTED
    if not parts or any(p is Verdict.NOT_ENOUGH_DATA for p in parts):
        return Verdict.NOT_ENOUGH_DATA
    if all(p is Verdict.SUPPORTED for p in parts):
        return Verdict.SUPPORTED
    return Verdict.INCONCLUSIVE


def across_tasks(per_task: Sequence[Verdict]) -> Verdict:
    """A general claim over the tested tasks (those with data): supported if more than half
    are supported and none contradicted, contradicted if more than half are, else
    inconclusive ("mixed across tasks")."""
    tested = [v for v in per_task if v is not Verdict.NOT_ENOUGH_DATA]
    if not tested:
        return Verdict.NOT_ENOUGH_DATA
    supported = sum(v is Verdict.SUPPORTED for v in tested)
    contradicted = sum(v is Verdict.CONTRADICTED for v in tested)
    if supported > len(tested) / 2 and not contradicted:
        return Verdict.SUPPORTED
    if contradicted > len(tested) / 2:
        return Verdict.CONTRADICTED
    return Verdict.INCONCLUSIVE


def bonferroni_level(m: int, level: float = 0.95) -> float:
    """The per-interval level at which m intervals hold together ("for all m cells")."""
    if m < 1:
        raise ValueError(f"m: must be at least 1, got {m}")
    return 1 - (1 - level) / m


def holm_rejects(p_values: Sequence[float], alpha: float = 0.025) -> list[bool]:
    """Holm's step-down test of m hypotheses ("for some cell"): which are rejected at a
    family-wise ``alpha``. The default is claims.md §0.5's one-sided level (its two-sided
    95%: 2.5% a side). A p that is not a number (a test of runs that did not vary) rejects
    nothing.

    Holm (1979): sorted ascending, p_(i) is rejected while every p_(j), j <= i, is at most
    alpha / (m - j + 1). Written out because statsmodels' ``multipletests(method="holm")``,
    the reference its test compares with, runs a full garbage collection on every call:
    0.25 s in a process that has torch and transformers loaded."""
    if not p_values:
        return []
    ps = np.array([p if p == p else 1.0 for p in p_values], dtype=float)
    order = np.argsort(ps, kind="stable")
    within = ps[order] <= alpha / np.arange(len(ps), 0, -1)
    first_kept = len(ps) if within.all() else int(np.argmin(within))
    rejected = np.zeros(len(ps), dtype=bool)
    rejected[order[:first_kept]] = True
    return rejected.tolist()


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, in the order given: sorted ascending, the running maximum of
    (m - j + 1) p_(j), at most 1; a hypothesis is rejected at a family-wise alpha where its
    adjusted p is below alpha. Equal to statsmodels' ``multipletests(method="holm")[1]``
    (see :func:`holm_rejects` for why it is written out)."""
    ps = np.asarray(p_values, dtype=float)
    order = np.argsort(ps, kind="stable")
    stepped = np.maximum.accumulate(ps[order] * np.arange(len(ps), 0, -1))
    adjusted = np.empty(len(ps))
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted.tolist()
