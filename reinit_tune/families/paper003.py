"""003's layer permutations as its authors' released scripts ran them, as a preset beside
``permutations`` (our protocol): permutation seeds 1..10 (their seed 0 is the unscrambled
model) all with training seed 1, so the ten runs share one 5k train subset and batch order and
differ only in layer order; ``numpy.random.RandomState(n).permutation(12)`` is their
permutation n too, so nine of the ten orders are those of our runs 1..9. The other 003
experiments are the built-in families (``progressive``, ``probing``, ``localized``,
``permutations``, ``small_data``, ``single_layer``, ``variants``)."""

from __future__ import annotations

from functools import partial

from reinit_tune.families import permutations
from reinit_tune.families.base import (
    DEFAULT_SIZE,
    PAPER_TASKS,
    Family,
    FigureModule,
    FigureSpec,
    Flag,
    plot,
)

figures = FigureModule("permutations")

EXPERIMENT = "003-permutations-authors"

FAMILIES = (
    Family(
        name=EXPERIMENT,
        title="layer permutations as the 003 authors' scripts ran them: permutations 1..N, "
              "all with training seed 1",
        source="003 §5, Fig. 3, Table 1 (the authors' protocol)",
        build=partial(permutations.build, protocol="authors", experiment=EXPERIMENT),
        tasks=PAPER_TASKS, sizes=(DEFAULT_SIZE,),
        flags=(Flag("--permutations", "number N of permutations (runs 1..N, seed 1); --seeds "
                    "sets the runs of each baseline", default=permutations.PERMUTATIONS),),
        fields="run n: `seed=1`, `layer_order=RandomState(n).permutation(L)`, n = 1..N; "
               "baselines as permutations",
        order=55,
        figures=(FigureSpec(
            EXPERIMENT, "Layer permutations, the authors' protocol",
            "003 Fig. 3 and Table 1, §5", f"`{EXPERIMENT}` rows",
            plot(EXPERIMENT, partial(figures.plot_permutations, experiment=EXPERIMENT),
                 "trials"),
            lambda s: {"Table 1 (authors' protocol): paired correlations between tasks":
                       figures.permutation_correlations(s.trials, EXPERIMENT)}),),
    ),
)
