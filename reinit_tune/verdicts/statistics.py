"""The kinds of statistic a claim declares, each turning groups of runs into a ``Finding``.

- ``Contrast``: [LIN] of cells of one group, paired by seed on the seeds every cell ran,
  else Welch; decided by a ``Rule``; optionally only where the pretraining gain
  F − E is significantly positive (a share is undefined otherwise) and with the share
  displayed beside the contrast that decides it.
- ``SizeContrast``: [LIN] of the same contrast at a scarce and a plentiful size (unpaired:
  the sizes are independent groups), ``small − large``.
- ``ShareShift``: [BOOT] of the difference of a share G(k) between two sizes.
- ``EveryLayer``: one [LIN] per single-layer cell, Bonferroni, "for all cells".
- ``TaskCorrelation``: [CORR] of the permutations' means between two tasks.
- ``SeedValue``: [BOOT] over seeds of a per-trial value of one cell (a
  within-model Spearman ρ over layers, ``reinit_tune.verdicts.layers``), or of the ratio of
  two such values' means (002's concentration of attention change in the late layers).
A new claim of an existing kind is a declaration (``catalog``); a new kind is a class here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reinit_tune.inference import (
    Interval,
    Verdict,
    bonferroni_level,
    cluster_bootstrap,
    conjunction,
    correlation,
    directional,
    holm_rejects,
    paired_contrast,
    trend,
    unpaired_contrast,
    variance_ratio,
)
from reinit_tune.inference.bootstrap import MIN_BOOTSTRAP_N
from reinit_tune.inference.bootstrap import Group as BootGroup
from reinit_tune.verdicts.conditions import Block, Condition, Kept, Layer, Permuted
from reinit_tune.verdicts.depth import blocks, map_layer
from reinit_tune.verdicts.epochs import EPOCH_SCORE
from reinit_tune.verdicts.groups import Group
from reinit_tune.verdicts.layers import LAYER_DISTANCE
from reinit_tune.verdicts.rule import Finding, Rule, by_probability, delta_abs, lacking

Terms = Sequence[tuple[Condition, float]]


def _missing(cells: dict[str, pd.Series], n_min: int,
             minimum: dict[str, int] | None = None) -> tuple[str, ...]:
    minimum = minimum or {}
    return tuple(f"{name} ({len(s)} run{'s' * (len(s) != 1)})" if len(s) else name
                 for name, s in cells.items() if len(s) < max(n_min, minimum.get(name, 0)))


def lin(groups: Sequence[Group], terms: Sequence[Terms], n_min: int,
        level: float = 0.95) -> tuple[Interval | None, tuple[str, ...], str | None]:
    """Σ w · cell mean over the terms of each group (one list of terms per group): paired by
    seed when there is one group and its cells share at least ``n_min`` seeds (on those
    seeds only, where some cell has more: "paired t (common seeds)"), else Welch. Returns
    the interval, or the missing cells and the family that runs them."""
    cells: dict[str, pd.Series] = {}
    weights: dict[str, float] = {}
    minimum: dict[str, int] = {}
    family = None
    for group, group_terms in zip(groups, terms, strict=True):
        for condition, weight in group_terms:
            name = condition.describe(group.num_layers) + (
                f" at {group.size}" if len(groups) > 1 else "")
            cells[name] = group.cell(condition)
            weights[name] = weights.get(name, 0.0) + weight
            minimum[name] = condition.min_runs
            family = family or condition.family
    missing = _missing(cells, n_min, minimum)
    if missing:
        # the family that runs the first cell with no runs at all, else the first short one
        empty = [c for g, ts in zip(groups, terms, strict=True) for c, _ in ts
                 if not len(g.cell(c))]  # noqa: PLC1802
        return None, missing, (empty[0].family if empty else family)
    series = list(cells.values())
    units = [tuple(s.index) for s in series]
    seeds = len(groups) == 1 and not any(isinstance(c, Permuted) for c, _ in terms[0])
    if seeds and all(u == units[0] for u in units):
        matrix = np.column_stack([s.to_numpy() for s in series])
        return paired_contrast(matrix, list(weights.values()), level), (), family
    if seeds and len(common := _common_seeds(series)) >= max(n_min, 2):
        # a cell with a seed the others lack (one extra run) stays paired on the seeds
        # they share: the extra runs are left out rather than the pairing
        matrix = np.column_stack([s[common].to_numpy() for s in series])
        interval = paired_contrast(matrix, list(weights.values()), level)
        return dataclasses.replace(interval, method="paired t (common seeds)"), (), family
    return unpaired_contrast([s.to_numpy() for s in series], list(weights.values()),
                             level), (), family


def _common_seeds(cells: Sequence[pd.Series]) -> pd.Index:
    """The seeds every cell ran, in order."""
    seeds = cells[0].index
    for cell in cells[1:]:
        seeds = seeds.intersection(cell.index)
    return seeds.sort_values()


GAIN: Terms = ((Kept("F"), 1.0), (Kept("E"), -1.0))


@dataclass(frozen=True)
class Contrast:
    """[LIN] Σ w · s̄(cell) in one group, decided by ``rule``. ``needs_gain``: only where
    T = F − E is significantly positive. ``share``: (numerator terms, denominator terms) of
    the ratio displayed beside the contrast (e.g. G(q))."""

    terms: Terms | Callable[[int], Terms]
    rule: Rule = Rule()
    needs_gain: bool = False
    share: tuple[Terms, Terms] | None = None
    bonferroni: int = 1  # the claim's contrasts this one is one of: level 1 - 0.05/m
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [c for c, _ in self.resolve(num_layers)]

    def resolve(self, num_layers: int) -> Terms:
        return self.terms(num_layers) if callable(self.terms) else self.terms

    def evaluate(self, group: Group, n_min: int) -> Finding:
        terms = self.resolve(group.num_layers)
        rule = self.rule.at(group.metric)
        interval, missing, family = lin([group], [terms], n_min,
                                        bonferroni_level(self.bonferroni))
        if interval is None:
            return lacking(missing, family, f" at {group}")
        share = _share(group, self.share, n_min) if self.share else None
        if self.needs_gain:
            gain, _, _ = lin([group], [GAIN], n_min)
            if gain is not None and directional(gain) is not Verdict.SUPPORTED:
                return Finding(Verdict.INCONCLUSIVE, interval, rule=rule, share=share,
                               family=family,
                               reason=("no significant pretraining gain at this size (F - E "
                                       f"{gain.estimate:+.3f}, CI {gain.low:+.3f} to "
                                       f"{gain.high:+.3f}); shares undefined"))
        return Finding(rule.decide(interval), interval, rule=rule, share=share,
                       family=family)


def _share(group: Group, ratio: tuple[Terms, Terms], n_min: int) -> Interval | None:
    """A ratio of two contrasts with its seed-bootstrap interval (claims.md §0.4: [BOOT]
    for display; the verdict uses the linear form)."""
    numerator, denominator = ratio
    conditions = list(dict.fromkeys(c for c, _ in (*numerator, *denominator)))
    cells = [group.cell(c) for c in conditions]
    if any(len(c) < max(n_min, 2) for c in cells):
        return None
    units = [tuple(c.index) for c in cells]
    paired = all(u == units[0] for u in units)
    index = {c: i for i, c in enumerate(conditions)}

    def statistic(means):
        m = means[0]
        top = sum(w * m[index[c]] for c, w in numerator)
        bottom = sum(w * m[index[c]] for c, w in denominator)
        with np.errstate(divide="ignore", invalid="ignore"):
            return top / bottom

    return cluster_bootstrap([BootGroup.of([c.to_numpy() for c in cells], paired)],
                             statistic)


@dataclass(frozen=True)
class SizeContrast:
    """The same contrast at two sizes at least ``ratio``× apart, ``small − large``, by
    unpaired [LIN] (the sizes are independent groups)."""

    terms: Terms | Callable[[int], Terms]
    rule: Rule = Rule()
    ratio: float = 10.0
    scope = "sizes"

    def conditions(self, num_layers: int) -> list[Condition]:
        terms = self.terms(num_layers) if callable(self.terms) else self.terms
        return [c for c, _ in terms]

    def evaluate(self, small: Group, large: Group, n_min: int) -> Finding:
        terms = self.terms(small.num_layers) if callable(self.terms) else self.terms
        negated = [(c, -w) for c, w in terms]
        interval, missing, family = lin([small, large], [terms, negated], n_min)
        if interval is None:
            return lacking(missing, family, f" for {small.task}")
        return Finding(self.rule.decide(interval), interval, rule=self.rule, family=family)


def _without_gain(sizes: Sequence[Group], n_min: int, what: str) -> Finding | None:
    """Inconclusive where the pretraining gain F − E is not significantly positive at one
    of ``sizes`` (a share of it is undefined there), else None."""
    for group in sizes:
        gain, _, _ = lin([group], [GAIN], n_min)
        if gain is None or directional(gain) is not Verdict.SUPPORTED:
            return Finding(Verdict.INCONCLUSIVE, family="progressive",
                           reason=f"no significant pretraining gain at {group.size}; {what}")
    return None


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
            units = [tuple(c.index) for c in cells]
            boot.append(BootGroup.of([c.to_numpy() for c in cells],
                                     all(u == units[0] for u in units)))
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


@dataclass(frozen=True)
class EveryLayer:
    """For every single-layer cell l: F − s(l) − margin·(F − E) < 0 (the drop is below
    ``margin`` of the pretraining gain), Bonferroni over the group's cells. Supported if
    every upper bound is below 0, contradicted if any lower bound is above 0; the estimate
    shown is the largest contrast. ``skip``: (task, layer) pairs the claim excepts."""

    margin: float = 0.1
    skip: tuple[tuple[str, int], ...] = ()
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept("F"), Kept("E"), *(Layer(n) for n in range(1, num_layers + 1))]

    def evaluate(self, group: Group, n_min: int) -> Finding:
        layers = [layer for layer in range(1, group.num_layers + 1)
                  if (group.task, layer) not in self.skip]
        level = bonferroni_level(len(layers))
        intervals, missing = [], []
        for layer in layers:
            terms = ((Kept("F"), 1 - self.margin), (Layer(layer), -1.0),
                     (Kept("E"), self.margin))
            interval, gaps, _ = lin([group], [terms], n_min, level)
            missing += gaps
            if interval is not None:
                intervals.append(interval)
        if missing:
            return lacking(dict.fromkeys(missing), "single_layer", f" at {group}")
        worst = max(intervals, key=lambda i: i.estimate)
        if all(i.defined and i.high < 0 for i in intervals):
            verdict = Verdict.SUPPORTED
        elif any(i.defined and i.low > 0 for i in intervals):
            verdict = Verdict.CONTRADICTED
        else:
            verdict = Verdict.INCONCLUSIVE
        return Finding(verdict, worst, rule=Rule("directional", -1), family="single_layer",
                       reason=f"{len(intervals)} layers, Bonferroni level {level:.4f}; "
                              "the largest contrast shown")


@dataclass(frozen=True)
class TaskCorrelation:
    """[CORR] between two tasks of the permutations' mean scores (the same permutation run
    on both), by each of ``methods``; directional on the coefficient. ``published``: the
    paper's coefficient per (task, task, method)."""

    methods: tuple[str, ...] = ("spearman", "pearson")
    min_units: int = 10
    published: tuple[tuple[str, str, str, float], ...] = ()
    scope = "tasks"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Permuted()]

    def evaluate(self, a: Group, b: Group, method: str) -> Finding:
        x, y = a.cell(Permuted()), b.cell(Permuted())
        common = x.index.intersection(y.index)
        if len(common) < self.min_units:
            need = f"{self.min_units} permutations run on both {a.task} and {b.task}"
            return Finding(Verdict.NOT_ENOUGH_DATA, family="permutations", missing=(need,),
                           reason=f"missing: {need} at {a.size} ({len(common)} found)")
        interval = correlation(x[common].to_numpy(), y[common].to_numpy(), method)
        return Finding(directional(interval), interval, rule=Rule(), family="permutations")

    def published_for(self, a: str, b: str, method: str) -> float | None:
        for x, y, m, value in self.published:
            if m == method and {x, y} == {a, b}:
                return value
        return None


