"""Model surgery: reinitialize layers or heads, permute layers.

Pure functions: each takes a model (or module) and explicit randomness, changes it in place
and returns it; none reads global RNG state, so results depend only on the arguments.

Two initialization schemes (``scheme``):

- ``"bert"``, 003 App. A / 000 Alg. 1, the original BERT initializer: every ``nn.Linear``
  weight drawn from a normal with mean 0 and std σ = ``initializer_range`` (0.02), truncated
  at ±2σ; biases 0; LayerNorm weight 1, bias 0.
- ``"authors-code"``, what the 003 authors' released code does: it calls
  ``scipy.stats.truncnorm(-2σ, 2σ, scale=σ)``, whose bounds are in *standard* units, so the
  weights are N(0, σ²) truncated at ±2σ·σ = ±2σ² (std ≈ 0.00046 for σ = 0.02); biases keep
  their pretrained values; LayerNorm is reset to (1, 0).

Embeddings are never touched. Blocks are found by ``reinit_tune.model.stacks``, so every
function here works on every supported architecture (BERT-family encoders, DistilBERT,
DeBERTa-v2, MPNet, GPT-2, Llama-style decoders).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import torch
from torch import nn

from reinit_tune.config import INIT_SCHEMES
from reinit_tune.model.stacks import locate
from reinit_tune.seeding import derive_seed


def seeded_generator(seed: int, *purpose: object) -> torch.Generator:
    """A CPU generator whose stream depends only on ``seed`` and ``purpose``.

    Reinitializing layer 7 with seed 3 draws the same weights whichever other layers are
    reinitialized too, so trials that share a seed are paired across k.
    """
    return torch.Generator().manual_seed(derive_seed(seed, *purpose))


def layer_stack(model: nn.Module) -> nn.ModuleList:
    """The list of transformer blocks of a supported model (``reinit_tune.model.stacks``)."""
    return locate(model).layers


def head_modules(model: nn.Module) -> list[nn.Module]:
    """The task head: every child of the task model outside its base model (a classifier,
    DistilBERT's pre_classifier, DeBERTa's pooler, a decoder's ``score``, ``qa_outputs``)."""
    base = getattr(model, "base_model", None)
    heads = [child for child in model.children()
             if child is not base and any(True for _ in child.parameters())]
    if base is None or base is model or not heads:
        raise TypeError(f"{type(model).__name__} has no task head")
    return heads


def classifier_head(model: nn.Module) -> nn.Linear:
    """The task head's final linear layer (what a linear probe trains)."""
    hidden = model.config.hidden_size
    for head in reversed(head_modules(model)):
        linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
        if linears and linears[-1].in_features == hidden:
            return linears[-1]
    raise TypeError(f"{type(model).__name__} has no linear output layer on its hidden state")


def truncation_bound(std: float, scheme: str = "bert") -> float:
    """Where the weight distribution of ``scheme`` is cut: 2σ, or 2σ² for "authors-code"
    (scipy's ``truncnorm(a, b, scale=σ)`` cuts at a·σ and b·σ; the authors passed a = -2σ)."""
    if scheme == "bert":
        return 2 * std
    if scheme == "authors-code":
        return 2 * std * std
    raise ValueError(f"init_scheme: {scheme!r}; allowed: {list(INIT_SCHEMES)}")


def draw_weights(
    shape: tuple[int, ...], std: float, generator: torch.Generator, scheme: str = "bert"
) -> torch.Tensor:
    """A float32 CPU tensor from N(0, std²) truncated at ±``truncation_bound(std, scheme)``."""
    # Drawn on CPU in float32 so the values do not depend on the parameter's device or dtype.
    bound = truncation_bound(std, scheme)
    draw = torch.empty(shape, dtype=torch.float32)
    return nn.init.trunc_normal_(draw, mean=0.0, std=std, a=-bound, b=bound, generator=generator)


@torch.no_grad()
def trunc_normal_(
    tensor: torch.Tensor, std: float, generator: torch.Generator, scheme: str = "bert"
) -> torch.Tensor:
    """Fill ``tensor`` from the weight distribution of ``scheme`` (003 App. A by default)."""
    return tensor.copy_(draw_weights(tuple(tensor.shape), std, generator, scheme))


@torch.no_grad()
def reinit_linear_head(head: nn.Module, std: float, generator: torch.Generator) -> nn.Module:
    """Classification head as transformers initializes it: N(0, std) weights, zero biases."""
    for module in head.modules():
        if isinstance(module, nn.Linear):
            draw = torch.empty(module.weight.shape, dtype=torch.float32)
            draw.normal_(0.0, std, generator=generator)
            module.weight.copy_(draw)
            if module.bias is not None:
                module.bias.zero_()
    return head


def _is_conv1d(module: nn.Module) -> bool:
    """transformers' Conv1D (GPT-2): a Linear whose weight is stored (in, out)."""
    return type(module).__name__ == "Conv1D" and hasattr(module, "nf")


def _is_rms_norm(module: nn.Module) -> bool:
    return type(module).__name__.endswith("RMSNorm") and isinstance(
        getattr(module, "weight", None), nn.Parameter)


@torch.no_grad()
def reinit_module(
    module: nn.Module,
    std: float,
    generator: torch.Generator,
    *,
    reset_layernorm: bool = True,
    scheme: str = "bert",
) -> nn.Module:
    """Reinitialize every Linear (GPT-2's Conv1D too) and, unless told otherwise, every norm
    inside ``module``: LayerNorm to weight 1 and bias 0, RMSNorm to weight 1.

    ``reset_layernorm=False`` is the 003 App. F variant: norms keep their pretrained
    parameters. Under "authors-code" biases keep their pretrained values.
    """
    for sub in module.modules():
        if isinstance(sub, nn.Linear) or _is_conv1d(sub):
            trunc_normal_(sub.weight, std, generator, scheme)
            if sub.bias is not None and scheme == "bert":
                sub.bias.zero_()
        elif isinstance(sub, nn.LayerNorm) and reset_layernorm:
            if sub.weight is not None:
                sub.weight.fill_(1.0)
            if sub.bias is not None:
                sub.bias.zero_()
        elif _is_rms_norm(sub) and reset_layernorm:
            sub.weight.fill_(1.0)
    return module


def _check_layer(layers: nn.ModuleList, i: int) -> None:
    if not 0 <= i < len(layers):
        raise IndexError(f"layer {i} out of range 0..{len(layers) - 1}")


def reinit_layers(
    model: nn.Module,
    indices: Iterable[int],
    *,
    std: float,
    seed: int,
    reset_layernorm: bool = True,
    scheme: str = "bert",
) -> nn.Module:
    """Reinitialize the encoder layers at 0-based ``indices``; all else stays bit-identical."""
    layers = layer_stack(model)
    for i in indices:
        _check_layer(layers, i)
        reinit_module(layers[i], std, seeded_generator(seed, "layer", i),
                      reset_layernorm=reset_layernorm, scheme=scheme)
    return model


@torch.no_grad()
def reinit_heads(
    model: nn.Module,
    heads: Iterable[tuple[int, int]],
    *,
    std: float,
    seed: int,
    scheme: str = "bert",
) -> nn.Module:
    """Reinitialize single attention heads (001 Exp 3); every other element is kept.

    For head h of block i with head size d: rows h·d..(h+1)·d of the query, key and value
    weights and the same slice of their biases (zeroed under "bert", kept under
    "authors-code"), and columns h·d..(h+1)·d of the attention output projection, whose bias
    is shared by all heads and kept. That is how a block splits its projections into heads.
    GPT-2's fused ``c_attn`` holds [q | k | v] as column blocks of its (in, 3·hidden) weight:
    head h is columns h·d.. of each block, and rows h·d.. of ``c_proj``. With grouped-query
    attention (Llama-style; fewer key/value heads than query heads) ``(i, h)`` names query
    head h: its query rows and output columns are redrawn, and the key/value head it shares
    with the other query heads of its group is kept.
    """
    stack = locate(model)
    n_heads, d = stack.num_heads, stack.head_size
    grouped = stack.num_kv_heads != n_heads
    for layer_index, head in heads:
        _check_layer(stack.layers, layer_index)
        if not 0 <= head < n_heads:
            raise IndexError(f"head {head} out of range 0..{n_heads - 1}")
        rows = slice(head * d, (head + 1) * d)
        generator = seeded_generator(seed, "head", layer_index, head)
        output = stack.part(layer_index, "output")
        if stack.arch.qkv:
            fused = stack.part(layer_index, "qkv")  # Conv1D: weight (in, 3 * n_heads * d)
            width = n_heads * d
            for block in range(3):
                cols = slice(block * width + head * d, block * width + (head + 1) * d)
                draw = draw_weights((d, fused.weight.shape[0]), std, generator, scheme)
                fused.weight[:, cols].copy_(draw.T)
                if fused.bias is not None and scheme == "bert":
                    fused.bias[cols].zero_()
            draw = draw_weights((output.weight.shape[1], d), std, generator, scheme)
            output.weight[rows, :].copy_(draw.T)  # Conv1D: the head's input rows
            continue
        roles = ("query",) if grouped else ("query", "key", "value")
        for role in roles:
            proj = stack.part(layer_index, role)
            proj.weight[rows].copy_(draw_weights((d, proj.in_features), std, generator, scheme))
            if proj.bias is not None and scheme == "bert":
                proj.bias[rows].zero_()
        output.weight[:, rows].copy_(
            draw_weights((output.out_features, d), std, generator, scheme))
    return model


def permute_layers(model: nn.Module, order: Iterable[int]) -> nn.Module:
    """Reorder the encoder (003 §5): position i gets a deep copy of layer ``order[i]``."""
    layers = layer_stack(model)
    order = list(order)
    if sorted(order) != list(range(len(layers))):
        raise ValueError(f"layer_order: {order} is not a permutation of 0..{len(layers) - 1}")
    originals = list(layers)
    for position, source in enumerate(order):
        # the copies share the model's configs: a setting made on the model (its attention
        # implementation) must reach every layer, as it does in an unpermuted model
        shared = {id(c): c for m in originals[source].modules()
                  if (c := getattr(m, "config", None)) is not None}
        layers[position] = copy.deepcopy(originals[source], memo=shared)
    return model
