"""Layer permutations (003 §5, Fig. 3, Table 1): run n finetunes the pretrained layers in the
order ``numpy.random.RandomState(n).permutation(L)``, the same for every task, at 5k
examples, plus the original-order and all-reinitialized baselines."""

from __future__ import annotations

import numpy as np

from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.families.base import (
    DEFAULT_SIZE,
    PAPER_TASKS,
    Family,
    FigureModule,
    FigureSpec,
    Flag,
    Grid,
    expand,
    plot,
    settings,
)

figures = FigureModule("permutations")

PERMUTATIONS = 10  # 003 §5, Table 1: N = 10


def permutation(n: int, num_layers: int) -> tuple[int, ...]:
    """Permutation n of a sweep: ``numpy.random.RandomState(n).permutation(L)``, as in the 003
    authors' code, so run n of every task (and of every reimplementation) uses the same one."""
    return tuple(np.random.RandomState(n).permutation(num_layers).tolist())


PROTOCOLS = ("ours", "authors")
AUTHORS_TRAINING_SEED = 1  # the 003 authors' scripts fix the training seed at 1


MAX_PERMUTATIONS = 100_000  # a grid the planner and the store handle in minutes


def build(grid: Grid, *, permutations: int = PERMUTATIONS, protocol: str = "ours",
          experiment: str = "permutations") -> list[TrialConfig]:
    """The permuted runs and the baselines, ``grid.seeds`` runs each: the original order
    (nothing reinitialized) and all layers reinitialized (both ``layer_order=None``).

    - "ours": run n = 0..N-1 finetunes the layers in the order ``permutation(n, L)`` with
      seed n, so its train subset, batch order and head differ from run to run too;
    - "authors" (the 003 authors' released scripts): permutation seeds n = 1..N (their seed
      0 means no scrambling: our original-order baseline) all train with seed 1, so every
      run shares one train subset and batch order and differs only in layer order."""
    if permutations < 1:
        raise InputError(f"--permutations: must be >= 1, got {permutations}")
    if permutations > MAX_PERMUTATIONS:  # each is a trial per task, size and seed
        raise InputError(f"--permutations: at most {MAX_PERMUTATIONS:,}, got {permutations:,} "
                         "(003 used 10; a correlation over N permutations is within "
                         "±0.02 at N = 10,000)")
    if protocol not in PROTOCOLS:
        raise InputError(f"--protocol: {protocol!r}; allowed: {list(PROTOCOLS)}")
    n_layers = grid.num_layers
    if n_layers < 2:
        # One layer has one order: every "permutation" would be the unpermuted baseline.
        raise InputError(f"permutations: the model has {n_layers} layer, which has no other "
                         "order to permute into; use a model with 2 or more layers")
    baselines = [{"reinit_layers": ()}, {"reinit_layers": tuple(range(n_layers))}]
    configs = expand(grid, baselines, experiment=experiment)
    runs = (range(permutations) if protocol == "ours" else range(1, permutations + 1))
    for task, size, _, n_epochs in settings(grid):
        for n in runs:
            configs.append(TrialConfig(
                model=grid.model, task=task, train_size=size, epochs=n_epochs,
                seed=n if protocol == "ours" else AUTHORS_TRAINING_SEED,
                layer_order=permutation(n, n_layers), experiment=experiment,
                **grid.trial_fields(task),
            ))
    return configs


FAMILY = Family(
    name="permutations",
    title="the order of the pretrained layers shuffled",
    source="003 §5, Fig. 3, Table 1",
    build=build,
    tasks=PAPER_TASKS,
    sizes=(DEFAULT_SIZE,),
    flags=(Flag("--permutations", "number N of permutations (runs 0..N-1); --seeds sets the "
                "runs of each baseline", default=PERMUTATIONS),
           Flag("--protocol", "'ours' (run n: seed n) or 'authors' (the 003 authors' scripts: "
                "runs 1..N all with seed 1)", type=str, default="ours", choices=PROTOCOLS)),
    fields="run n: `seed=n`, `layer_order=RandomState(n).permutation(L)`; baselines "
           "`layer_order=None` with `reinit_layers` `()` and all L",
    order=50,
    contrasts="the permuted order (run n: permutation n, seed n; pass --permutations equal to "
              "--max-seeds) and all layers reinitialized, each minus the original order",
    figures=(
        FigureSpec("permutations", "Layer permutations", "003 Fig. 3 and Table 1, §5",
                   "`permutations` rows (paired across tasks by layer order and seed)",
                   plot("permutations", figures.plot_permutations, "trials"),
                   lambda s: {"Table 1: paired correlations between tasks (two-sided p)":
                              figures.permutation_correlations(s.trials)}),
    ),
)