@dataclass(frozen=True)
class All:
    """A conjunction of contrasts in one group (claims.md §0.5): supported if every part is,
    contradicted if any part is; each part's verdict is named in the reason, the first
    part's estimate shown."""

    parts: tuple[tuple[str, Contrast], ...]
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [c for _, part in self.parts for c in part.conditions(num_layers)]

    @property
    def touched(self):
        """Whether a group has the parts' own runs, where the parts say (per-trial values)."""
        checks = [part.touched for _, part in self.parts if hasattr(part, "touched")]
        return (lambda group: any(check(group) for check in checks)) if checks else None

    def evaluate(self, group: Group, n_min: int) -> Finding:
        found = [(name, part.evaluate(group, n_min)) for name, part in self.parts]
        missing = tuple(m for _, f in found for m in f.missing)
        verdict = conjunction([f.verdict for _, f in found])
        named = "; ".join(f"({name}) {f.verdict}"
                          + (f" {f.interval.estimate:+.4f} [{f.interval.low:+.4f}, "
                             f"{f.interval.high:+.4f}]" if f.interval and f.interval.defined
                             else "") for name, f in found)
        # the part shown: the first that decides against, else the first left undecided
        first = next((f for _, f in found if f.verdict is verdict), found[0][1])
        if verdict is Verdict.INCONCLUSIVE:
            first = next(f for _, f in found if f.verdict is Verdict.INCONCLUSIVE)
        reason = ("missing: " + ", ".join(dict.fromkeys(missing)) + f" at {group}"
                  if missing else named)
        return Finding(verdict, first.interval, reason, first.rule, missing=missing,
                       family=first.family)


