"""Statistics of the progressive curve s̄(k), k = 0..L bottom layers kept, most of them of
its normalized form G(k) = (s̄(k) − s̄(0)) / (s̄(L) − s̄(0)) by the seed bootstrap ([BOOT],
B = ``BOOT_RESAMPLES``), each turning groups of runs into a ``Finding``.

- ``ShareShift``: [BOOT] of the difference of a share G(k) between two sizes.
- ``CurveArea``: 000-C3, [BOOT] of the area under G at a plentiful minus a scarce size.
- ``KneeShift``: 000-C5 [KNEE], the fewest layers kept whose G reaches τ, at a scarce
  against a plentiful size.
- ``FlatMiddle``: 000-C4, one task's middle third adds little and its curve is more concave
  than another task's.
- ``UnevenSteps``: 001-C4, the per-seed steps s(k+1) − s(k): some step goes down, and the
  steps differ.
- ``LinearDrop``: 000-C8, G is about a straight line ([EQ] by the bootstrap's interval).
- ``Trend``: [TREND] Spearman's ρ between k and s̄(k).

``resampled_means`` (bootstrap draws of cell means) and ``first_reaching`` (where a curve
reaches τ) serve ``probes`` too; the checks of cells and of the pretraining gain come from
``contrasts``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reinit_tune.inference import (
    Interval,
    Verdict,
    bonferroni_level,
    cluster_bootstrap,
    conjunction,
    directional,
    holm_rejects,
    trend,
    unpaired_contrast,
)
from reinit_tune.inference.bootstrap import MIN_BOOTSTRAP_N
from reinit_tune.verdicts.conditions import Condition, Kept
from reinit_tune.verdicts.contrasts import _common_seeds, _missing, _without_gain, boot_group
from reinit_tune.verdicts.groups import Group
from reinit_tune.verdicts.rule import Finding, Rule, by_probability, delta_abs, lacking


@dataclass(frozen=True)
class ShareShift:
    """[BOOT] G_large(k) − G_small(k), G(k) = (s̄(k) − s̄(0)) / (s̄(L) − s̄(0)), seeds
    resampled inside each size, jointly over its cells where they pair. Only where T is
    significantly positive at both sizes."""

    k: str | int = "q"
    rule: Rule = Rule()
    ratio: float = 10.0
    scope = "sizes"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept("E"), Kept(self.k), Kept("F")]

    def evaluate(self, small: Group, large: Group, n_min: int) -> Finding:
        conditions = (Kept("E"), Kept(self.k), Kept("F"))
        boot, missing = [], []
        for group in (large, small):
            cells = [group.cell(c) for c in conditions]
            missing += [f"{c.describe(group.num_layers)} at {group.size}"
                        for c, s in zip(conditions, cells, strict=True) if len(s) < n_min]
            boot.append(boot_group(cells))
        if missing:
            return lacking(missing, "progressive", f" for {small.task}")
        if (flat := _without_gain((small, large), n_min, "shares undefined")) is not None:
            return flat

        def statistic(means):
            with np.errstate(divide="ignore", invalid="ignore"):
                shares = [(m[1] - m[0]) / (m[2] - m[0]) for m in means]
            return shares[0] - shares[1]

        interval = cluster_bootstrap(boot, statistic)
        return Finding(self.rule.decide(interval), interval, rule=self.rule,
                       family="progressive")


BOOT_RESAMPLES = 10_000  # claims.md §0.4 [BOOT]: B = 10,000


def resampled_means(cells: list, rng) -> np.ndarray:
    """``BOOT_RESAMPLES`` bootstrap draws of the cells' means (one column per cell): the seeds
    the cells share resampled together, else each cell on its own."""
    seeds = _common_seeds(cells)
    if len(seeds) >= 2:
        matrix = np.column_stack([c[seeds].to_numpy() for c in cells])
        return matrix[rng.integers(0, len(seeds), size=(BOOT_RESAMPLES, len(seeds)))].mean(axis=1)
    return np.column_stack([c.to_numpy()[rng.integers(0, len(c), (BOOT_RESAMPLES, len(c)))]
                            .mean(axis=1) for c in cells])


def first_reaching(curve: np.ndarray, tau: float) -> np.ndarray:
    """The first index where each row of ``curve``, normalized from its first value (0) to
    its last (1), reaches ``tau``; rows without a rise give −1 ([KNEE] with τ = 0.8; 0.5:
    where a curve is half way)."""
    span = curve[:, -1:] - curve[:, :1]
    with np.errstate(divide="ignore", invalid="ignore"):
        normalized = (curve - curve[:, :1]) / span
    reached = normalized >= tau
    first = reached.argmax(axis=1)
    return np.where(reached.any(axis=1) & (span[:, 0] > 0), first, -1)


def curve_cells(group: Group, n_min: int) -> tuple[list[pd.Series], tuple[str, ...]]:
    """The progressive cells k = 0..L of ``group`` and the names of those short of runs."""
    cells = [group.cell(Kept(k)) for k in range(group.num_layers + 1)]
    return cells, tuple(Kept(k).describe(group.num_layers) + f" at {group.size}"
                        for k, c in enumerate(cells) if len(c) < n_min)


def _two_curves(small: Group, large: Group, n_min: int, undefined: str
                ) -> tuple[list[pd.Series], list[pd.Series], Finding | None]:
    """The progressive cells k = 0..L at both sizes, and the finding that ends a statistic
    of the two normalized curves early: cells short of runs, or no significant gain at a
    size (``undefined`` says what that leaves undefined)."""
    (cs, ms), (cl, ml) = curve_cells(small, n_min), curve_cells(large, n_min)
    if ms or ml:
        return cs, cl, lacking((*ms, *ml), "progressive", f" for {small.task}")
    return cs, cl, _without_gain((small, large), n_min, undefined)


def shares(means: list) -> np.ndarray:
    """G(k) = (s(k) − s(0)) / (s(L) − s(0)) for k = 0..L from the cell means (floats or
    arrays of resamples), stacked on the last axis."""
    m = np.stack([np.asarray(x, dtype=np.float64) for x in means], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (m - m[..., :1]) / (m[..., -1:] - m[..., :1])


def area(g: np.ndarray) -> np.ndarray:
    """AUC of the normalized progressive curve G over x = k/L in [0, 1] (trapezoid): 0.5
    for a straight line, above it for a concave curve (the early layers give most)."""
    from scipy.integrate import trapezoid  # numpy's own is numpy >= 2 only

    return trapezoid(g, np.linspace(0.0, 1.0, g.shape[-1]), axis=-1)


@dataclass(frozen=True)
class CurveArea:
    """000-C3: [BOOT] AUC(large) − AUC(small) of the normalized progressive curve (seeds
    resampled inside each size); > 0: the curve is less concave with less data. Only where
    the pretraining gain is significantly positive at both sizes."""

    rule: Rule = Rule()
    ratio: float = 10.0
    scope = "sizes"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in range(num_layers + 1)]

    def evaluate(self, small: Group, large: Group, n_min: int) -> Finding:
        cs, cl, short = _two_curves(small, large, n_min, "the normalized curve is undefined")
        if short is not None:
            return short

        def statistic(means):
            return area(shares(means[1])) - area(shares(means[0]))

        interval = cluster_bootstrap([boot_group(cs), boot_group(cl)], statistic)
        return Finding(self.rule.decide(interval), interval, rule=self.rule,
                       family="progressive",
                       reason=f"AUC {float(area(shares([c.mean() for c in cl]))):.3f} at "
                              f"{large.size}, {float(area(shares([c.mean() for c in cs]))):.3f}"
                              f" at {small.size}")


@dataclass(frozen=True)
class KneeShift:
    """000-C5 [KNEE]: k*_τ, the fewest layers kept whose normalized progressive curve G
    reaches ``tau``, at the scarce and the plentiful size, from each bootstrap resample of
    the seeds (inside each size). P(k*_small > k*_large) ≥ 0.95 supports (less data needs
    more bottom layers); P(k*_small < k*_large) ≥ 0.95 contradicts. The knees of the means
    are shown beside the paper's."""

    tau: float = 0.8
    ratio: float = 10.0
    scope = "sizes"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in range(num_layers + 1)]

    def evaluate(self, small: Group, large: Group, n_min: int) -> Finding:
        cs, cl, short = _two_curves(small, large, n_min, "no knee")
        if short is not None:
            return short
        rng = np.random.default_rng(0)
        k_small = first_reaching(resampled_means(cs, rng), self.tau)
        k_large = first_reaching(resampled_means(cl, rng), self.tau)
        later, earlier = float((k_small > k_large).mean()), float((k_small < k_large).mean())
        knees = [int(first_reaching(np.array([[c.mean() for c in cells]]), self.tau)[0])
                 for cells in (cs, cl)]
        n = tuple(len(c) for c in (*cs, *cl))
        return by_probability(later, earlier, n, Interval(later, np.nan, np.nan, "bootstrap P",
                                                          n),
                              f"k*_{self.tau:g}: {knees[0]} at {small.size}, {knees[1]} at "
                              f"{large.size}; P(k* larger with less data) = {later:.3f}, "
                              f"P(smaller) = {earlier:.3f}", "progressive")


