"""Building a trial's model: the pretrained checkpoint, a seeded task head, surgery.

``load_pretrained`` keeps one loaded checkpoint per process (a Ray actor reused across trials
loads each model once and deep-copies it per trial: ``from_pretrained`` costs seconds, a copy
milliseconds). ``build_model`` checks the config against the loaded model's real shape, then
applies the surgery in the order ``TrialConfig`` documents.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import TYPE_CHECKING

from transformers import AutoModelForQuestionAnswering, AutoModelForSequenceClassification
from transformers.utils import logging as hf_logging

from reinit_tune.errors import InputError
from reinit_tune.model import surgery
from reinit_tune.model.files import layer_indices
from reinit_tune.model.shape import ModelShape, resolve_model
from reinit_tune.tasks import get_task

if TYPE_CHECKING:
    from torch import nn

    from reinit_tune.config import TrialConfig

log = logging.getLogger("reinit_tune")

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
                loaded, info = AutoModelForQuestionAnswering.from_pretrained(
                    resolve_model(model), output_loading_info=True)
            else:
                loaded, info = AutoModelForSequenceClassification.from_pretrained(
                    resolve_model(model), num_labels=spec.num_labels,
                    problem_type=("regression" if spec.is_regression
                                  else "single_label_classification"),
                    output_loading_info=True,
                )
        finally:
            hf_logging.set_verbosity(verbosity)
        check_loading_info(model, info, loaded.base_model_prefix)
        if getattr(loaded.config, "pad_token_id", None) is None:
            # Decoders pool the last non-padding token: they must know the padding id.
            from reinit_tune.data import load_tokenizer

            loaded.config.pad_token_id = load_tokenizer(model).pad_token_id
        _checkpoints.clear()  # one model per worker is the common case; bound the memory
        _checkpoints[key] = loaded.eval()
    return copy.deepcopy(_checkpoints[key])


# A pretrained checkpoint need not hold a pooler (some encoders are saved without one; it then
# trains from its initialization). The task head is new by definition: every weight outside
# the base model (``surgery.head_modules``; drawn per trial by ``reset_classifier``).
_POOLER = re.compile(r"(^|\.)pooler\.")


def check_loading_info(model: str, info: dict, base_prefix: str) -> None:
    """Refuse a checkpoint whose weights do not cover the model its config describes (what
    transformers reports as missing, unexpected or mismatched weights), instead of training
    layers it silently left at their random initialization."""
    def in_base(key: str) -> bool:
        return key.startswith(f"{base_prefix}.")

    missing = [k for k in info.get("missing_keys", ()) if in_base(k)]
    pooler = [k for k in missing if _POOLER.search(k)]
    missing = [k for k in missing if k not in pooler]
    unexpected = [k for k in info.get("unexpected_keys", ()) if layer_indices([k])]
    mismatched = [k[0] if isinstance(k, tuple) else k for k in info.get("mismatched_keys", ())
                  if in_base(k[0] if isinstance(k, tuple) else k)]
    problems = []
    if missing:
        problems.append(f"{len(missing)} weights its config declares are missing (e.g. "
                        f"{', '.join(sorted(missing)[:3])})")
    if unexpected:
        problems.append(f"it holds weights of layers its config does not declare (e.g. "
                        f"{', '.join(sorted(unexpected)[:3])})")
    if mismatched:
        problems.append(f"{len(mismatched)} weights have another shape than the config says "
                        f"(e.g. {', '.join(sorted(mismatched)[:3])})")
    if problems:
        raise InputError(f"model: {model}: " + "; ".join(problems) + "; fix config.json "
                         "(num_hidden_layers, sizes) or save the model again")
    if pooler:
        log.warning("model %s has no pooler weights; the pooler starts from its random "
                    "initialization", model)


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
    """Draw the task head (``surgery.head_modules``: the classifier or span head, and any
    other module the task model adds to its base model) from N(0, initializer_range) with
    zero bias, as transformers initializes it, from a generator seeded by ``seed``."""
    generator = surgery.seeded_generator(seed, "classifier")
    std = getattr(model.config, "initializer_range", 0.02)
    for head in surgery.head_modules(model):
        surgery.reinit_linear_head(head, std, generator)
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
