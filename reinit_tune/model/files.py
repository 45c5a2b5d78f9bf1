"""What a local model folder holds, read from its files without building the model.

Pre-flight uses this to refuse a model before any trial allocates it: a ``config.json`` that
cannot be read or describes an impossible or implausibly large model, weights missing for
layers the config declares (or holding more layers than it declares), a truncated or
corrupted safetensors file, a vocabulary smaller than the tokenizer's. Safetensors headers
are parsed directly (8-byte length, then JSON), so checking a multi-gigabyte checkpoint reads
a few kilobytes; a ``pytorch_model.bin`` is memory-mapped, never read in full.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from reinit_tune.errors import InputError

# Transformer layers are numbered modules: BERT's encoder.layer.N, GPT-2's h.N, Llama's
# layers.N; a weight name names its layer's index once.
LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h)\.(\d+)\.")
# Beyond any model a single trial can finetune here (bert-large is 0.34e9; the papers' largest
# models are under 1e9): a config asking for more is a typo, not a model.
MAX_PARAMETERS = 30e9
_HEADER_LIMIT = 100 * 2**20  # a safetensors header is kilobytes; more means a corrupt file


# What GPT-2 and DistilBERT call the fields BERT's config names (transformers aliases them on
# the config object; config.json keeps each family's own names).
ALIASES = {
    "num_hidden_layers": ("n_layer", "n_layers"),
    "num_attention_heads": ("n_head", "n_heads"),
    "hidden_size": ("n_embd", "dim"),
    "intermediate_size": ("n_inner", "hidden_dim"),
    "max_position_embeddings": ("n_positions",),
}


def read_config(folder: Path) -> dict[str, Any]:
    """``folder/config.json`` as a dict, with BERT's field names added for a family that
    names them otherwise (``ALIASES``); ``InputError`` naming the file if it is unreadable."""
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"model: {path} is not valid JSON ({e}); rewrite it with "
                         "config.save_pretrained") from None
    if not isinstance(config, dict):
        raise InputError(f"model: {path} holds {type(config).__name__}, not a JSON object; "
                         "rewrite it with config.save_pretrained")
    for name, aliases in ALIASES.items():
        if name not in config:
            for alias in aliases:
                if config.get(alias) is not None:
                    config[name] = config[alias]
                    break
    return config


def safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """Tensor name → shape from a safetensors file's header; ``InputError`` naming the file
    if the header is unreadable or the data is shorter or longer than the header says."""
    size = path.stat().st_size
    with path.open("rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise InputError(f"model: {path} is truncated ({size} bytes); save the model again")
        (length,) = struct.unpack("<Q", prefix)
        if length > min(_HEADER_LIMIT, size - 8):
            raise InputError(f"model: {path} is corrupted or truncated (header of {length} "
                             f"bytes in a {size}-byte file); save the model again")
        try:
            header = json.loads(f.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise InputError(f"model: {path} is corrupted (unreadable header); save the model "
                             "again") from None
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    try:
        end = max((v["data_offsets"][1] for v in tensors.values()), default=0)
        shapes = {k: list(v["shape"]) for k, v in tensors.items()}
    except (TypeError, KeyError, IndexError):
        raise InputError(f"model: {path} is corrupted (malformed header); save the model "
                         "again") from None
    if 8 + length + end != size:
        raise InputError(f"model: {path} is truncated or corrupted: its header describes "
                         f"{8 + length + end} bytes, the file has {size}; save the model again")
    return shapes


def weight_shapes(folder: Path) -> dict[str, list[int]] | None:
    """Parameter name → shape of the weights in ``folder`` (None: no weights file found)."""
    single = folder / "model.safetensors"
    if single.is_file():
        return safetensors_shapes(single)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise InputError(f"model: {index} is not a valid weight index; save the model "
                             "again") from None
        shapes: dict[str, list[int]] = {}
        for shard in shards:
            if not (folder / shard).is_file():
                raise InputError(f"model: {index} names {shard}, which {folder} lacks; save the "
                                 "model again, or copy every shard of the checkpoint there")
            shapes.update(safetensors_shapes(folder / shard))
        return shapes
    path = folder / "pytorch_model.bin"
    if not path.is_file():
        return None
    import torch

    try:
        state = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any failure means the file is unusable
        raise InputError(f"model: {path} cannot be read ({type(e).__name__}: {e}); "
                         "save the model again") from None
    return {k: list(v.shape) for k, v in state.items()}


def layer_indices(names: list[str] | dict) -> set[int]:
    """Indices of the numbered transformer layers that ``names`` hold weights for."""
    return {int(m.group(1)) for name in names if (m := LAYER_INDEX.search(name))}


def estimated_parameters(config: dict[str, Any]) -> float:
    """Rough parameter count of a transformer encoder from its config: 12·L·H² for the
    layers plus the embeddings (enough to tell a real model from a typo)."""
    layers = float(config.get("num_hidden_layers", 0))
    hidden = float(config.get("hidden_size", 0))
    vocab = float(config.get("vocab_size", 0))
    positions = float(config.get("max_position_embeddings", 0))
    intermediate = float(config.get("intermediate_size", 4 * hidden))
    return layers * (4 * hidden * hidden + 2 * hidden * intermediate) + (vocab + positions) * hidden


def check_config(config: dict[str, Any], path: Path) -> list[str]:
    """Sizes in ``config`` that no model can have, or no trial here could allocate."""
    problems = []
    for key in ("num_hidden_layers", "num_attention_heads", "hidden_size", "vocab_size"):
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{path}: {key} must be a whole number >= 1, got {value!r}")
    if problems:
        return problems
    heads, hidden = config.get("num_attention_heads"), config.get("hidden_size")
    if heads and hidden and hidden % heads:
        problems.append(f"{path}: hidden_size {hidden} is not divisible by "
                        f"num_attention_heads {heads}; fix one of them")
    kv = config.get("num_key_value_heads")
    if kv is not None and (isinstance(kv, bool) or not isinstance(kv, int) or kv < 1
                           or (heads and heads % kv)):
        problems.append(f"{path}: num_key_value_heads {kv!r} does not divide "
                        f"num_attention_heads {heads} (each key/value head serves a whole "
                        "group of query heads); fix one of them")
    if (n := estimated_parameters(config)) > MAX_PARAMETERS:
        problems.append(f"{path}: describes a model of ~{n / 1e9:,.0f}B parameters "
                        f"(num_hidden_layers {config.get('num_hidden_layers')}, hidden_size "
                        f"{config.get('hidden_size')}); fix config.json")
    return problems


def check_weights(folder: Path, config: dict[str, Any]) -> list[str]:
    """The weights against the config: every declared layer present, no extra layers, the
    word embeddings as large as ``vocab_size``."""
    try:
        shapes = weight_shapes(folder)
    except InputError as e:
        return [str(e)]
    if shapes is None:
        return []  # reported by the caller, which knows which file names it accepts
    problems = []
    declared = config.get("num_hidden_layers")
    found = layer_indices(shapes)
    if isinstance(declared, int) and found != set(range(declared)):
        have = f"layers {min(found)}..{max(found)} ({len(found)})" if found else "no layers"
        problems.append(f"model: {folder / 'config.json'} declares {declared} layers but the "
                        f"weights in {folder} hold {have}; fix num_hidden_layers, or save the "
                        "model again")
    embeddings = [s for name, s in shapes.items()
                  if name.endswith(("word_embeddings.weight", "embed_tokens.weight",
                                    "wte.weight"))]
    vocab = config.get("vocab_size")
    if embeddings and isinstance(vocab, int) and embeddings[0][0] != vocab:
        problems.append(f"model: {folder / 'config.json'} says vocab_size {vocab} but the word "
                        f"embeddings hold {embeddings[0][0]} rows; fix vocab_size")
    # ELECTRA's embeddings may be narrower than its layers: they declare embedding_size.
    width = config.get("embedding_size") or config.get("hidden_size")
    if embeddings and isinstance(width, int) and embeddings[0][-1] != width:
        field = "embedding_size" if config.get("embedding_size") else "hidden_size"
        problems.append(f"model: {folder / 'config.json'} says {field} {width} but the word "
                        f"embeddings in {folder} are {embeddings[0][-1]} wide; fix {field}, "
                        "or pass the config saved with these weights")
    return problems


# A sequence-classification head's output layer, by family: its rows are the labels.
HEAD_OUTPUTS = ("classifier.weight", "classifier.out_proj.weight", "score.weight")


def head_labels(folder: Path) -> int | None:
    """How many labels the classification head saved in ``folder`` has (None: no head, or
    weights that cannot be read, which ``check_weights`` reports)."""
    try:
        shapes = weight_shapes(folder)
    except InputError:
        return None
    for name, shape in (shapes or {}).items():
        if name in HEAD_OUTPUTS and len(shape) == 2:
            return shape[0]
    return None
