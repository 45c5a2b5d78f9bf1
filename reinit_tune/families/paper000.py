"""The experiments of 000 (Singh & Giovanardi), as presets: progressive reinitialization from
the top at 100%, 10% and 1% of the SST-2 and QNLI train splits (QNLI also at 0.6%, Fig. 1c;
CoLA full), probing after dropping the top k layers, and the per-layer weight distance of the
finetuned model from the pretrained one against data size.

As written (§4.2, §4.3.1, §5.3): BERT-base (cased or not is not stated; 003, by the same
group, uses uncased), lr 2e-5, 3 epochs, "Iterations/epoch: 2000". The batch size is not
stated but follows from that: SST-2's 67,349 training examples in 2,000 iterations are
67,349 / 2,000 ≈ 33.7 examples per step, i.e. batch 32 (2,105 iterations; batch 8 would take
8,419), so the presets train with batch 32 (QNLI then takes 104,743 / 32 ≈ 3,274 per epoch:
the 2,000 is SST-2's figure, the one the paper gives). Not stated, so 003's choices: 128
tokens, 3 runs per point. Probing (§4.4, Alg. 2) keeps layers 1..12-k of the frozen encoder; the
classifier is not described, so it is 003's linear probe on the mean-pooled layer. The weight
distance (§4.5) is ‖W_base − W_FT‖₂ of each layer's ``output.dense``, which the authors'
code computes as the spectral norm against the pretrained checkpoint
(``w_output_spectral_pretrained`` in the similarity table).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from reinit_tune.config import TrialConfig
from reinit_tune.families import probing, progressive
from reinit_tune.families.base import (
    Family,
    FigureModule,
    FigureSpec,
    Flag,
    Grid,
    RunDefaults,
    TaskSettings,
    Training,
    expand,
    plot,
)

curves = FigureModule("progressive")
distances = FigureModule("similarity")

TASKS = ("sst2", "qnli", "cola")
# §4.3.1: 100%, 10% and 1% of SST-2 and QNLI; Fig. 1c: QNLI also at 0.6%; Fig. 1d: CoLA.
PER_TASK = {
    "sst2": TaskSettings(sizes=(None, 0.1, 0.01)),
    "qnli": TaskSettings(sizes=(None, 0.1, 0.01, 0.006)),
    "cola": TaskSettings(sizes=(None,)),
}
EPOCHS = 3  # §5.3
TRAINING = Training(lr=2e-5, batch_size=32)  # §5.3; batch 32 from 2,000 iterations/epoch


def build_distance(grid: Grid, *, experiment: str = "000-distance") -> list[TrialConfig]:
    """The full pretrained model finetuned at each data size (no surgery): its weights'
    distance from the pretrained checkpoint, per layer (§4.5, Figs 3 and 5b)."""
    return expand(grid, [{"reinit_layers": ()}], experiment=experiment)


def build_probing(grid: Grid, *, k: Iterable[int] | None = None,
                  experiment: str = "000-probing") -> list[TrialConfig]:
    """§4.4: drop the top k layers (k = 1..L-1) and probe what is left: hidden state L-k."""
    n = grid.num_layers
    kept = [n - drop for drop in (range(1, n) if k is None else k)]
    return probing.build(grid, k=kept, experiment=experiment)


FAMILIES = (
    Family(
        name="000-progressive",
        title="progressive reinitialization at 100/10/1% of SST-2 and QNLI (QNLI 0.6%), "
              "CoLA full",
        source="000 §4.3, Fig. 1",
        build=partial(progressive.build, experiment="000-progressive"),
        tasks=TASKS, sizes=(None,), epochs=EPOCHS, per_task=PER_TASK, training=TRAINING,
        flags=(progressive.K_FLAG,),
        fields="as progressive",
        order=200,
        figures=(FigureSpec(
            "000-progressive", "000: progressive reinitialization by data size",
            "000 Fig. 1 (a-d)", "`000-progressive` rows",
            plot("000-progressive", partial(curves.plot_progressive,
                                            experiment="000-progressive", probing=None),
                 "trials")),),
    ),
    Family(
        name="000-probing",
        title="linear probe after dropping the top k layers, k = 1..L-1",
        source="000 §4.4, Figs 2, 5a",
        build=build_probing,
        tasks=TASKS, sizes=(None,), epochs=EPOCHS, training=TRAINING,
        flags=(Flag("--k", "top layers dropped (default: 1..L-1)", nargs="+"),),
        fields="`probe_layer` = L - k",
        order=201,
        figures=(FigureSpec(
            "000-probing", "000: probing after dropping the top layers", "000 Figs 2, 5a",
            "`000-probing` rows",
            plot("000-probing", partial(curves.plot_probing, experiment="000-probing"),
                 "trials")),),
    ),
    Family(
        name="000-distance",
        title="weight distance of the finetuned from the pretrained model per layer, "
              "by data size",
        source="000 §4.5, Figs 3, 5b",
        build=build_distance,
        tasks=TASKS, sizes=(None,), epochs=EPOCHS, per_task=PER_TASK, training=TRAINING,
        run=RunDefaults(similarity=True, similarity_examples=200),
        fields="`reinit_layers=()`; the similarity table's `w_output_spectral_pretrained`",
        order=202,
        figures=(FigureSpec(
            "000-distance", "000: weight distance from the pretrained model by data size",
            "000 Figs 3, 5b", "the similarity rows of `000-distance` trials",
            plot("000-distance", partial(
                distances.plot_similarity_by_size, experiment="000-distance",
                measures=("w_output_spectral_pretrained", "w_output_fro")),
                "trials", "similarity")),),
    ),
)
