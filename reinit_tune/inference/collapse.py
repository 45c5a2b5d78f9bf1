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
**A collapse mode no run has shown yet** is allowed for where one may exist unseen
(``possible``): at small data (``SMALL_DATA`` examples or fewer, the regime
Mosbach et al. measured), in a group whose task recorded its majority score. There every
cell that trains is bounded as above whether or not a run collapsed, its gap the distance
from its mean to the majority score: 0 of n runs leaves a rate up to ``1 - 0.025^(1/n)``
possible (31% at n = 10, 7% at n = 50). Without it, a null store whose collapsing arm showed
no collapse (a 10% mode is unseen in 10 runs 35% of the time) decided as the plain test
does, at 0.14-0.42 where 0.025 was stated (``benchmarks/RESULTS.md``). The price is seeds: a
contrast at small data decides only once its distance to the rule's boundary exceeds the
interval and what an unseen mode could move it, which at ten seeds leaves most small effects
undecided, and the row says how many seeds would decide.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from reinit_tune.inference.interval import Interval
from reinit_tune.tasks import LOOSE_METRICS
from reinit_tune.tasks import SCORE_TOLERANCE as TOLERANCE

# Small data: training sets of at most this many examples, where runs may collapse to the
# majority class before a store has shown one. Mosbach et al. (2021, "On the Stability of
# Fine-tuning BERT", §4) find 10-30% failed runs on RTE, MRPC and CoLA (2.5k-8.5k examples)
# and none on the larger GLUE tasks; 003 trains every task at 500-5,000 too.
SMALL_DATA = 10_000

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


def possible(examples: float | None, majority: float | None) -> bool:
    """Whether a collapse mode may exist that no run has shown: small data (at most
    ``SMALL_DATA`` examples) with a recorded majority score."""
    return examples is not None and math.isfinite(examples) and examples <= SMALL_DATA \
        and majority is not None and math.isfinite(majority)


def unseen_seeds(gap: float, width: float) -> int:
    """The fewest runs, none collapsed, after which a collapse mode they leave possible
    (Clopper-Pearson upper limit of 0 of n, ``1 - 0.025^(1/n)``) times ``gap`` fits within
    ``width``: what seeds on demand needs at least at small data."""
    if gap <= width:
        return 1
    return math.ceil(math.log(0.025) / math.log(1 - width / gap))


# a collapse mode's least share of runs at small data in Mosbach et al. (2021, §4: 10-30%)
UNSEEN_RATE = 0.10
UNSEEN_MISS = 0.05  # how often a cell may read no collapse of such a mode


def seeds_to_show(rate: float = UNSEEN_RATE, miss: float = UNSEEN_MISS) -> int:
    """The runs after which a collapse mode at ``rate`` has shown at least once with
    probability ``1 - miss``: ``(1 - rate)^n <= miss`` (29 at 10% and 5%)."""
    return math.ceil(math.log(miss) / math.log(1 - rate))


def unbounded_at(cells: list[CellCollapse], unseen: bool) -> int | None:
    """The runs per cell at which a statistic the bound does not cover (a bootstrap, an F
    ratio, Holm's p values, a correlation) cannot decide on ``cells``: the fewest runs of a
    cell that mixes collapsed and trained runs, or, where a mode no run has shown may exist
    (``unseen``), of a cell that trains while under ``seeds_to_show()`` runs; None where it
    can decide."""
    mixed = mixed_cells(cells)
    if mixed:
        return min(c.runs for c in mixed)
    trained = [c.runs for c in cells if not c.at_chance]
    if unseen and trained and min(trained) < seeds_to_show():
        return min(trained)
    return None


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


def contrast_allowances(by_condition, majority: float | None, metric: str,
                        unseen: bool = False) -> np.ndarray | None:
    """Per contrast "condition - reference" (``by_condition[0]`` the reference's scores),
    the widest way the collapse rates the runs leave possible could move it (``shifts``),
    where collapse is a mode of these runs (``collapses_in``) or may be one no run has shown
    (``unseen``: ``possible`` holds for the group); None elsewhere. What seeds on demand adds
    to each contrast's planned half-width."""
    if majority is None or not (unseen or collapses_in(by_condition, majority, metric)):
        return None
    ref_down, ref_up = shifts(by_condition[0], majority, metric)
    out = []
    for values in by_condition[1:]:
        down, up = shifts(values, majority, metric)
        out.append(max(down + ref_up, up + ref_down))
    return np.array(out)