@dataclass(frozen=True)
class FlatMiddle:
    """000-C4 at one size, from the groups of every task there: (a) ``task``'s middle third
    adds little, MC = G(2L/3) − G(L/3) < 1/3 (what a straight line gives it), and (b) its
    curve is more concave than ``other``'s, AUC(task) − AUC(other) > 0; each by the seed
    bootstrap (inside each task), a conjunction."""

    task: str = "qnli"
    other: str = "sst2"
    scope = "task set"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in range(num_layers + 1)]

    def evaluate(self, tasks: list[Group], n_min: int) -> Finding:
        by_task = {g.task: g for g in tasks}
        pair = [by_task.get(self.task), by_task.get(self.other)]
        if any(g is None for g in pair):
            absent = tuple(t for t, g in zip((self.task, self.other), pair, strict=True)
                           if g is None)
            return lacking(tuple(f"progressive runs of {t} at this size" for t in absent),
                           "progressive", tasks=absent)
        (ca, ma), (cb, mb) = (curve_cells(g, n_min) for g in pair)
        if ma or mb:
            missing = (*ma, *mb)
            return lacking(missing, "progressive")
        if (flat := _without_gain(pair, n_min, "the normalized curve is undefined")):
            return flat
        n = pair[0].num_layers
        third, two = round(n / 3), round(2 * n / 3)
        middle = cluster_bootstrap(
            [boot_group(ca)],
            lambda m: shares(m[0])[..., two] - shares(m[0])[..., third] - 1 / 3)
        concave = cluster_bootstrap([boot_group(ca), boot_group(cb)],
                                    lambda m: area(shares(m[0])) - area(shares(m[1])))
        found = [(f"a: MC({self.task}) - 1/3 < 0", middle,
                  directional(middle, positive=False)),
                 (f"b: AUC({self.task}) - AUC({self.other}) > 0", concave,
                  directional(concave))]
        verdict = conjunction([v for _, _, v in found])
        shown = next((i for _, i, v in found if v is verdict), middle)
        return Finding(verdict, shown, "; ".join(
            f"({label}) {v} {i.estimate:+.3f}" for label, i, v in found), family="progressive")


