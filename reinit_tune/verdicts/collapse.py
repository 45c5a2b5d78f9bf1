"""Collapsed runs: finetuning runs that ended at (or below) what predicting the dev
majority class scores, counted per cell of a verdict.

A run is **collapsed** when its score is at most its metric's majority-class baseline for
its task (``majority_score``, stored with every trial: the majority label's share for
accuracy, 0 for MCC and correlations) plus ``sanity.TOLERANCE``: Mosbach, Andriushchenko &
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
collapse is biased by rate x gap), so a verdict decided on such cells says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from reinit_tune.sanity import TOLERANCE
from reinit_tune.verdicts.rule import LOOSE_METRICS


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
        from scipy import stats

        ci = stats.binomtest(self.collapsed, self.runs).proportion_ci(0.95, "exact")
        return float(ci.low), float(ci.high)

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