@dataclass(frozen=True)
class SpreadRatio:
    """[VAR] σ(variant) / σ(standard): the pooled within-cell SDs over seeds of the
    progressive cells k < L (each cell's own mean removed), with the F interval; supported
    if its lower bound is above 1, contradicted if its upper bound is below 1. The
    Brown–Forsythe p (deviations from each cell's median) and the collapsed runs (at the
    dev majority rate or 1 − it) are in the reason: a few diverged runs can make the whole
    difference. At least ``min_cells`` cells with ``n_min`` seeds each."""

    multiplier: float = 5.0
    min_cells: int = 3
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [c for k in range(num_layers)
                for c in (Kept(k, self.multiplier), Kept(k))]

    def evaluate(self, group: Group, n_min: int) -> Finding:
        pairs = [(group.cell(Kept(k, self.multiplier)), group.cell(Kept(k)))
                 for k in range(group.num_layers)]
        both = [(a, b) for a, b in pairs if len(a) >= n_min and len(b) >= n_min]
        if len(both) < self.min_cells:
            need = (f"{self.min_cells} cells k < L with LR x{self.multiplier:g} and x1, "
                    f"{n_min} seeds each ({len(both)} found)")
            return Finding(Verdict.NOT_ENOUGH_DATA, missing=(need,), family="variants",
                           reason=f"missing: {need} at {group}")
        interval, brown_forsythe = variance_ratio([a.to_numpy() for a, _ in both],
                                                  [b.to_numpy() for _, b in both])
        rule = Rule("threshold", 1.0, against=1.0)
        collapsed = ""
        if group.chance is not None:
            runs = np.concatenate([a.to_numpy() for a, _ in both])
            flat = np.isclose(runs, group.chance) | np.isclose(runs, 1 - group.chance)
            collapsed = f"; {int(flat.sum())} of {runs.size} x{self.multiplier:g} runs " \
                        "at the majority rate or 1 - it"
        return Finding(rule.decide(interval), interval, rule=rule, family="variants",
                       reason=(f"sigma(LR x{self.multiplier:g}) / sigma(x1) over {len(both)} "
                               f"cells k < L; Brown-Forsythe p {brown_forsythe:.3g}"
                               + collapsed))


