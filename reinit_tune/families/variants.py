"""Variants of progressive reinitialization (003 App. D-F): a 5x learning rate for the
reinitialized layers, preserved LayerNorm parameters (both at 5k with the reference curve, so
each figure is complete from this sweep alone), and 10 epochs for k in {0, L/2, L} at 500 and
5k examples (the epoch study)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.families import progressive
from reinit_tune.families.base import (
    DEFAULT_SIZE,
    PAPER_TASKS,
    Family,
    FigureModule,
    FigureSpec,
    Flag,
    Grid,
    RunDefaults,
    Size,
    expand,
    parse_size,
    plot,
)

figures = FigureModule("variants")

EPOCH_STUDY_EPOCHS = 10  # 003 App. D: validation tracked up to 10 epochs
EPOCH_STUDY_SIZES = (500, 5_000)
LR_MULTIPLIER = 5.0  # 003 App. E
VARIANTS = ("lr", "layernorm", "epochs")


def build(grid: Grid, *, variants: Iterable[str] = VARIANTS,
          lr_multiplier: float = LR_MULTIPLIER, k: Iterable[int] | None = None,
          epoch_sizes: Sequence[Size] = EPOCH_STUDY_SIZES,
          max_epochs: int = EPOCH_STUDY_EPOCHS) -> list[TrialConfig]:
    """All ``experiment="variants"``:

    - "lr" (003 App. E, Fig. 6): progressive curve with ``reinit_lr_multiplier`` = 5;
    - "layernorm" (003 App. F, Fig. 7): progressive curve with ``preserve_layernorm``;
    - both come with the reference progressive curve (multiplier 1, LayerNorm reset) at the
      grid's sizes (5k);
    - "epochs" (003 App. D): ``max_epochs`` (10) epochs for k in {0, L/2, L} at
      ``epoch_sizes`` (500 and 5k); the per-epoch dev metrics are in the epoch table.
    """
    which = list(variants)
    unknown = sorted(set(which) - set(VARIANTS))
    if unknown or not which:
        raise InputError(f"--variants: {unknown or which}; allowed: {list(VARIANTS)}")
    if "lr" in which and (isinstance(lr_multiplier, bool)
                          or not isinstance(lr_multiplier, int | float)
                          or not 0 < lr_multiplier < float("inf")):
        raise InputError(f"--lr-multiplier: must be a positive number, got {lr_multiplier!r}")
    if "epochs" in which and (isinstance(max_epochs, bool) or not isinstance(max_epochs, int)
                              or max_epochs < 1):
        raise InputError(f"--max-epochs: must be an integer >= 1, got {max_epochs!r}")
    curves = [{}] if {"lr", "layernorm"} & set(which) else []
    if "lr" in which:
        curves.append({"reinit_lr_multiplier": lr_multiplier})
    if "layernorm" in which:
        curves.append({"preserve_layernorm": True})
    surgeries = progressive.surgeries(grid, k)
    configs = [c for curve in curves
               for c in expand(grid, [{**s, **curve} for s in surgeries],
                               experiment="variants")]
    if "epochs" in which:
        n = grid.num_layers
        study = progressive.surgeries(grid, sorted({0, n // 2, n}))
        configs += expand(grid, study, experiment="variants", sizes=epoch_sizes,
                          epochs=max_epochs)
    return configs


FAMILY = Family(
    name="variants",
    title="5x lr for reinitialized layers, preserved LayerNorm, 10-epoch study",
    source="003 App. D-F, Figs 6-7",
    build=build,
    tasks=PAPER_TASKS,
    sizes=(DEFAULT_SIZE,),
    flags=(
        Flag("--variants", "which variants to run", type=str, nargs="+",
             default=list(VARIANTS), choices=VARIANTS),
        Flag("--lr-multiplier", "learning-rate factor of the reinitialized layers ('lr')",
             type=float, default=LR_MULTIPLIER),
        Flag("--k", "k of the 'lr' and 'layernorm' curves (default: every k in 0..L)",
             nargs="+"),
        Flag("--epoch-sizes", "train sizes of the 'epochs' study", type=parse_size, nargs="+",
             default=list(EPOCH_STUDY_SIZES)),
        Flag("--max-epochs", "epochs of the 'epochs' study (k in {0, L/2, L})",
             default=EPOCH_STUDY_EPOCHS),
    ),
    run=RunDefaults(evaluate="every-epoch"),  # the epoch study plots every epoch
    fields="`reinit_lr_multiplier=5`, `preserve_layernorm=True` (each with the reference "
           "curve at 5k); `epochs=10` for k in {0, L/2, L} at 500 and 5k",
    order=70,
    contrasts="s(k) - s(L) on each curve (reference, 5x learning rate, LayerNorm kept) "
              "and in the epoch study",
    figures=(
        FigureSpec("variants", "Variants: LR multiplier, LayerNorm preserved, initializer",
                   "003 Figs 6-7, App. E-F", "`variants` rows, and `progressive` rows as the "
                   "baseline", plot("variants", figures.plot_variants, "trials")),
        FigureSpec("epochs", "Number of finetuning epochs", "003 App. D",
                   "the epoch table of `variants` rows that change nothing but the epochs",
                   plot("epochs", figures.plot_epochs, "trials", "epochs")),
    ),
)
