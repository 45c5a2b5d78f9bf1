"""Collapsed runs: finetuning runs that ended at (or below) what predicting the dev
majority class scores, counted per cell of a verdict.

A run is **collapsed** when its score is at most its metric's majority-class baseline for
its task (``majority_score``, stored with every trial: the majority label's share for
accuracy, 0 for MCC and correlations) plus ``tasks.SCORE_TOLERANCE``: Mosbach, Andriushchenko &
Klakow (2021, "On the Stability of Fine-tuning BERT", §4) call a run *failed* when its
final accuracy is at most the majority classifier's, and find 10-30% of runs so on RTE,
MRPC and CoLA with BERT's default recipe; Dodge et al. (2020) see the same degenerate runs.
Where a correlation task records no finite majority score (a constant prediction has no
correlation), 0 is its baseline.

claims.md §0.6 keeps collapsed runs (they are real outcomes at small data, and the papers'
means include them) and asks every cell to say "k of n runs collapsed" with an exact
binomial interval (Clopper-Pearson). A cell whose runs sit at chance as a whole (its median
within δ_chance of the baseline, claims.md §0.5: 0.02 for accuracy, 0.05 for MCC and
correlations; the fully reinitialized model at small data) is at chance, not a mixture. A
cell whose median is above that while some of its runs collapsed is a **mixture** of two
kinds of run: the t and bootstrap intervals the verdicts draw assume one, and on a mixture
at ten seeds or fewer they do not hold their level (a group that has not yet shown a
collapse is biased by rate x gap).

**The collapse bound** (``bound``) keeps the papers' estimand, the mean over all runs, and
widens a linear contrast's t interval by what the collapse rates the runs leave possible
could move each cell's mean: a cell's mean over all runs is ``(1 - p) * trained + p *
level`` (its trained runs' mean, its collapsed runs' level), so a true rate anywhere in the
Clopper-Pearson 95% interval of its observed k of n moves it by up to ``(upper - k/n) *
gap`` down and ``(k/n - lower) * gap`` up, where ``gap`` is trained - level. It applies to
every cell that trains in a group where collapse is a mode (``collapses_in``: a run of a
cell that trains collapsed), including cells that showed none: 0 of 10 runs leaves a rate
up to 31% possible. A cell at chance as a whole is left as it is. The widening is added to
the t interval's own sampling error (conservative: that error already holds part of the
rate's), and its level under mixtures is measured in ``benchmarks/bench_verdict_levels``.
A collapse mode that no run of the group has shown yet widens nothing: at small data
(``train_size.SMALL_DATA`` examples or fewer) seeds on demand says how many seeds make
that unlikely (``reinit_tune.sweep.seeds.unseen_collapse_note``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from reinit_tune.inference.interval import Interval
from reinit_tune.tasks import LOOSE_METRICS
from reinit_tune.tasks import SCORE_TOLERANCE as TOLERANCE

# what a bounded interval's method ends with
BOUND = " + collapse bound"


def chance_margin(metric: str) -> float:
    """claims.md §0.5's δ_chance: 0.02 for accuracy, F1 and EM; 0.05 for MCC and
    correlations."""
    return 0.05 if metric in LOOSE_METRICS else 0.02


@dataclass(frozen=True)
class CellCollapse:
    """``collapsed`` of a cell's ``runs`` at the majority rate, with the exact 95% interval
    of the rate; ``at_chance``: the cell as a whole sits at chance."""

    cell: str
    collapsed: int
    runs: int
    at_chance: bool = False

    @property
    def interval(self) -> tuple[float, float]:
        """The Clopper-Pearson 95% interval of the collapse rate."""
        return rate_interval(self.collapsed, self.runs)

    @property
    def mixed(self) -> bool:
        """Some of its runs collapsed while the cell as a whole trains: a mixture."""
        return 0 < self.collapsed < self.runs and not self.at_chance

    def __str__(self) -> str:
        low, high = self.interval
        what = " (the cell is at chance)" if self.at_chance else ""
        return (f"{self.cell}: {self.collapsed} of {self.runs} runs collapsed "
                f"(95% CI {100 * low:.0f}-{100 * high:.0f}%){what}")


def baseline(majority: float | None) -> float:
    """The score at or below which a run collapsed: the majority-class score, else 0."""
    return 0.0 if majority is None or not math.isfinite(majority) else majority


def collapsed(scores, majority: float | None) -> np.ndarray:
    """Which of ``scores`` collapsed (at most the majority-class score)."""
    return np.asarray(scores, dtype=np.float64) <= baseline(majority) + TOLERANCE


def count(cell: str, scores, majority: float | None, metric: str) -> CellCollapse:
    """The collapsed runs of one cell's ``scores``."""
    values = np.asarray(scores, dtype=np.float64)
    at_chance = bool(values.size) and float(np.median(values)) <= \
        baseline(majority) + chance_margin(metric)
    return CellCollapse(cell, int(collapsed(values, majority).sum()), int(values.size),
                        at_chance)


