"""Attention-head reinitialization (001 Exp 3, Figs 5-10): reinitialize one head at a time,
each head of layers 1, 2, L-1 and L (0-based 0, 1, L-2, L-1), on CoLA and STS-B with their
full train splits, plus the no-reinit baseline the per-head differences are taken from."""

from __future__ import annotations

from collections.abc import Iterable

from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.families.base import (
    Family,
    FigureModule,
    FigureSpec,
    Flag,
    Grid,
    choose_layers,
    expand,
    plot,
)

figures = FigureModule("heads")

HEAD_TASKS = ("cola", "stsb")  # 001 Exp 3


def paper_head_layers(num_layers: int) -> list[int]:
    """001 Exp 3 reinitializes heads of layers 1, 2, 11 and 12 of 12: indices 0, 1, L-2, L-1."""
    return sorted({0, 1, num_layers - 2, num_layers - 1} & set(range(num_layers)))


def build(grid: Grid, *, layers: Iterable[int] | None = None, experiment: str = "heads"
          ) -> list[TrialConfig]:
    n_layers, n_heads = grid.num_layers, grid.shape.num_heads
    if n_heads is None:
        raise InputError(f"--num-heads: the head count of {grid.model} is unknown; pass it")
    chosen = choose_layers("--layers", layers, paper_head_layers(n_layers), n_layers,
                           grid.model)
    surgeries = [{}, *({"reinit_heads": ((layer, head),)}
                       for layer in chosen for head in range(n_heads))]
    return expand(grid, surgeries, experiment=experiment)


FAMILY = Family(
    name="heads",
    title="one attention head reinitialized, each head of layers 0, 1, L-2, L-1 (`--layers`)",
    source="001 Exp 3, Figs 5-10",
    build=build,
    tasks=HEAD_TASKS,
    sizes=(None,),
    flags=(Flag("--layers", "0-based layers whose heads are reinitialized one at a time "
                "(default: 0 1 L-2 L-1)", nargs="+"),),
    fields="`reinit_heads=((layer, head),)`, baseline `()`",
    order=80,
    contrasts="each head reinitialized minus the full model",
    figures=(
        FigureSpec("heads", "Attention-head reinitialization", "001 Figs 5-10, Exp. 3",
                   "`heads` rows (`reinit_heads`), paired with the baseline by seed",
                   plot("heads", figures.plot_heads, "trials"),
                   lambda s: {"Per layer, over its heads (001 Figs 7-8)":
                              figures.layer_summary(s.trials),
                              "Per head, over the layers (001 Figs 9-10)":
                              figures.head_summary(s.trials)}),
    ),
)