@dataclass(frozen=True)
class UnevenSteps:
    """001-C4: the progressive curve is neither monotone nor evenly spaced, from the per-seed
    steps d_k = s(k+1) − s(k) (cells paired by seed: every k needs the same seeds).
    (a) some step goes down: one-sided paired t of d_k < 0, Holm over the L steps at
    claims.md §0.5's one-sided 2.5%; supported if any is rejected, contradicted if every
    step's lower bound, at the Bonferroni level over the L steps, is above −δ_abs.
    (b) the steps differ: claims.md's ANOVA of the d_k across k as a repeated-measures test
    (the steps of one seed are not independent): Hotelling's T² (``steps_differ``) at 5%;
    supported if p < 0.05, contradicted if every step's interval of d_k − T/L, at the
    Bonferroni level, lies within ±δ_abs. A conjunction."""

    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in range(num_layers + 1)]

    def evaluate(self, group: Group, n_min: int) -> Finding:
        from scipy import stats

        cells, missing = curve_cells(group, n_min)
        seeds = _common_seeds(cells)
        if not missing and len(seeds) < n_min:
            missing = (f"{n_min} seeds run at every k ({len(seeds)} found) at {group.size}",)
        if missing:  # each name says its size already
            return lacking(missing, "progressive", f" for {group.task}")
        matrix = np.column_stack([c[seeds].to_numpy() for c in cells])
        steps = np.diff(matrix, axis=1)  # per seed, one column per step k -> k+1
        delta = delta_abs(group.metric)
        down = [float(stats.ttest_1samp(d, 0.0, alternative="less").pvalue) for d in steps.T]
        every = bonferroni_level(steps.shape[1])  # "for all L steps" (claims.md §0.5)
        intervals = [unpaired_contrast([d], [1.0], every) for d in steps.T]
        if any(holm_rejects(down)):
            a = Verdict.SUPPORTED
        elif all(i.defined and i.low > -delta for i in intervals):
            a = Verdict.CONTRADICTED
        else:
            a = Verdict.INCONCLUSIVE
        even = (matrix[:, -1] - matrix[:, 0]) / steps.shape[1]  # T / L per seed
        spread = [unpaired_contrast([d - even], [1.0], every) for d in steps.T]
        anova = steps_differ(steps)
        if anova is not None and anova < 0.05:
            b = Verdict.SUPPORTED
        elif all(i.defined and -delta <= i.low and i.high <= delta for i in spread):
            b = Verdict.CONTRADICTED
        else:
            b = Verdict.INCONCLUSIVE
        lowest = int(np.argmin(steps.mean(axis=0)))
        verdict = conjunction([a, b])
        return Finding(verdict, intervals[lowest], rule=Rule("directional", -1),
                       family="progressive",
                       reason=(f"(a: a step goes down) {a}, lowest step k={lowest}->{lowest + 1} "
                               f"shown, Holm over {steps.shape[1]}; (b: the steps differ) {b}, "
                               + (f"Hotelling T² p {anova:.3g}" if anova is not None else
                                  f"Hotelling's T² needs more than {steps.shape[1] - 1} "
                                  "seeds")
                               + "; largest step "
                               f"{steps.mean(axis=0).max():+.3f} of T "
                               f"{float(np.mean(matrix[:, -1] - matrix[:, 0])):+.3f}"))