@dataclass(frozen=True)
class AtChance:
    """Every progressive cell k < L equivalent to chance (what predicting the dev majority
    class scores on the group's metric): each |s̄(k) − chance| within δ_abs by its
    Bonferroni interval (over the L cells). Supported if every interval lies inside ±δ_abs
    of chance, contradicted if any lower bound is above chance + δ_abs (that k learns); the
    k farthest above chance is shown (its mean minus chance). ``upto``: the cells k ≤ a
    paper's layer count mapped onto the model (default: every k < L); ``margin``: the
    equivalence margin (default δ_abs); ``contradicts``: whether a k above chance
    contradicts the claim (else it leaves it inconclusive)."""

    upto: int | None = None
    margin: float | None = None
    contradicts: bool = True
    scope = "group"

    def ks(self, num_layers: int) -> range:
        if self.upto is None:
            return range(num_layers)
        return range(map_layer(self.upto, num_layers).layers + 1)

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in self.ks(num_layers)]

    def evaluate(self, group: Group, n_min: int) -> Finding:
        cells = {k: group.cell(Kept(k)) for k in self.ks(group.num_layers)}
        missing = _missing({Kept(k).describe(group.num_layers): c for k, c in cells.items()},
                           n_min)
        if missing:
            return lacking(missing, "progressive", f" at {group}")
        if group.chance is None:
            return Finding(Verdict.NOT_ENOUGH_DATA, missing=("the dev majority-class score",),
                           family="progressive",
                           reason="the runs recorded no majority-class score (chance)")
        delta = self.margin or delta_abs(group.metric)
        level = bonferroni_level(len(cells))
        intervals = {k: unpaired_contrast([c.to_numpy() - group.chance], [1.0], level)
                     for k, c in cells.items()}
        worst_k = max(intervals, key=lambda k: intervals[k].estimate)
        if all(i.defined and -delta <= i.low and i.high <= delta for i in intervals.values()):
            verdict = Verdict.SUPPORTED
        elif self.contradicts and any(i.defined and i.low > delta
                                      for i in intervals.values()):
            verdict = Verdict.CONTRADICTED
        else:
            verdict = Verdict.INCONCLUSIVE
        return Finding(verdict, intervals[worst_k], rule=Rule("equivalence", delta),
                       family="progressive",
                       reason=(f"k = 0..{max(cells)} against chance "
                               f"{group.chance:.4f} within {delta:g}, Bonferroni level "
                               f"{level:.4f}; k={worst_k} (the farthest above) shown"))


@dataclass(frozen=True)
class AcrossSizes:
    """A conjunction of [LIN] contrasts that take cells at a scarce and at a plentiful size
    (unpaired: the sizes are independent groups): each part is (label, the small size's
    terms, the large size's terms), decided by ``rule``; supported if every part is,
    contradicted if any part is, the first deciding part shown."""

    parts: tuple[tuple[str, Callable[[int], Terms], Callable[[int], Terms]], ...]
    rule: Rule = Rule()
    ratio: float = 10.0
    scope = "sizes"

    def conditions(self, num_layers: int) -> list[Condition]:
        return list(dict.fromkeys(c for _, small, large in self.parts
                                  for c, _ in (*small(num_layers), *large(num_layers))))

    def touched(self, group: Group) -> bool:
        """A size takes part with any of the cells (each size reads its own)."""
        return any(group.has(c) for c in self.conditions(group.num_layers))

    def evaluate(self, small: Group, large: Group, n_min: int) -> Finding:
        found, missing, family = [], [], None
        for label, small_terms, large_terms in self.parts:
            interval, gaps, fam = lin([small, large], [small_terms(small.num_layers),
                                                       large_terms(large.num_layers)], n_min)
            missing += gaps
            family = family or fam
            if interval is not None:
                found.append((label, interval, self.rule.decide(interval)))
        if missing:
            missing = list(dict.fromkeys(missing))
            return lacking(missing, family, f" for {small.task}")
        verdict = conjunction([v for _, _, v in found])
        shown = next(((label, i) for label, i, v in found if v is verdict),
                     (found[0][0], found[0][1]))
        named = "; ".join(f"({label}) {v} {i.estimate:+.4f}" for label, i, v in found)
        return Finding(verdict, shown[1], named, self.rule, family=family)


