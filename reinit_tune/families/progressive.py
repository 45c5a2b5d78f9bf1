"""Progressive reinitialization (003 §2, Fig. 1): keep layers 1..k pretrained and
reinitialize layers k+1..L, for k = 0..L, per task, train size and seed; embeddings are
never reinitialized. The default grid is 003's: SST-2, QNLI and CoLA at 500, 5k and 50k
examples, 50 seeds and 5 epochs at 500 examples, 3 and 3 otherwise."""

from __future__ import annotations

from collections.abc import Iterable

from reinit_tune.config import TrialConfig
from reinit_tune.families.base import (
    PAPER_SIZES,
    PAPER_TASKS,
    Family,
    FigureModule,
    FigureSpec,
    Flag,
    Grid,
    choose_layers,
    expand,
    plot,
)

figures = FigureModule("progressive")

K_FLAG = Flag("--k", "pretrained layers to keep (default: every k in 0..L)", nargs="+")


def surgeries(grid: Grid, k: Iterable[int] | None) -> list[dict]:
    """``reinit_layers`` of every chosen k: layers k..L-1 (0-based) reinitialized."""
    n = grid.num_layers
    return [{"reinit_layers": tuple(range(i, n))}
            for i in choose_layers("--k", k, range(n + 1), n + 1, grid.model)]


def build(grid: Grid, *, k: Iterable[int] | None = None, experiment: str = "progressive"
          ) -> list[TrialConfig]:
    return expand(grid, surgeries(grid, k), experiment=experiment)


FAMILY = Family(
    name="progressive",
    title="keep layers 1..k pretrained, reinitialize k+1..L, for k = 0..L",
    source="003 §2, Fig. 1",
    build=build,
    tasks=PAPER_TASKS,
    sizes=PAPER_SIZES,
    flags=(K_FLAG,),
    fields="`reinit_layers` = (k, ..., L-1)",
    order=10,
    contrasts="s(k) - s(L), the score keeping k layers minus the full model's, for each k",
    figures=(
        FigureSpec("progressive", "Progressive reinitialization",
                   "003 Fig. 1, §2-3; 001 Fig. 3; 000 Fig. 1",
                   "`progressive` rows; `probing` rows for the dashed curves",
                   plot("progressive", figures.plot_progressive, "trials")),
    ),
)
