"""Statistics of per-trial values other than the final dev score (what a trial measures
besides it, read with ``Group.cell(condition, value)``), each turning groups of runs into a
``Finding``.

- ``SeedValue``: [BOOT] over seeds of a per-trial value of one cell (a
  within-model Spearman ρ over layers, ``reinit_tune.verdicts.layers``), or of the ratio of
  two such values' means (002's concentration of attention change in the late layers).
- ``LayerShift``: 000-C14 [BOOT], the mean over layers of the log ratio of the per-layer
  weight distances (``reinit_tune.verdicts.layers``) at two sizes.
- ``EpochGain``: 003-C19, what training past epoch 3 adds, from the dev score after every
  epoch of the same runs (``reinit_tune.verdicts.epochs``).
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
    paired_contrast,
    unpaired_contrast,
)
from reinit_tune.inference.bootstrap import Group as BootGroup
from reinit_tune.verdicts.conditions import Condition, Kept
from reinit_tune.verdicts.epochs import EPOCH_SCORE
from reinit_tune.verdicts.groups import Group
from reinit_tune.verdicts.layers import LAYER_DISTANCE
from reinit_tune.verdicts.rule import Finding, Rule, delta_abs, lacking
from reinit_tune.wording import counted


def _short(group: Group, condition: Kept, value: str, runs: int, family: str) -> Finding:
    """Not enough runs of ``condition`` that measured ``value``."""
    missing = f"{condition.describe(group.num_layers)} with {value} ({counted(runs, 'run')})"
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
            level=level, spread_needed=False)
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
                                      for _, cells in sized], statistic, spread_needed=False)
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
                   f"{e} ({len(d)} runs, {n_min} needed)" for (c, e), d in cells.items()
                   if len(d) < n_min]
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
