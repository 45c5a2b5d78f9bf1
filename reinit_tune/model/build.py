"""Building a trial's model: the pretrained checkpoint, a seeded task head, surgery.

``load_pretrained`` keeps one loaded checkpoint per process (a Ray actor reused across trials
loads each model once and deep-copies it per trial: ``from_pretrained`` costs seconds, a copy
milliseconds). ``build_model`` checks the config against the loaded model's real shape, then
applies the surgery in the order ``TrialConfig`` documents.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from transformers import AutoModelForQuestionAnswering, AutoModelForSequenceClassification
from transformers.utils import logging as hf_logging

from reinit_tune.model import surgery
from reinit_tune.model.shape import ModelShape, resolve_model
from reinit_tune.tasks import get_task

if TYPE_CHECKING:
    from torch import nn

    from reinit_tune.config import TrialConfig

_checkpoints: dict[tuple[str, str, int], nn.Module] = {}


def load_pretrained(model: str, task: str) -> nn.Module:
    """A fresh copy of the pretrained model with ``task``'s head (not yet seeded): a sequence
    classifier (or regressor), or a span extractor for QA tasks."""
    spec = get_task(task)
    key = (model, spec.kind, spec.num_labels)
    if key not in _checkpoints:
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the "head newly initialized" report is expected
        try:
            if spec.is_qa:
                loaded = AutoModelForQuestionAnswering.from_pretrained(resolve_model(model))
            else:
                loaded = AutoModelForSequenceClassification.from_pretrained(
                    resolve_model(model), num_labels=spec.num_labels,
                    problem_type=("regression" if spec.is_regression
                                  else "single_label_classification"),
                )
        finally:
            hf_logging.set_verbosity(verbosity)
        _checkpoints.clear()  # one model per worker is the common case; bound the memory
        _checkpoints[key] = loaded.eval()
    return copy.deepcopy(_checkpoints[key])


def loaded_shape(model: nn.Module) -> ModelShape:
    """The shape of a loaded model, from its config."""
    config = model.config
    return ModelShape(
        num_layers=len(surgery.layer_stack(model)),
        num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size,
        initializer_range=config.initializer_range,
        max_position_embeddings=config.max_position_embeddings,
    )


def reset_classifier(model: nn.Module, seed: int) -> nn.Module:
    """Draw the task head (classifier or span head) from N(0, initializer_range) with zero
    bias, as transformers initializes it, from a generator seeded by ``seed``."""
    generator = surgery.seeded_generator(seed, "classifier")
    surgery.reinit_linear_head(
        surgery.classifier_head(model), model.config.initializer_range, generator
    )
    return model


def build_model(config: TrialConfig) -> nn.Module:
    """The model for ``config`` (its task's head) with its surgery applied.

    Deterministic: the same config gives bit-identical weights. The head comes from
    ``reset_classifier``; the pooler and embeddings stay pretrained. Surgery order: permute
    (``layer_order``), then reinitialize layers, then heads (see ``TrialConfig``).
    """
    model = reset_classifier(load_pretrained(config.model, config.task), config.seed)
    config.check(loaded_shape(model))
    std = model.config.initializer_range
    if config.layer_order is not None:
        surgery.permute_layers(model, config.layer_order)
    surgery.reinit_layers(model, config.reinit_layers, std=std, seed=config.seed,
                          reset_layernorm=not config.preserve_layernorm,
                          scheme=config.init_scheme)
    surgery.reinit_heads(model, config.reinit_heads, std=std, seed=config.seed,
                         scheme=config.init_scheme)
    return model
