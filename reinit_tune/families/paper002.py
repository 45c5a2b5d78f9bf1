"""The experiments of 002 (Hao et al.), as a preset: BERT-large finetuned on MNLI, RTE, SST-2
and MRPC with the per-task hyperparameters of its Table 1, then compared layer by layer with
the pretrained model (attention Jensen-Shannon divergence §3, SVCCA distance and layer
replacement §4; Figs 1-3) and, after ``reinit-tune consistency``, with another seed's model
(§5.1, Figs 4-5) and with another task's model (§5.2, Figs 6-7).

As written (§2, Table 1): BERT-large, Adam with the slanted triangular learning-rate schedule
(Howard & Ruder 2018), dropout 0.1 (BERT's own), MNLI lr 3e-5 batch 64 3 epochs, RTE 1e-5 32
5, SST-2 3e-5 64 4, MRPC 1e-5 16 5; two seeds per task (§5.1); dev sets for the analyses
(§3), 200 dev examples of each task when two tasks are compared (§5.2). Not stated: cased or
uncased (uncased here), the sequence length (128), the schedule's constants (Howard &
Ruder's: cut_frac 0.1, ratio 32).
"""

from __future__ import annotations

from functools import partial

from reinit_tune.config import TrialConfig
from reinit_tune.families.base import (
    Family,
    FigureModule,
    FigureSpec,
    Grid,
    RunDefaults,
    TaskSettings,
    Training,
    expand,
    plot,
)

layers = FigureModule("similarity")

TABLE_1 = {
    "mnli": TaskSettings(lr=3e-5, batch_size=64, epochs=3),
    "rte": TaskSettings(lr=1e-5, batch_size=32, epochs=5),
    "sst2": TaskSettings(lr=3e-5, batch_size=64, epochs=4),
    "mrpc": TaskSettings(lr=1e-5, batch_size=16, epochs=5),
}


def build(grid: Grid, *, experiment: str = "002-dynamics") -> list[TrialConfig]:
    """Each task finetuned from the pretrained model, ``grid.seeds`` (2) times."""
    return expand(grid, [{}], experiment=experiment)


FAMILIES = (
    Family(
        name="002-dynamics",
        title="BERT-large finetuned with Table 1's settings, compared per layer with the "
              "pretrained model, across seeds and across tasks",
        source="002 §2-5, Table 1, Figs 1-7",
        build=build,
        tasks=tuple(TABLE_1), sizes=(None,), seeds=2,
        model="bert-large-uncased",
        training=Training(schedule="slanted-triangular"), per_task=TABLE_1,
        run=RunDefaults(similarity=True, layer_replacement=True, save_model=True),
        fields="none (`schedule=\"slanted-triangular\"`, Table 1's lr, batch, epochs)",
        order=400,
        figures=(
            FigureSpec("002-dynamics", "002: finetuned vs pretrained, per layer, by task",
                       "002 Figs 1-3", "the similarity rows of `002-dynamics` trials",
                       plot("002-dynamics", partial(layers.plot_similarity_by_task,
                                                    experiment="002-dynamics"),
                            "trials", "similarity")),
            FigureSpec("002-consistency", "002: consistency across seeds and across tasks",
                       "002 Figs 4-7", "the pairs table of `002-dynamics` trials "
                       "(reinit-tune consistency)",
                       plot("002-consistency", partial(layers.plot_consistency,
                                                       experiment="002-dynamics"),
                            "trials", "pairs")),
        ),
    ),
)
