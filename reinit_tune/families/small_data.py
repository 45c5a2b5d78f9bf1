"""Small-data progressive reinitialization (003 App. B, Fig. 4): every k = 0..L at 500
examples with 50 seeds (5 epochs), each run a point of the scatter."""

from __future__ import annotations

from collections.abc import Iterable

from reinit_tune.config import TrialConfig
from reinit_tune.families import progressive
from reinit_tune.families.base import (
    PAPER_TASKS,
    SMALL_DATA,
    Family,
    FigureModule,
    FigureSpec,
    Grid,
    expand,
    plot,
)

figures = FigureModule("progressive")


def build(grid: Grid, *, k: Iterable[int] | None = None) -> list[TrialConfig]:
    return expand(grid, progressive.surgeries(grid, k), experiment="small_data")


FAMILY = Family(
    name="small_data",
    title="progressive k = 0..L at 500 examples, 50 seeds each",
    source="003 App. B, Fig. 4",
    build=build,
    tasks=PAPER_TASKS,
    sizes=(SMALL_DATA,),
    flags=(progressive.K_FLAG,),
    fields="as progressive",
    order=20,
    figures=(
        FigureSpec("small_data", "Small-data runs, every seed", "003 Fig. 4, App. B",
                   "`small_data` rows, else `progressive` rows with <= 500 examples",
                   plot("small_data", figures.plot_small_data, "trials")),
    ),
)