@dataclass(frozen=True)
class Jump:
    """001-C8(b): a jump of more than ``share`` of the pretraining gain between keeping the
    paper's ``before`` and ``after`` layers (of 12, mapped onto the model): [LIN]
    s̄(after) − s̄(before) − share·(s̄(L) − s̄(0)) > 0. Where both map onto one layer of the
    model (9 and 10 of 12 on a 6-layer model) there is no jump to test."""

    before: int
    after: int
    share: float = 0.5
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(map_layer(self.before, num_layers).layers),
                Kept(map_layer(self.after, num_layers).layers), Kept("E"), Kept("F")]

    def evaluate(self, group: Group, n_min: int) -> Finding:
        a = map_layer(self.before, group.num_layers)
        b = map_layer(self.after, group.num_layers)
        if a.layers == b.layers:
            deeper = (f"a model deeper than {group.num_layers} layers ({self.before} and "
                      f"{self.after} of 12 map onto layer {a.layers})")
            return Finding(Verdict.NOT_ENOUGH_DATA, missing=(deeper,),
                           reason=f"{self.before} and {self.after} of 12 layers both map onto "
                                  f"layer {a.layers} of {group.num_layers}: no jump to test")
        return Contrast(((Kept(b.layers), 1.0), (Kept(a.layers), -1.0),
                         (Kept("F"), -self.share), (Kept("E"), self.share))).evaluate(
                             group, n_min)


@dataclass(frozen=True)
class ByTask:
    """One statistic per task (a claim whose direction differs between tasks, such as
    001-C1's "helps CoLA and MRPC, not RTE"): ``parts`` maps a task to its statistic."""

    parts: tuple[tuple[str, Contrast], ...]
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return list(dict.fromkeys(c for _, part in self.parts
                                  for c in part.conditions(num_layers)))

    def evaluate(self, group: Group, n_min: int) -> Finding:
        part = dict(self.parts).get(group.task)
        if part is None:
            return Finding(Verdict.NOT_ENOUGH_DATA, reason=f"the claim says nothing of "
                                                           f"{group.task}")
        return part.evaluate(group, n_min)


BOOT_RESAMPLES = 10_000  # claims.md §0.4 [BOOT]: B = 10,000


def resampled_means(cells: list, rng) -> np.ndarray:
    """``BOOT_RESAMPLES`` bootstrap draws of the cells' means (one column per cell): the seeds
    the cells share resampled together, else each cell on its own."""
    seeds = cells[0].index
    for cell in cells[1:]:
        seeds = seeds.intersection(cell.index)
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


def _boot_group(cells: list[pd.Series]) -> BootGroup:
    units = [tuple(c.index) for c in cells]
    paired = all(u == units[0] for u in units)
    return BootGroup.of([c.to_numpy() for c in cells], paired)


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

        interval = cluster_bootstrap([_boot_group(cs), _boot_group(cl)], statistic)
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
            need = tuple(f"progressive runs of {t} at this size"
                         for t, g in zip((self.task, self.other), pair, strict=True)
                         if g is None)
            return lacking(need, "progressive")
        (ca, ma), (cb, mb) = (curve_cells(g, n_min) for g in pair)
        if ma or mb:
            missing = (*ma, *mb)
            return lacking(missing, "progressive")
        if (flat := _without_gain(pair, n_min, "the normalized curve is undefined")):
            return flat
        n = pair[0].num_layers
        third, two = round(n / 3), round(2 * n / 3)
        middle = cluster_bootstrap(
            [_boot_group(ca)],
            lambda m: shares(m[0])[..., two] - shares(m[0])[..., third] - 1 / 3)
        concave = cluster_bootstrap([_boot_group(ca), _boot_group(cb)],
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
    (a) some step goes down: one-sided paired t of d_k < 0, Holm over the L steps; supported
    if any is rejected, contradicted if every step's lower 95% bound is above −δ_abs.
    (b) the steps differ: one-way ANOVA of the d_k across k (scipy); supported if p < 0.05,
    contradicted if every step's interval of d_k − T/L lies within ±δ_abs. A conjunction."""

    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in range(num_layers + 1)]

    def evaluate(self, group: Group, n_min: int) -> Finding:
        from scipy import stats

        cells, missing = curve_cells(group, n_min)
        seeds = cells[0].index
        for cell in cells[1:]:
            seeds = seeds.intersection(cell.index)
        if not missing and len(seeds) < n_min:
            missing = (f"{n_min} seeds run at every k ({len(seeds)} found)",)
        if missing:
            return lacking(missing, "progressive", f" at {group}")
        matrix = np.column_stack([c[seeds].to_numpy() for c in cells])
        steps = np.diff(matrix, axis=1)  # per seed, one column per step k -> k+1
        delta = delta_abs(group.metric)
        down = [float(stats.ttest_1samp(d, 0.0, alternative="less").pvalue) for d in steps.T]
        intervals = [unpaired_contrast([d], [1.0]) for d in steps.T]
        if any(holm_rejects(down)):
            a = Verdict.SUPPORTED
        elif all(i.defined and i.low > -delta for i in intervals):
            a = Verdict.CONTRADICTED
        else:
            a = Verdict.INCONCLUSIVE
        even = (matrix[:, -1] - matrix[:, 0]) / steps.shape[1]  # T / L per seed
        spread = [unpaired_contrast([d - even], [1.0]) for d in steps.T]
        anova = float(stats.f_oneway(*steps.T).pvalue)
        if anova < 0.05:
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
                               f"ANOVA p {anova:.3g}; largest step "
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
        boot = [_boot_group(cells)]
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


