"""Statistics of the localized blocks across tasks: keeping only one block of layers (P_b)
or reinitializing only it (R_b), on scores normalized by each task's own pretraining gain,
each turning the groups of every task at one size into a ``Finding``.

- ``BlockProfiles``: 003-C12 [INT], a task × block interaction of the normalized scores
  z = (s − E_t)/(F_t − E_t), by a two-way ANOVA, for the kept-only and the reinitialized
  blocks.
- ``MiddleShares``: 003-C11, [BOOT] of the middle blocks' normalized effect of one task
  against another's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from reinit_tune.inference import (
    Interval,
    Verdict,
    cluster_bootstrap,
    conjunction,
    directional,
    holm_adjusted,
)
from reinit_tune.verdicts.conditions import Block, Condition, Kept
from reinit_tune.verdicts.curves import boot_group
from reinit_tune.verdicts.depth import blocks
from reinit_tune.verdicts.groups import Group
from reinit_tune.verdicts.rule import Finding, Rule, lacking


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
        adjusted = holm_adjusted([p for _, p, _ in results])
        if any(a < 0.05 for a in adjusted):
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
        found, missing, short_tasks = [], [], []
        for label, kind, high, low in self.parts:
            pair = [by_task.get(high), by_task.get(low)]
            if any(g is None for g in pair):
                absent = [t for t, g in zip((high, low), pair, strict=True) if g is None]
                missing += [f"localized runs of {t} at this size" for t in absent]
                short_tasks += absent
                continue
            kept = kind == "S"
            conditions = (Kept("E"), Kept("F"), Block(1, kept), Block(2, kept))
            cells = [[g.cell(c) for c in conditions] for g in pair]
            short = [f"{c.describe(g.num_layers)} for {g.task}"
                     for g, cs in zip(pair, cells, strict=True)
                     for c, cell in zip(conditions, cs, strict=True) if len(cell) < n_min]
            if short:
                missing += short
                short_tasks += [g.task for g, cs in zip(pair, cells, strict=True)
                                if any(len(cell) < n_min for cell in cs)]
                continue

            def share(m, kept=kept):
                e, f, mid = m[0], m[1], (m[2] + m[3]) / 2
                with np.errstate(divide="ignore", invalid="ignore"):
                    return (mid - e) / (f - e) if kept else (f - mid) / (f - e)

            interval = cluster_bootstrap([boot_group(cs) for cs in cells],
                                         lambda m, share=share: share(m[0]) - share(m[1]))
            found.append((label, interval, directional(interval)))
        if missing:  # the localized command skips the stored runs: run each task short
            return lacking(dict.fromkeys(missing), "localized", tasks=short_tasks)
        verdict = conjunction([v for _, _, v in found])
        shown = next((i for _, i, v in found if v is verdict), found[0][1])
        return Finding(verdict, shown, "; ".join(
            f"({label}) {v} {i.estimate:+.3f}" for label, i, v in found), Rule(),
            family="localized")
