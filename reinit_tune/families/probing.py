"""Probing (003 §3, App. D; 000 §4.4): a linear classifier on the mean-pooled hidden states of
layer k of the frozen pretrained encoder, k = 0 (embeddings) .. L, trained 10 epochs on the
full train split. Its curves are drawn dashed in the progressive figure."""

from __future__ import annotations

from collections.abc import Iterable

from reinit_tune.config import TrialConfig
from reinit_tune.families.base import PAPER_TASKS, Family, Flag, Grid, choose_layers, expand

PROBE_EPOCHS = 10  # 003 App. D: "We train our probing experiments for 10 epochs"


def build(grid: Grid, *, k: Iterable[int] | None = None, experiment: str = "probing"
          ) -> list[TrialConfig]:
    n = grid.num_layers
    chosen = choose_layers("--k", k, range(n + 1), n + 1, grid.model)
    return expand(grid, [{"probe_layer": i} for i in chosen], experiment=experiment)


FAMILY = Family(
    name="probing",
    title="linear probe on hidden state k of the frozen encoder, k = 0..L",
    source="003 §3, App. D; 000 §4.4",
    build=build,
    tasks=PAPER_TASKS,
    sizes=(None,),
    epochs=PROBE_EPOCHS,
    flags=(Flag("--k", "hidden states to probe (default: every k in 0..L; 0 = embeddings)",
                nargs="+"),),
    fields="`probe_layer=k`",
    order=15,
)