def _normalized(group: Group, condition: Condition) -> np.ndarray | None:
    """The runs of ``condition`` as z = (s − Ē) / (F̄ − Ē) (claims.md [INT]), None where
    the group lacks E, F or the cell, or has no gain."""
    cell, e, f = group.cell(condition), group.cell(Kept("E")), group.cell(Kept("F"))
    if not (len(cell) and len(e) and len(f)) or f.mean() <= e.mean():
        return None
    return (cell.to_numpy() - e.mean()) / (f.mean() - e.mean())


@dataclass(frozen=True)
class BlockProfiles:
    """003-C12 [INT]: a task × block interaction of the normalized localized scores z =
    (s − E_t)/(F_t − E_t), a two-way ANOVA (type II, statsmodels) on the runs, separately
    for the kept-only blocks (P_b) and the reinitialized blocks (R_b), Holm over the two.
    Supported if either interaction's Holm-adjusted p < 0.05; contradicted if every
    interaction effect, max over (t, b) of |z̄_tb − z̄_b|, is within ``margin`` in both; else
    inconclusive. Needs two tasks or more with every block, F and E."""

    margin: float = 0.1
    scope = "task set"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept("F"), Kept("E"), *(Block(b, kept) for b in range(len(blocks(num_layers)))
                                        for kept in (True, False))]

    def evaluate(self, tasks: list[Group], n_min: int) -> Finding:
        import statsmodels.api as sm
        from statsmodels.formula.api import ols
        from statsmodels.stats.multitest import multipletests

        results, missing = [], []
        for kept in (True, False):
            rows = []
            for group in tasks:
                for b in range(len(blocks(group.num_layers))):
                    z = _normalized(group, Block(b, kept))
                    if z is None or len(z) < n_min:
                        missing.append(f"{Block(b, kept).describe(group.num_layers)} for "
                                       f"{group.task}")
                        continue
                    rows += [{"task": group.task, "block": b, "z": v} for v in z]
            frame = pd.DataFrame(rows)
            if missing or frame.empty or frame["task"].nunique() < 2:
                continue
            try:
                table = sm.stats.anova_lm(ols("z ~ C(task) * C(block)", frame).fit(), typ=2)
            except (ValueError, np.linalg.LinAlgError):  # a design the model cannot fit
                continue
            means = frame.groupby(["task", "block"])["z"].mean()
            effect = float((means - means.groupby(level="block").transform("mean")).abs().max())
            results.append((kept, float(table.loc["C(task):C(block)", "PR(>F)"]), effect))
        if missing or len(results) < 2:
            need = tuple(dict.fromkeys(missing)) or ("a second task at this size",)
            return lacking(need, "localized")
        adjusted = multipletests([p for _, p, _ in results], method="holm")[1]
        if (adjusted < 0.05).any():
            verdict = Verdict.SUPPORTED
        elif all(effect <= self.margin for _, _, effect in results):
            verdict = Verdict.CONTRADICTED
        else:
            verdict = Verdict.INCONCLUSIVE
        shown = max(results, key=lambda r: r[2])
        return Finding(verdict, Interval(shown[2], np.nan, np.nan, "ANOVA", (n_min,)),
                       family="localized",
                       reason="; ".join(
                           f"{'kept-only' if kept else 'reinitialized'} blocks: interaction "
                           f"p {p:.3g} (Holm {a:.3g}), effect {effect:.3f}"
                           for (kept, p, effect), a in zip(results, adjusted, strict=True))
                       + f" (the largest effect shown; within {self.margin:g} contradicts)")


