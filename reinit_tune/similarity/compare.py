"""Two models compared layer by layer on dev examples (002 §5: seed vs seed, task vs task).

Models are names or folders saved by a sweep run with ``--save-model``
(``RESULTS/models/<trial_id>``), or a pretrained checkpoint. Both see the same dev examples
of one or more tasks (002 §5.2 pools 200 examples of each task); the rows are those of
``reinit_tune.similarity.layers.compare_models``. ``reinit-tune compare`` writes them as CSV
with a figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import AutoModel
from transformers.utils import logging as hf_logging

from reinit_tune import data
from reinit_tune.errors import InputError
from reinit_tune.model.shape import resolve_model
from reinit_tune.similarity.layers import BATCH_SIZE, compare_models
from reinit_tune.tasks import get_task


def compare(model_a: str, model_b: str, tasks: Sequence[str], *, examples: int = 200,
            max_seq_length: int = 128, data_dir: str | None = None,
            layer_replacement: bool = False) -> list[dict]:
    """One row per layer comparing ``model_a`` with ``model_b`` on the first ``examples``
    dev examples of each task (see the module docstring)."""
    tokenizers = [data.tokenizer_identity(data.load_tokenizer(m)) for m in (model_a, model_b)]
    if tokenizers[0] != tokenizers[1]:
        raise InputError("the two models use different tokenizers; compare models of one "
                         "family")
    batches = []
    for task in tasks:
        split = get_task(task).dev_splits[0]
        dev = data.encoded_split(task, split, model_a, max_seq_length, data_dir)
        dev = dev.select(range(min(examples, len(dev))))
        batches += [dev.collate(list(range(i, min(i + BATCH_SIZE, len(dev)))))
                    for i in range(0, len(dev), BATCH_SIZE)]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hf_logging.set_verbosity_error()  # a saved task model's unused classifier is expected
    a, b = (AutoModel.from_pretrained(resolve_model(m)).to(device) for m in (model_a, model_b))
    return compare_models(a, b, batches, layer_replacement=layer_replacement)
