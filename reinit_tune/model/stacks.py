"""Where each supported architecture keeps its block stack, and each block's parts by role.

One table, ``ARCHITECTURES``, keyed by ``config.model_type``: the path of the block list
below the base model, the attention projections of a block (separate query/key/value, or one
fused matrix), the attention output, the config fields holding the head counts. Everything
that touches blocks (surgery, probing, learning-rate multipliers, similarity) goes through
``locate``, so a new architecture is one entry here.

Supported: BERT (all sizes, MiniLM), RoBERTa, XLM-R, ELECTRA, DistilBERT, DeBERTa-v2/v3,
MPNet (encoders); GPT-2 (fused ``c_attn`` Conv1D) and Llama/Mistral/Qwen2-style decoders
(grouped-query attention). ALBERT is refused: its layers share one set of weights, so
"reinitialize layer i" would change every layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from reinit_tune.errors import InputError


@dataclass(frozen=True)
class Architecture:
    """How one family lays out its blocks. Paths are attribute paths (dots) from the base
    model (``model.base_model``) to the block list, and from a block to each part."""

    family: str
    layers: str
    query: str | None = None
    key: str | None = None
    value: str | None = None
    qkv: str | None = None  # one fused [q; k; v] projection (GPT-2's Conv1D c_attn)
    output: str = ""  # the attention output projection
    mlp_in: tuple[str, ...] = ()
    mlp_out: str = ""
    heads: str = "num_attention_heads"
    kv_heads: str | None = None  # grouped-query attention: the key/value head count field
    segments: bool = True  # takes token_type_ids


_BERT = Architecture(
    "bert", "encoder.layer", "attention.self.query", "attention.self.key",
    "attention.self.value", output="attention.output.dense", mlp_in=("intermediate.dense",),
    mlp_out="output.dense")
_LLAMA = Architecture(
    "llama", "layers", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
    output="self_attn.o_proj", mlp_in=("mlp.gate_proj", "mlp.up_proj"), mlp_out="mlp.down_proj",
    kv_heads="num_key_value_heads", segments=False)

ARCHITECTURES: dict[str, Architecture] = {
    "bert": _BERT,
    "roberta": _BERT,
    "xlm-roberta": _BERT,
    "camembert": _BERT,
    "electra": _BERT,
    "distilbert": Architecture(
        "distilbert", "transformer.layer", "attention.q_lin", "attention.k_lin",
        "attention.v_lin", output="attention.out_lin", mlp_in=("ffn.lin1",),
        mlp_out="ffn.lin2", heads="n_heads", segments=False),
    "deberta-v2": Architecture(
        "deberta-v2", "encoder.layer", "attention.self.query_proj", "attention.self.key_proj",
        "attention.self.value_proj", output="attention.output.dense",
        mlp_in=("intermediate.dense",), mlp_out="output.dense"),
    "mpnet": Architecture(
        "mpnet", "encoder.layer", "attention.attn.q", "attention.attn.k", "attention.attn.v",
        output="attention.attn.o", mlp_in=("intermediate.dense",), mlp_out="output.dense",
        segments=False),
    "gpt2": Architecture(
        "gpt2", "h", qkv="attn.c_attn", output="attn.c_proj", mlp_in=("mlp.c_fc",),
        mlp_out="mlp.c_proj", heads="n_head", segments=False),
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "qwen2": _LLAMA,
}
REFUSED = {
    "albert": "ALBERT shares one set of weights across all its layers, so reinitializing, "
              "permuting or probing one layer is not defined; pass an architecture with "
              "separate layers",
}


def architecture(model_type: str | None) -> Architecture:
    """The table entry for ``model_type``; ``InputError`` saying why where there is none."""
    if model_type in REFUSED:
        raise InputError(f"model: {model_type}: {REFUSED[model_type]}")
    if model_type is None or model_type not in ARCHITECTURES:
        raise InputError(f"model: architecture {model_type!r} is not supported; supported: "
                         f"{', '.join(sorted(ARCHITECTURES))}; pass one of those")
    return ARCHITECTURES[model_type]


def _get(root: nn.Module, path: str) -> nn.Module:
    module = root
    for part in path.split("."):
        module = getattr(module, part)
    return module


def base_model(model: nn.Module) -> nn.Module:
    """The transformer below any task head (a base model is returned as it is)."""
    return getattr(model, "base_model", model)


@dataclass(frozen=True)
class Stack:
    """A loaded model's block list and what surgery needs to know of its blocks."""

    arch: Architecture
    layers: nn.ModuleList
    num_heads: int
    num_kv_heads: int
    head_size: int

    def part(self, block: int, role: str) -> nn.Module:
        """The module playing ``role`` ("query", "key", "value", "qkv", "output", "mlp_out")
        in block ``block``."""
        path = getattr(self.arch, role)
        if not path:
            raise TypeError(f"{self.arch.family} blocks have no {role} projection")
        return _get(self.layers[block], path)

    def set_layers(self, model: nn.Module, layers: nn.ModuleList) -> None:
        """Put ``layers`` where the block list lives (probing truncates it, then restores)."""
        parent, _, name = self.arch.layers.rpartition(".")
        owner = _get(base_model(model), parent) if parent else base_model(model)
        setattr(owner, name, layers)


def locate(model: nn.Module) -> Stack:
    """The block stack of a loaded model (a task model or a base model)."""
    config = model.config
    arch = architecture(getattr(config, "model_type", None))
    try:
        layers = _get(base_model(model), arch.layers)
    except AttributeError:
        layers = None
    if not isinstance(layers, nn.ModuleList):
        raise InputError(f"model: {type(model).__name__} ({arch.family}) has no block list at "
                         f"{type(base_model(model)).__name__}.{arch.layers}; not the layout "
                         f"this architecture is known by")
    heads = int(getattr(config, arch.heads))
    hidden = int(config.hidden_size)  # GPT-2's n_embd and DistilBERT's dim are aliased to it
    kv = int(getattr(config, arch.kv_heads, None) or heads) if arch.kv_heads else heads
    head_size = int(getattr(config, "head_dim", None) or hidden // heads)
    return Stack(arch, layers, heads, kv, head_size)