@dataclass(frozen=True)
class MiddleShares:
    """003-C11: the middle blocks' normalized effect compared across tasks (independent
    groups, seeds resampled inside each): each part (label, "N" or "S", the task expected
    higher, the task expected lower) is [BOOT] of share(higher) − share(lower) > 0, where
    N_mid = (F − R̄_mid)/(F − E), the loss from reinitializing a middle block, and S_mid =
    (P̄_mid − E)/(F − E), the gain from keeping only one; mid: the two middle blocks of four,
    averaged. A conjunction of the parts."""

    parts: tuple[tuple[str, str, str, str], ...]
    scope = "task set"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept("F"), Kept("E"), *(Block(b, kept) for b in (1, 2)
                                        for kept in (True, False))]

    def evaluate(self, tasks: list[Group], n_min: int) -> Finding:
        by_task = {g.task: g for g in tasks}
        found, missing = [], []
        for label, kind, high, low in self.parts:
            pair = [by_task.get(high), by_task.get(low)]
            if any(g is None for g in pair):
                missing += [f"localized runs of {t} at this size"
                            for t, g in zip((high, low), pair, strict=True) if g is None]
                continue
            kept = kind == "S"
            conditions = (Kept("E"), Kept("F"), Block(1, kept), Block(2, kept))
            cells = [[g.cell(c) for c in conditions] for g in pair]
            short = [f"{c.describe(g.num_layers)} for {g.task}"
                     for g, cs in zip(pair, cells, strict=True)
                     for c, cell in zip(conditions, cs, strict=True) if len(cell) < n_min]
            if short:
                missing += short
                continue

            def share(m, kept=kept):
                e, f, mid = m[0], m[1], (m[2] + m[3]) / 2
                with np.errstate(divide="ignore", invalid="ignore"):
                    return (mid - e) / (f - e) if kept else (f - mid) / (f - e)

            interval = cluster_bootstrap([_boot_group(cs) for cs in cells],
                                         lambda m, share=share: share(m[0]) - share(m[1]))
            found.append((label, interval, directional(interval)))
        if missing:
            need = tuple(dict.fromkeys(missing))
            return lacking(need, "localized")
        verdict = conjunction([v for _, _, v in found])
        shown = next((i for _, i, v in found if v is verdict), found[0][1])
        return Finding(verdict, shown, "; ".join(
            f"({label}) {v} {i.estimate:+.3f}" for label, i, v in found), Rule(),
            family="localized")


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


def _short(group: Group, condition: Kept, value: str, runs: int, family: str) -> Finding:
    """Not enough runs of ``condition`` that measured ``value``."""
    missing = f"{condition.describe(group.num_layers)} with {value} ({runs} runs)"
    return Finding(Verdict.NOT_ENOUGH_DATA, missing=(missing,), family=family,
                   reason=f"missing: {missing} at {group}")


@dataclass(frozen=True)
class SeedValue:
    """The mean over seeds of the per-trial ``value`` of ``condition``'s runs, or, with
    ``over``, the ratio of the two values' means (paired by seed), with the seed bootstrap's
    interval (the delta method's t interval under 5 seeds), decided by ``rule``.
    ``family``: the family whose runs measure ``value``."""

    value: str
    family: str
    rule: Rule = Rule()
    condition: Kept = Kept("F")
    over: str | None = None
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [self.condition]

    def touched(self, group: Group) -> bool:
        return len(group.cell(self.condition, self.value)) > 0

    def evaluate(self, group: Group, n_min: int, level: float = 0.95) -> Finding:
        cells = [group.cell(self.condition, v) for v in (self.value, self.over) if v]
        seeds = cells[0].index
        for cell in cells[1:]:
            seeds = seeds.intersection(cell.index)
        if len(seeds) < n_min:
            return _short(group, self.condition, self.value, len(seeds), self.family)

        def statistic(m):
            if self.over is None:
                return m[0][0]
            with np.errstate(divide="ignore", invalid="ignore"):
                return m[0][0] / m[0][1]

        interval = cluster_bootstrap(
            [BootGroup.of([c[seeds].to_numpy() for c in cells], paired=True)], statistic,
            level=level)
        return Finding(self.rule.decide(interval), interval, rule=self.rule,
                       family=self.family)


@dataclass(frozen=True)
class LayerShift:
    """000-C14 [BOOT]: the mean over layers l of log(d̄_l(large) / d̄_l(small)), d_l the
    per-trial ``value`` of layer l (``layers.LAYER_DISTANCE``: the change of output.dense
    against the pretrained weights) and d̄_l its mean over a size's seeds; seeds resampled
    inside each size, jointly over its layers (one trial measures every layer). > 0: the
    weights change more with more data."""

    value: str = LAYER_DISTANCE
    family: str = "000-distance"
    rule: Rule = Rule()
    condition: Kept = Kept("F")
    ratio: float = 2.0
    scope = "sizes"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [self.condition]

    def touched(self, group: Group) -> bool:
        return len(group.cell(self.condition, self.value.format(1))) > 0

    def _cells(self, group: Group) -> list[pd.Series]:
        """Layer l's values of the seeds that measured every layer."""
        cells = [group.cell(self.condition, self.value.format(layer))
                 for layer in range(1, group.num_layers + 1)]
        seeds = cells[0].index
        for cell in cells[1:]:
            seeds = seeds.intersection(cell.index)
        return [cell[seeds] for cell in cells]

    def evaluate(self, small: Group, large: Group, n_min: int) -> Finding:
        sized = [(group, self._cells(group)) for group in (small, large)]
        for group, cells in sized:
            if len(cells[0]) < n_min:
                return _short(group, self.condition, "per-layer weight distances",
                              len(cells[0]), self.family)
        if any((c <= 0).any() for _, cells in sized for c in cells):
            return Finding(Verdict.INCONCLUSIVE, family=self.family,
                           reason="a weight distance of 0: its log is undefined")

        def statistic(means):
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.mean([np.log(b / a) for a, b in zip(means[0], means[1],
                                                              strict=True)], axis=0)

        interval = cluster_bootstrap([BootGroup.of([c.to_numpy() for c in cells], paired=True)
                                      for _, cells in sized], statistic)
        higher = sum(b.mean() > a.mean() for a, b in zip(sized[0][1], sized[1][1],
                                                         strict=True))
        return Finding(self.rule.decide(interval), interval, rule=self.rule,
                       family=self.family,
                       reason=f"d̄_l larger at {large.size} than at {small.size} in {higher} of "
                              f"{small.num_layers} layers")


