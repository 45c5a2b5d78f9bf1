"""Linear contrasts of cell means ([LIN], claims.md §0.4), the kind of statistic most claims
declare, each turning groups of runs into a ``Finding``.

- ``Contrast``: [LIN] of cells of one group, paired by seed on the seeds every cell ran,
  else Welch; decided by a ``Rule``; optionally only where the pretraining gain
  F − E is significantly positive (a share is undefined otherwise) and with the share
  displayed beside the contrast that decides it.
- ``SizeContrast``: [LIN] of the same contrast at a scarce and a plentiful size (unpaired:
  the sizes are independent groups), ``small − large``.
- ``EveryLayer``: one [LIN] per single-layer cell, Bonferroni, "for all cells".
- ``All``: a conjunction of contrasts in one group (claims.md §0.5).
- ``AtChance``: every progressive cell k < L within δ_abs of chance, Bonferroni.
- ``AcrossSizes``: a conjunction of [LIN] contrasts that take cells at a scarce and at a
  plentiful size.
- ``Jump``: 001-C8(b), a jump of more than a share of the pretraining gain between keeping
  the paper's ``before`` and ``after`` layers.
- ``ByTask``: one contrast per task.

``lin`` computes each contrast; ``GAIN`` is the pretraining gain F − E, and
``_without_gain`` the finding of a statistic left undefined where that gain is not
significantly positive (``curves`` asks it too).

The other kinds of statistic a claim declares live beside this one: ``curves`` (the
progressive curve, mostly by the seed bootstrap), ``localized`` (the localized blocks
across tasks), ``spreads`` (how scores spread and correlate, not their means),
``trial_values`` (per-trial values other than the final score), ``probes`` and ``pairs``.
A new claim of an existing kind is a declaration (``catalog``); a new kind is a class in
the module of its kind.
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
    collapse,
    conjunction,
    directional,
    paired_contrast,
    unpaired_contrast,
)
from reinit_tune.inference.bootstrap import Group as BootGroup
from reinit_tune.verdicts.conditions import Condition, Kept, Layer, Permuted
from reinit_tune.verdicts.depth import map_layer
from reinit_tune.verdicts.groups import Group
from reinit_tune.verdicts.rule import Finding, Rule, delta_abs, lacking
from reinit_tune.wording import counted

Terms = Sequence[tuple[Condition, float]]


def _missing(cells: dict[str, pd.Series], n_min: int,
             minimum: dict[str, int] | None = None) -> tuple[str, ...]:
    minimum = minimum or {}
    need = {name: max(n_min, minimum.get(name, 0)) for name in cells}
    return tuple(f"{name} ({counted(len(s), 'run')}, {need[name]} needed)"
                 if len(s) else name
                 for name, s in cells.items() if len(s) < need[name])


def lin(groups: Sequence[Group], terms: Sequence[Terms], n_min: int,
        level: float = 0.95) -> tuple[Interval | None, tuple[str, ...], str | None]:
    """Σ w · cell mean over the terms of each group (one list of terms per group): paired by
    seed when there is one group and its cells share at least ``n_min`` seeds (on those
    seeds only, where some cell has more: "paired t (common seeds)"), else Welch; in a group
    where runs collapse, widened by the collapse bound (``collapse.bound``). Returns the
    interval, or the missing cells and the family that runs them."""
    cells: dict[str, pd.Series] = {}
    weights: dict[str, float] = {}
    minimum: dict[str, int] = {}
    chance: dict[str, float | None] = {}
    owner: dict[str, Group] = {}
    family = None
    for group, group_terms in zip(groups, terms, strict=True):
        for condition, weight in group_terms:
            name = condition.describe(group.num_layers) + (
                f" at {group.size}" if len(groups) > 1 else "")
            cells[name] = group.cell(condition)
            weights[name] = weights.get(name, 0.0) + weight
            minimum[name] = condition.min_runs
            chance[name] = group.chance
            owner[name] = group
            family = family or condition.family
    missing = _missing(cells, n_min, minimum)
    if missing:
        # the family that runs the first cell with no runs at all, else the first short one
        runs = [(c, len(g.cell(c))) for g, ts in zip(groups, terms, strict=True)
                for c, _ in ts]
        empty = [c for c, n in runs if n == 0]
        short = [c for c, n in runs if n < max(n_min, c.min_runs)]
        return None, missing, (empty or short)[0].family
    interval = _contrast(groups, terms, cells, weights, n_min, level)
    # a cell is bounded where its group may collapse: a surgery of it shows a collapse, or
    # it is small data (a mode no run has shown); a cell read here that shows one (a
    # permuted cell's orders, one run each, show it only together) bounds every cell
    shown = collapse.collapses_in([c.to_numpy() for c in cells.values()], groups[0].chance,
                                  groups[0].metric)
    bounded = [name for name in cells if shown or _at_risk(owner[name])]
    if bounded:
        interval = collapse.bound(interval, [(cells[name].to_numpy(), weights[name],
                                              chance[name]) for name in bounded],
                                  groups[0].metric)
    return interval, (), family


def _at_risk(group: Group) -> bool:
    """Whether a collapse mode may move ``group``'s cells: one shows in it, or one may exist
    unseen (``Group.unseen_collapse``)."""
    return _collapses(group) or group.unseen_collapse


def _collapses(group: Group) -> bool:
    """Whether collapse is a mode of ``group`` (``collapse.collapses_in``), once a group."""
    if "collapses" not in group._cells:
        group._cells["collapses"] = collapse.collapses_in(
            (values["score"] for _, values in group.surgeries.values()), group.chance,
            group.metric)
    return group._cells["collapses"]


def _contrast(groups: Sequence[Group], terms: Sequence[Terms], cells: dict[str, pd.Series],
              weights: dict[str, float], n_min: int, level: float) -> Interval:
    """The t interval of Σ w · cell mean: paired by seed where one group's cells share
    their seeds (or enough of them), else Welch."""
    series = list(cells.values())
    units = [tuple(s.index) for s in series]
    seeds = len(groups) == 1 and not any(isinstance(c, Permuted) for c, _ in terms[0])
    if seeds and all(u == units[0] for u in units):
        matrix = np.column_stack([s.to_numpy() for s in series])
        return paired_contrast(matrix, list(weights.values()), level)
    if seeds and len(common := _common_seeds(series)) >= max(n_min, 2):
        # a cell with a seed the others lack (one extra run) stays paired on the seeds
        # they share: the extra runs are left out rather than the pairing
        matrix = np.column_stack([s[common].to_numpy() for s in series])
        interval = paired_contrast(matrix, list(weights.values()), level)
        return dataclasses.replace(interval, method="paired t (common seeds)")
    return unpaired_contrast([s.to_numpy() for s in series], list(weights.values()), level)


def _common_seeds(cells: Sequence[pd.Series]) -> pd.Index:
    """The seeds every cell ran, in order."""
    seeds = cells[0].index
    for cell in cells[1:]:
        seeds = seeds.intersection(cell.index)
    return seeds.sort_values()


def boot_group(cells: Sequence[pd.Series]) -> BootGroup:
    """The cells of one group for the seed bootstrap: paired by seed where every cell ran
    the same seeds; paired on the seeds they share where a cell has runs of others (one
    extra run must not cost the pairing, claims.md §0.4); resampled cell by cell only
    where fewer than two seeds are shared."""
    units = [tuple(c.index) for c in cells]
    if all(u == units[0] for u in units):
        return BootGroup.of([c.to_numpy() for c in cells], paired=True)
    seeds = _common_seeds(cells)
    if len(seeds) >= 2:
        return BootGroup.of([c[seeds].to_numpy() for c in cells], paired=True, common=True)
    return BootGroup.of([c.to_numpy() for c in cells])


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
        if self.needs_gain:
            gain, _, _ = lin([group], [GAIN], n_min)
            if gain is not None and directional(gain) is not Verdict.SUPPORTED:
                # the share's denominator is not known to be positive: none is shown
                ci = ("no spread: every run alike" if gain.spreadless else
                      f"CI {gain.low:+.3f} to {gain.high:+.3f}")
                return Finding(Verdict.INCONCLUSIVE, interval, rule=rule,
                               family=family, undecided=(gain, 0.0),
                               reason=("no significant pretraining gain at this size (F - E "
                                       f"{gain.estimate:+.3f}, {ci}); shares undefined"))
        share = _share(group, self.share, n_min) if self.share else None
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
    index = {c: i for i, c in enumerate(conditions)}

    def statistic(means):
        m = means[0]
        top = sum(w * m[index[c]] for c, w in numerator)
        bottom = sum(w * m[index[c]] for c, w in denominator)
        with np.errstate(divide="ignore", invalid="ignore"):
            return top / bottom

    return cluster_bootstrap([boot_group(cells)], statistic)


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
                           undecided=None if gain is None else (gain, 0.0),
                           reason=f"no significant pretraining gain at {group.size}; {what}")
    return None


@dataclass(frozen=True)
class EveryLayer:
    """For every single-layer cell l: F − s(l) − margin·(F − E) < 0 (the drop is below
    ``margin`` of the pretraining gain), Bonferroni over the group's cells. Supported if
    every upper bound is below 0, contradicted if any lower bound is above 0; the interval
    shown is the one that decides (contradicted: the highest lower bound; supported: the
    highest upper bound), else the largest contrast. ``skip``: (task, layer) pairs the
    claim excepts."""

    margin: float = 0.1
    skip: tuple[tuple[str, int], ...] = ()
    scope = "group"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept("F"), Kept("E"), *(Layer(n) for n in range(1, num_layers + 1))]

    def evaluate(self, group: Group, n_min: int) -> Finding:
        layers = [layer for layer in range(1, group.num_layers + 1)
                  if (group.task, layer) not in self.skip]
        level = bonferroni_level(len(layers))
        found, missing = {}, []
        for layer in layers:
            terms = ((Kept("F"), 1 - self.margin), (Layer(layer), -1.0),
                     (Kept("E"), self.margin))
            interval, gaps, _ = lin([group], [terms], n_min, level)
            missing += gaps
            if interval is not None:
                found[layer] = interval
        if missing:
            return lacking(dict.fromkeys(missing), "single_layer", f" at {group}")
        intervals = list(found.values())
        if all(i.defined and i.high < 0 for i in intervals):
            verdict, key, which = Verdict.SUPPORTED, (lambda i: i.high), "highest upper bound"
        elif any(i.defined and i.low > 0 for i in intervals):
            verdict, key, which = (Verdict.CONTRADICTED, lambda i: i.low if i.defined
                                   else -np.inf, "highest lower bound")
        else:
            verdict, key, which = Verdict.INCONCLUSIVE, (lambda i: i.estimate), "largest"
        layer = max(found, key=lambda n: key(found[n]))
        return Finding(verdict, found[layer], rule=Rule("directional", -1),
                       family="single_layer",
                       reason=f"{len(intervals)} layers, Bonferroni level {level:.4f}; shown: "
                              f"layer {layer}, the contrast with the {which}")


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
                       family=first.family, undecided=first.undecided,
                       min_runs=first.min_runs)


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
