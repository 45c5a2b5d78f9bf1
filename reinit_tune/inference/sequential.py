"""When a group of paired runs has enough seeds: the stopping rule of seeds on demand.

A group's seeds are replicates of every condition (surgery) it compares; its contrasts are
each condition minus the group's reference, paired by seed. The rule asks for seeds until
the 95% t-interval of every contrast has a half-width of at most ``W`` (``--target-ci``),
between ``min_seeds`` and ``max_seeds``. It reads only the widths, never the sign or the size
of an effect, so stopping cannot favour an outcome.

The rule is purely sequential (Anscombe 1953; Chow & Robbins 1965, "On the asymptotic theory
of fixed-width sequential confidence intervals for the mean", Ann. Math. Statist. 36): after
each complete seed n >= ``min_seeds``, stop once ``t_{n-1} · σ̂_U / √n <= W`` for every
contrast. With the sample SD in place of ``σ̂_U`` the plain rule under-covers at small n: it
stops when the SD happens to come out small, and the t-interval then computed at that n
covers less than 95% (Woodroofe 1977, Ann. Statist. 5: the deficit is of order 1/n; in
simulation 0.90-0.92 for one contrast per group, 0.93-0.94 for two). So the rule uses
``σ̂_U = S · sqrt((n - 1) / χ²_{1-γ; n-1})``, the upper γ = 0.75 confidence limit of σ, as
sample-size planning from a pilot does (Kieser & Wassmer 1996, Biometrical J. 38): it
demands more seeds exactly where the SD is least known and costs little at large n.
Stein's two-stage procedure (Stein 1945) is exact but plans from the pilot alone with
``t_{m-1}``, about 2x the seeds at a pilot of 5 and 5x at 3. ``benchmarks/bench_seeds.py``
measures the coverage and cost of these rules against fixed designs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
from scipy import stats

from reinit_tune.errors import InputError

LEVEL = 0.95  # the intervals' confidence level, as everywhere else in the product
SIGMA_CONFIDENCE = 0.75  # γ of the upper confidence limit of σ the rule plans with
DEFAULT_MIN_SEEDS = 3
DEFAULT_MAX_SEEDS = 50  # 003 App. B's seeds at 500 examples


@dataclass(frozen=True)
class SeedRule:
    """How many seeds a group gets: enough that every contrast's 95% interval has a
    half-width of at most ``target_ci``, at least ``min_seeds``, at most ``max_seeds``."""

    target_ci: float
    min_seeds: int = DEFAULT_MIN_SEEDS
    max_seeds: int = DEFAULT_MAX_SEEDS
    level: float = LEVEL
    sigma_confidence: float = SIGMA_CONFIDENCE

    def __post_init__(self) -> None:
        if not (isinstance(self.target_ci, int | float) and math.isfinite(self.target_ci)
                and self.target_ci > 0):
            raise InputError(f"--target-ci: must be a positive half-width (in units of the "
                             f"task's metric, e.g. 0.01 for one accuracy point), got "
                             f"{self.target_ci!r}")
        if isinstance(self.min_seeds, bool) or not isinstance(self.min_seeds, int) \
                or self.min_seeds < 2:
            raise InputError(f"--min-seeds: must be at least 2 (an interval needs two seeds), "
                             f"got {self.min_seeds!r}")
        if isinstance(self.max_seeds, bool) or not isinstance(self.max_seeds, int) \
                or self.max_seeds < self.min_seeds:
            raise InputError(f"--max-seeds: must be at least --min-seeds ({self.min_seeds}), "
                             f"got {self.max_seeds!r}")


class Reason(Enum):
    """Why a group has as many seeds as it has, or wants another."""

    MIN_SEEDS = "below --min-seeds"
    OPEN = "interval wider than --target-ci"
    REACHED = "reached --target-ci"
    MAX_SEEDS = "stopped at --max-seeds"

    @property
    def closed(self) -> bool:
        return self in (Reason.REACHED, Reason.MAX_SEEDS)


@dataclass(frozen=True)
class SeedDecision:
    """A group's decision after ``seeds`` complete seeds: ``wanted`` seeds in all (equal to
    ``seeds`` once closed), and its widest current half-width (None below two seeds)."""

    seeds: int
    wanted: int
    reason: Reason
    half_width: float | None

    @property
    def closed(self) -> bool:
        return self.reason.closed


def half_widths(diffs: np.ndarray, level: float = LEVEL) -> np.ndarray:
    """The t-interval half-width of each column's mean (rows: seeds; columns: contrasts):
    ``t_{n-1, (1+level)/2} · S / √n``."""
    n = diffs.shape[0]
    if n < 2:
        return np.full(diffs.shape[1], np.inf)
    return stats.t.ppf((1 + level) / 2, n - 1) * diffs.std(axis=0, ddof=1) / math.sqrt(n)


def planning_half_widths(diffs: np.ndarray, rule: SeedRule) -> np.ndarray:
    """``half_widths`` with the upper ``rule.sigma_confidence`` limit of each column's σ in
    place of its sample SD: what the rule compares with ``target_ci``."""
    n = diffs.shape[0]
    if n < 2:
        return np.full(diffs.shape[1], np.inf)
    inflation = math.sqrt((n - 1) / stats.chi2.ppf(1 - rule.sigma_confidence, n - 1))
    return half_widths(diffs, rule.level) * inflation


def decide(diffs: np.ndarray, rule: SeedRule) -> SeedDecision:
    """The decision for a group whose complete seeds 0..n-1 gave the paired differences
    ``diffs`` (n rows, one column per contrast): stop, or ask for seed n."""
    diffs = np.asarray(diffs, dtype=float)
    if diffs.ndim == 1:  # one contrast
        diffs = diffs[:, None]
    n = diffs.shape[0]
    widest = float(half_widths(diffs, rule.level).max()) if n >= 2 else None
    if n < rule.min_seeds:
        return SeedDecision(n, rule.min_seeds, Reason.MIN_SEEDS, widest)
    if float(planning_half_widths(diffs, rule).max()) <= rule.target_ci:
        return SeedDecision(n, n, Reason.REACHED, widest)
    if n >= rule.max_seeds:
        return SeedDecision(n, n, Reason.MAX_SEEDS, widest)
    return SeedDecision(n, n + 1, Reason.OPEN, widest)


def stopping_seeds(diffs: np.ndarray, rule: SeedRule) -> int:
    """The seeds the rule stops at when seeds arrive one by one as the rows of ``diffs``
    (at least ``rule.max_seeds`` rows): the sequential run of ``decide``, for simulation."""
    n = rule.min_seeds
    while not decide(diffs[:n], rule).closed:
        n += 1
    return n