@dataclass(frozen=True)
class LinearDrop:
    """000-C8: the normalized progressive curve is about a straight line, (a) |AUC − 0.5|
    ≤ ``margin``, and (b) the first third of the layers gives about what the middle third
    gives, |G(L/3) − (G(2L/3) − G(L/3))| ≤ ``margin``: each [EQ] by the seed bootstrap's
    interval; a conjunction."""

    margin: float = 0.1
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in range(num_layers + 1)]

    def evaluate(self, group: Group, n_min: int) -> Finding:
        cells, missing = curve_cells(group, n_min)
        if missing:
            return lacking(missing, "progressive", f" for {group.task}")
        third, two = round(group.num_layers / 3), round(2 * group.num_layers / 3)
        boot = [boot_group(cells)]
        rule = Rule("equivalence", self.margin)
        parts = (("a: AUC - 0.5", lambda m: area(shares(m[0])) - 0.5),
                 (f"b: G({third}) - (G({two}) - G({third}))",
                  lambda m: 2 * shares(m[0])[..., third] - shares(m[0])[..., two]))
        found = [(label, cluster_bootstrap(boot, f)) for label, f in parts]
        verdicts = [rule.decide(i) for _, i in found]
        verdict = conjunction(verdicts)
        shown = next((i for (_, i), v in zip(found, verdicts, strict=True) if v is verdict),
                     found[0][1])
        named = "; ".join(f"({label}) {v} {i.estimate:+.3f} [{i.low:+.3f}, {i.high:+.3f}]"
                          for (label, i), v in zip(found, verdicts, strict=True))
        return Finding(verdict, shown, named, rule, family="progressive")


@dataclass(frozen=True)
class Trend:
    """[TREND] Spearman's ρ between k and s̄(k) over every progressive k = 0..L, with the
    seed bootstrap's interval; directional on ρ."""

    rule: Rule = Rule()
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in range(num_layers + 1)]

    def evaluate(self, group: Group, n_min: int) -> Finding:
        ks = range(group.num_layers + 1)
        cells = {Kept(k).describe(group.num_layers): group.cell(Kept(k)) for k in ks}
        missing = _missing(cells, n_min)
        if missing:
            return lacking(missing, "progressive", f" at {group}")
        series = list(cells.values())
        common = _common_seeds(series)
        if len(common) >= n_min:  # the seeds every k ran, resampled together
            interval = trend(list(ks), [c[common].to_numpy() for c in series], paired=True)
        else:
            interval = trend(list(ks), [c.to_numpy() for c in series])
        if min(interval.n) < MIN_BOOTSTRAP_N:  # a rank statistic has no delta method
            return Finding(Verdict.INCONCLUSIVE,
                           dataclasses.replace(interval, method=interval.method + " (low n)"),
                           rule=self.rule, family="progressive", min_runs=MIN_BOOTSTRAP_N,
                           reason=(f"low n: {min(interval.n)} seeds in a cell, under the "
                                   f"{MIN_BOOTSTRAP_N} a bootstrap interval of Spearman's rho "
                                   "needs (claims.md §0.4)"))
        return Finding(self.rule.decide(interval), interval, rule=self.rule,
                       family="progressive")


def steps_differ(steps: np.ndarray) -> float | None:
    """The p value that the steps (columns) differ in their means, the seeds (rows) paired:
    Hotelling's T² that the L − 1 differences of each step from the last have mean 0, the
    repeated-measures test that assumes nothing of how one seed's steps covary (adjacent
    steps share a cell, so they are negatively correlated, which Friedman's and a one-way
    ANOVA's nulls ignore: they decided falsely 6-12% of the time at 5%;
    ``benchmarks/bench_verdict_levels``). Exact under normal run noise (the MANOVA approach
    to repeated measures: O'Brien & Kaiser 1985, Psychol. Bull. 97; statsmodels). 1 where
    nothing varies; None where the seeds are too few for it (at most L − 1)."""
    from statsmodels.stats.multivariate import test_mvmean

    if steps.shape[1] < 2 or float(np.ptp(steps - steps[:, -1:])) == 0:
        return 1.0
    contrasts = steps[:, :-1] - steps[:, -1:]
    if steps.shape[0] <= contrasts.shape[1]:
        return None
    with np.errstate(all="ignore"):
        try:
            p = float(test_mvmean(contrasts).pvalue)
        except np.linalg.LinAlgError:  # steps that move together exactly: no spread to test
            return 1.0
    return p if p == p else 1.0