@dataclass(frozen=True)
class EpochGain:
    """003-C19 (App. D): what training past epoch 3 adds, inside the epochs study's runs
    (k ∈ {0, L/2, L}, dev metric after every epoch): s(e) − s(3) of the same run, paired by
    seed. Epoch 3 is that of the long run, under its own (longer) learning-rate schedule,
    not a 3-epoch run's: the reason says so.

    - (b) at a scarce size (≤ 1,000 examples, the paper's 500): [LIN] the mean over the k
      of s(5) − s(3); supported if its interval is above 0, contradicted if below δ_abs.
    - (a) above it (the paper's 5k): [EQ] s(10) − s(3) and s(5) − s(3) for each k,
      Bonferroni over the cells; supported if every interval lies inside ±δ_abs,
      contradicted if one lies above δ_abs (a real gain)."""

    value: str = EPOCH_SCORE
    scarce: float = 1_000
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in sorted({0, num_layers // 2, num_layers})]

    def touched(self, group: Group) -> bool:
        """Runs scored after epochs 3 and 5 (a long run evaluated every epoch)."""
        return any(len(self._diffs(group, c, 5)) > 0 for c in self.conditions(group.num_layers))

    def _diffs(self, group: Group, condition: Kept, epoch: int) -> pd.Series:
        """s(epoch) − s(3) of each run of ``condition``, by seed."""
        later = group.cell(condition, self.value.format(epoch))
        third = group.cell(condition, self.value.format(3))
        seeds = later.index.intersection(third.index)
        return later[seeds] - third[seeds]

    def evaluate(self, group: Group, n_min: int) -> Finding:
        delta = delta_abs(group.metric)
        scarce = group.examples <= self.scarce
        epochs = (5,) if scarce else (10, 5)
        conditions = self.conditions(group.num_layers)
        cells = {(c, e): self._diffs(group, c, e) for c in conditions for e in epochs}
        missing = [f"{c.describe(group.num_layers)} with the dev score after epochs 3 and "
                   f"{e} ({len(d)} runs)" for (c, e), d in cells.items() if len(d) < n_min]
        study = f"--variants epochs --epoch-sizes {group.examples:.0f}"
        if missing:
            return dataclasses.replace(lacking(missing, "variants", f" at {group}"),
                                       sizes_flag=study)
        note = "; epoch 3 is the long runs' own, under their learning-rate schedule"
        if scarce:  # (b): pooled over k, paired by seed where every k has the seeds
            interval = mean_of_cells(list(cells.values()), n_min)
            rule = Rule("threshold", 0.0, "against-abs").at(group.metric)
            return Finding(rule.decide(interval), interval, rule=rule, family="variants",
                           reason=f"(b) mean over k of s(5) - s(3){note}", sizes_flag=study)
        level = bonferroni_level(len(cells))
        found = {key: paired_contrast(d.to_numpy()[:, None], [1.0], level)
                 for key, d in cells.items()}
        gains = [key for key, i in found.items() if i.defined and i.low > delta]
        inside = all(i.defined and -delta <= i.low and i.high <= delta
                     for i in found.values())
        verdict = (Verdict.CONTRADICTED if gains else
                   Verdict.SUPPORTED if inside else Verdict.INCONCLUSIVE)
        (c, e), shown = max(found.items(), key=lambda kv: abs(kv[1].estimate))
        what = (f"a gain above {delta:g} at " + ", ".join(
            f"{k.describe(group.num_layers)} epoch {n}" for k, n in gains)) if gains else (
            f"largest |s(e) - s(3)|: {c.describe(group.num_layers)} epoch {e}")
        return Finding(verdict, shown, rule=Rule("equivalence", delta),
                       family="variants", sizes_flag=study,
                       reason=f"(a) s(10) - s(3) and s(5) - s(3) for each k, Bonferroni over "
                              f"{len(cells)}: {what}{note}")


def mean_of_cells(cells: list[pd.Series], n_min: int) -> Interval:
    """[LIN] the mean of several cells of per-seed values: paired by seed over the seeds
    every cell has (where at least ``n_min``), else Welch over the cells."""
    weights = [1 / len(cells)] * len(cells)
    common = pd.concat(cells, axis=1).dropna()
    if len(common) >= n_min:
        return paired_contrast(common.to_numpy(), weights)
    return unpaired_contrast([c.to_numpy() for c in cells], weights)
