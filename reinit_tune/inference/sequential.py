"""When a group of paired runs has enough seeds, and the interval it reports then: the
stopping rule of seeds on demand.

A group's seeds are replicates of every condition (surgery) it compares; its contrasts are
each condition minus the group's reference, paired by seed. The rule asks for seeds until
every contrast's 95% interval has a half-width of at most ``W`` (``--target-ci``), between
``min_seeds`` and ``max_seeds``. It reads the spread of the differences, never their sign or
mean, so a constant added to an effect never changes when a group stops; it does not make
the stop independent of the data (a spread that comes out small by chance stops a group
early, and where a second mode of failed seeds sits far below, a group that has not yet
seen one stops early with its mean off by the failures it missed).

The rule is purely sequential (Anscombe 1953; Chow & Robbins 1965, "On the asymptotic theory
of fixed-width sequential confidence intervals for the mean", Ann. Math. Statist. 36): after
each complete seed n >= ``min_seeds``, stop once ``t_{n-1} · σ̂_U / √n <= W`` for every
contrast, with ``σ̂_U = S · sqrt((n - 1) / χ²_{1-γ; n-1})`` the upper γ = 0.95 confidence
limit of σ, as sample-size planning from a pilot uses it (Kieser & Wassmer 1996, Biometrical
J. 38). The interval a stopped group reports is Chow and Robbins' own fixed-width one,
``mean ± W`` (``mean ± t·S/√n`` where ``max_seeds`` stopped it wider than ``W``): the
t-interval at the stopping seed is narrower than ``W`` exactly when ``S`` came out small,
and covers less than 95% (Woodroofe 1977, Ann. Statist. 5; 0.91-0.93 for one normal
contrast). γ = 0.95 rather than the 0.75 of pilot planning: the larger γ, the later a
group whose spread came out small by chance may stop. With 0.75 the worst contrast of skewed
and failed-seed differences covered 0.89-0.90; with 0.90, 0.92 (skewed, 10% failed 5 σ
below) but 0.894 where 10% of seeds fail 8 W below a quiet contrast; with 0.95 0.933 and
0.911, for about 10% more seeds than 0.90 (at most 19.1 mean seeds where σ <= 1.5 W).

A contrast whose every seed gave the same difference (runs that predict one class on every
seed give the same score) has no spread to plan with and keeps its group open.

``benchmarks/bench_seed_coverage.py`` measures the coverage of the reported interval per
contrast for normal, heavy-tailed, skewed and failed-seed differences across σ from 0.2 W to
5 W (``benchmarks/RESULTS.md``); ``benchmarks/bench_seeds.py`` its cost against fixed designs
on a profile of the committed MiniLM store. Stein's two-stage procedure (Stein 1945) is
exact for its own fixed-width interval but plans from the pilot alone with ``t_{m-1}``:
about 2x the seeds at a pilot of 5, 5x at 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np

from reinit_tune.errors import InputError

LEVEL = 0.95  # the intervals' confidence level, as everywhere else in the product
SIGMA_CONFIDENCE = 0.95  # γ of the upper confidence limit of σ the rule plans with
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
    COLLAPSE = ("interval and the collapse rates its runs leave possible wider than "
                "--target-ci")
    NO_SPREAD = "every seed gave the same difference (runs predicting one class?)"
    REACHED = "reached --target-ci"
    MAX_SEEDS = "stopped at --max-seeds"

    @property
    def closed(self) -> bool:
        return self in (Reason.REACHED, Reason.MAX_SEEDS)


@dataclass(frozen=True)
class SeedDecision:
    """A group's decision after ``seeds`` complete seeds: ``wanted`` seeds in all (equal to
    ``seeds`` once closed), its widest current t half-width (None below two seeds), and the
    widest half-width of the intervals it reports (``reported_half_widths``)."""

    seeds: int
    wanted: int
    reason: Reason
    half_width: float | None
    reported: float | None = None

    @property
    def closed(self) -> bool:
        return self.reason.closed


def half_widths(diffs: np.ndarray, level: float = LEVEL) -> np.ndarray:
    """The t-interval half-width of each contrast's mean: ``t_{n-1, (1+level)/2} · S / √n``.
    ``diffs`` holds seeds on its second-to-last axis and contrasts on its last (leading axes:
    independent groups, as a simulation stacks them)."""
    from scipy import stats  # here: the command's --help never pays for scipy

    n = diffs.shape[-2]
    if n < 2:
        return np.full(diffs.shape[:-2] + diffs.shape[-1:], np.inf)
    return stats.t.ppf((1 + level) / 2, n - 1) * diffs.std(axis=-2, ddof=1) / math.sqrt(n)


def planning_half_widths(diffs: np.ndarray, rule: SeedRule) -> np.ndarray:
    """``half_widths`` with the upper ``rule.sigma_confidence`` limit of each contrast's σ in
    place of its sample SD: what the rule compares with ``target_ci``."""
    from scipy import stats

    n = diffs.shape[-2]
    if n < 2:
        return np.full(diffs.shape[:-2] + diffs.shape[-1:], np.inf)
    inflation = math.sqrt((n - 1) / stats.chi2.ppf(1 - rule.sigma_confidence, n - 1))
    return half_widths(diffs, rule.level) * inflation


def reported_half_widths(diffs: np.ndarray, rule: SeedRule, allowance=0.0) -> np.ndarray:
    """The half-widths of the intervals a stopped group reports, ``max(W, t·S/√n + a)`` per
    contrast: the fixed-width interval of the rule (Chow & Robbins 1965), or the t-interval
    widened by its collapse allowance ``a`` where ``--max-seeds`` stopped the group wider
    than ``W``."""
    return np.maximum(rule.target_ci, half_widths(diffs, rule.level) + allowance)


def _no_spread(diffs: np.ndarray) -> np.ndarray:
    """Contrasts whose seeds all gave one difference (to rounding)."""
    spread = diffs.max(axis=-2) - diffs.min(axis=-2)
    return spread <= 1e-12 * np.maximum(1.0, np.abs(diffs).max(axis=-2))


def decide(diffs: np.ndarray, rule: SeedRule, allowance: np.ndarray | None = None
           ) -> SeedDecision:
    """The decision for a group whose complete seeds 0..n-1 gave the paired differences
    ``diffs`` (n rows, one column per contrast): stop, or ask for seed n. ``allowance``
    (per contrast, in the metric's units): how far the collapse rates the group's runs
    leave possible could move each contrast (``reinit_tune.inference.collapse``), added to
    the planned half-width, so a group where runs collapse stops only once the rates it
    has not excluded fit within ``W`` too."""
    diffs = np.asarray(diffs, dtype=float)
    if diffs.ndim == 1:  # one contrast
        diffs = diffs[:, None]
    n = diffs.shape[0]
    extra = np.zeros(diffs.shape[1]) if allowance is None else np.asarray(allowance, float)
    widest = float(half_widths(diffs, rule.level).max()) if n >= 2 else None
    reported = float(reported_half_widths(diffs, rule, extra).max()) if n >= 2 else None
    if n < rule.min_seeds:
        return SeedDecision(n, rule.min_seeds, Reason.MIN_SEEDS, widest, reported)
    planned = planning_half_widths(diffs, rule)
    within = float((planned + extra).max()) <= rule.target_ci
    if n >= rule.max_seeds:
        if within and not _no_spread(diffs).any():
            return SeedDecision(n, n, Reason.REACHED, widest, reported)
        return SeedDecision(n, n, Reason.MAX_SEEDS, widest, reported)
    if _no_spread(diffs).any():
        return SeedDecision(n, n + 1, Reason.NO_SPREAD, widest, reported)
    if within:
        return SeedDecision(n, n, Reason.REACHED, widest, reported)
    if float(planned.max()) <= rule.target_ci:
        return SeedDecision(n, n + 1, Reason.COLLAPSE, widest, reported)
    return SeedDecision(n, n + 1, Reason.OPEN, widest, reported)


def stopping_seeds(diffs: np.ndarray, rule: SeedRule) -> int:
    """The seeds the rule stops at when seeds arrive one by one as the rows of ``diffs``:
    the sequential run of ``decide``, for simulation. Raises ``ValueError`` where the rule
    wants more seeds than ``diffs`` has rows."""
    diffs = np.asarray(diffs, dtype=float)
    for n in range(rule.min_seeds, min(rule.max_seeds, diffs.shape[0]) + 1):
        if decide(diffs[:n], rule).closed:
            return n
    raise ValueError(f"stopping_seeds: the rule wants more than the {diffs.shape[0]} seeds "
                     f"given (it stops by --max-seeds {rule.max_seeds} at the latest)")


def stopping_points(diffs: np.ndarray, rule: SeedRule) -> np.ndarray:
    """``stopping_seeds`` of many groups at once: ``diffs`` is (groups, seeds, contrasts)
    with at least ``rule.max_seeds`` seeds; the seeds each group stops at, by the same
    ``planning_half_widths`` and spread test as ``decide``."""
    diffs = np.asarray(diffs, dtype=float)
    if diffs.shape[1] < rule.max_seeds:
        raise ValueError(f"stopping_points: {diffs.shape[1]} seeds given, the rule may want "
                         f"{rule.max_seeds} (--max-seeds)")
    stop = np.full(diffs.shape[0], rule.max_seeds)
    open_ = np.ones(diffs.shape[0], dtype=bool)
    for n in range(rule.min_seeds, rule.max_seeds):
        seen = diffs[open_, :n]
        closes = (planning_half_widths(seen, rule).max(axis=-1) <= rule.target_ci) \
            & ~_no_spread(seen).any(axis=-1)
        where = np.flatnonzero(open_)[closes]
        stop[where] = n
        open_[where] = False
        if not open_.any():
            break
    return stop