def mixed_cells(cells: list[CellCollapse]) -> list[CellCollapse]:
    """The cells whose runs mix collapsed runs and runs that trained."""
    return [c for c in cells if c.mixed]


def rate_interval(k: int, n: int) -> tuple[float, float]:
    """The Clopper-Pearson 95% interval of a rate seen k times in n."""
    from scipy import stats

    ci = stats.binomtest(int(k), int(n)).proportion_ci(0.95, "exact")
    return float(ci.low), float(ci.high)


def collapses_in(score_cells, majority: float | None, metric: str) -> bool:
    """Whether collapse is a mode of a group whose cells' scores are ``score_cells``: some
    run of a cell that trains (not at chance as a whole) collapsed."""
    for scores in score_cells:
        values = np.asarray(scores, dtype=np.float64)
        values = values[np.isfinite(values)]
        if values.size and count("", values, majority, metric).mixed:
            return True
    return False


def shifts(scores, majority: float | None, metric: str) -> tuple[float, float]:
    """How far the collapse rates the cell's runs leave possible (95% Clopper-Pearson)
    could move its mean over all runs (down, up) from the runs' mean; (0, 0) for a cell at
    chance as a whole or without runs."""
    values = np.asarray(scores, dtype=np.float64)
    if not values.size:
        return 0.0, 0.0
    counted = count("", values, majority, metric)
    if counted.at_chance:
        return 0.0, 0.0
    down = collapsed(values, majority)
    level = float(values[down].mean()) if down.any() else baseline(majority)
    gap = max(float(values[~down].mean()) - level, 0.0)
    low, high = counted.interval
    rate = counted.collapsed / counted.runs
    return (high - rate) * gap, (rate - low) * gap


def bound(interval: Interval, cells, metric: str) -> Interval:
    """``interval`` of Σ w · cell mean widened by the collapse bound (module docstring);
    ``cells``: (scores, weight, majority score) per cell. A cell of positive weight moves
    the contrast down by its shift down and up by its shift up, one of negative weight the
    other way round."""
    if not interval.defined:
        return interval
    low, high = interval.low, interval.high
    for scores, weight, majority in cells:
        down, up = shifts(scores, majority, metric)
        low -= abs(weight) * (down if weight > 0 else up)
        high += abs(weight) * (up if weight > 0 else down)
    if (low, high) == (interval.low, interval.high):  # every cell read is at chance
        return interval
    return dataclasses.replace(interval, low=low, high=high, method=interval.method + BOUND)


def contrast_allowances(by_condition, majority: float | None, metric: str
                        ) -> np.ndarray | None:
    """Per contrast "condition - reference" (``by_condition[0]`` the reference's scores),
    the widest way the collapse rates the runs leave possible could move it (``shifts``),
    where collapse is a mode of these runs (``collapses_in``); None elsewhere. What seeds
    on demand adds to each contrast's planned half-width."""
    if majority is None or not collapses_in(by_condition, majority, metric):
        return None
    ref_down, ref_up = shifts(by_condition[0], majority, metric)
    out = []
    for values in by_condition[1:]:
        down, up = shifts(values, majority, metric)
        out.append(max(down + ref_up, up + ref_down))
    return np.array(out)
