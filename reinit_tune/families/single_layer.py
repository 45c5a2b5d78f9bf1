"""Single-layer reinitialization (003 App. C, Fig. 5): reinitialize one layer at a time,
every layer 1..L, 3 seeds at 5k examples, plus the full model as reference."""

from __future__ import annotations

from collections.abc import Iterable

from reinit_tune.config import TrialConfig
from reinit_tune.families.base import (
    DEFAULT_SIZE,
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

figures = FigureModule("localized")


def build(grid: Grid, *, layers: Iterable[int] | None = None) -> list[TrialConfig]:
    n = grid.num_layers
    chosen = choose_layers("--layers", layers, range(n), n, grid.model)
    surgeries = [{"reinit_layers": ()}, *({"reinit_layers": (i,)} for i in chosen)]
    return expand(grid, surgeries, experiment="single_layer")


FAMILY = Family(
    name="single_layer",
    title="one layer reinitialized at a time",
    source="003 App. C, Fig. 5",
    build=build,
    tasks=PAPER_TASKS,
    sizes=(DEFAULT_SIZE,),
    flags=(Flag("--layers", "0-based layers to reinitialize one at a time (default: all)",
                nargs="+"),),
    fields="`reinit_layers=(i,)`, baseline `()`",
    order=40,
    contrasts="each single layer reinitialized minus the full model",
    figures=(
        FigureSpec("single_layer", "Single-layer reinitialization", "003 Fig. 5, App. C",
                   "`single_layer` rows",
                   plot("single_layer", figures.plot_single_layer, "trials")),
    ),
)
