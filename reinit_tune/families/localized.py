"""Localized reinitialization (003 §4, Fig. 2): every block of 3 consecutive layers either
reinitialized or preserved while all other layers are reinitialized, at 5k examples, plus the
full-model and embeddings-only baselines; and, on a model whose depth is not 12, the four
near-equal blocks the claim verdicts read (claims.md §0.2, ``verdicts.depth.blocks``), so
that the same command feeds the figure and the verdicts."""

from __future__ import annotations

from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.families.base import (
    DEFAULT_SIZE,
    PAPER_TASKS,
    Family,
    FigureModule,
    FigureSpec,
    Grid,
    expand,
    plot,
)

figures = FigureModule("localized")

BLOCK_SIZE = 3  # 003 §4: blocks of three consecutive layers


def build(grid: Grid) -> list[TrialConfig]:
    """Each of the L-2 blocks reinitialized (``reinit_layers`` = the block) or preserved
    (``reinit_layers`` = every layer outside it), plus the full model (``()``) and
    embeddings only (all L layers); the four blocks the claim verdicts compare
    (``reinit_tune.verdicts.depth.blocks``) that are not among them (any depth but 12) the
    same two ways."""
    # imported here: the verdicts package loads its engine, which `sweep --help` need not
    from reinit_tune.verdicts.depth import blocks as verdict_blocks

    n_layers = grid.num_layers
    if n_layers < BLOCK_SIZE:
        raise InputError(f"--model: blocks of {BLOCK_SIZE} layers need at least {BLOCK_SIZE} "
                         f"layers; {grid.model} has {n_layers}")
    everything = tuple(range(n_layers))
    blocks = [tuple(range(b, b + BLOCK_SIZE)) for b in range(n_layers - BLOCK_SIZE + 1)]
    blocks += [b for b in verdict_blocks(n_layers) if b not in blocks]
    reinit = [(), everything, *blocks,
              *(tuple(i for i in everything if i not in block) for block in blocks)]
    surgeries = list({r: {"reinit_layers": r} for r in reinit}.values())  # each set once
    return expand(grid, surgeries, experiment="localized")


FAMILY = Family(
    name="localized",
    title="each block of 3 consecutive layers reinitialized, or preserved with all others "
          "reinitialized",
    source="003 §4, Fig. 2",
    build=build,
    tasks=PAPER_TASKS,
    sizes=(DEFAULT_SIZE,),
    fields="`reinit_layers` = the block / every layer outside it; baselines `()` (full model) "
           "and all L layers (embeddings only); on a depth other than 12, also the 4 blocks "
           "the claim verdicts compare (claims.md §0.2)",
    order=30,
    contrasts="each block reinitialized or preserved, and the embeddings-only model, minus "
              "the full model",
    figures=(
        FigureSpec("localized", "Localized reinitialization: block reinitialized / preserved",
                   "003 Fig. 2, §4", "`localized` rows (roles read from `reinit_layers`)",
                   plot("localized", figures.plot_localized, "trials")),
    ),
)
