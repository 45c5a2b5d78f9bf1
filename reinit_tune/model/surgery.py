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

Embeddings are never touched.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import torch
from torch import nn

from reinit_tune.config import INIT_SCHEMES
from reinit_tune.seeding import derive_seed


def seeded_generator(seed: int, *purpose: object) -> torch.Generator:
    """A CPU generator whose stream depends only on ``seed`` and ``purpose``.

    Reinitializing layer 7 with seed 3 draws the same weights whichever other layers are
    reinitialized too, so trials that share a seed are paired across k.
    """
    return torch.Generator().manual_seed(derive_seed(seed, *purpose))


def layer_stack(model: nn.Module) -> nn.ModuleList:
    """The list of transformer layers of a BERT-family model (``base_model.encoder.layer``)."""
    base = getattr(model, "base_model", model)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList):
        raise TypeError(
            f"{type(model).__name__} has no encoder.layer list; reinit-tune supports "
            "BERT-family encoders (BERT, MiniLM, RoBERTa, ELECTRA)"
        )
    return layers


def classifier_head(model: nn.Module) -> nn.Module:
    """The task head: a sequence classifier's ``classifier``, a QA model's ``qa_outputs``."""
    head = getattr(model, "classifier", None) or getattr(model, "qa_outputs", None)
    if head is None:
        raise TypeError(f"{type(model).__name__} has no classifier or span head")
    return head


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


@torch.no_grad()
def reinit_module(
    module: nn.Module,
    std: float,
    generator: torch.Generator,
    *,
    reset_layernorm: bool = True,
    scheme: str = "bert",
) -> nn.Module:
    """Reinitialize every Linear (and, unless told otherwise, LayerNorm) inside ``module``.

    ``reset_layernorm=False`` is the 003 App. F variant: LayerNorms keep their
    pretrained parameters. Under "authors-code" biases keep their pretrained values.
    """
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            trunc_normal_(sub.weight, std, generator, scheme)
            if sub.bias is not None and scheme == "bert":
                sub.bias.zero_()
        elif isinstance(sub, nn.LayerNorm) and reset_layernorm:
            sub.weight.fill_(1.0)
            sub.bias.zero_()
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


def attention_projections(layer: nn.Module) -> tuple[nn.Linear, nn.Linear, nn.Linear, nn.Linear]:
    """Query, key, value and attention-output projections of a BERT-family layer."""
    try:
        attention = layer.attention
        return (attention.self.query, attention.self.key, attention.self.value,
                attention.output.dense)
    except AttributeError:
        raise TypeError(
            f"{type(layer).__name__} is not a BERT-family layer (attention.self.query/key/value, "
            "attention.output.dense); head reinitialization needs one"
        ) from None


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

    For head h of layer i with head size d: rows h·d..(h+1)·d of the Q, K and V weights and
    the same slice of their biases (zeroed under "bert", kept under "authors-code"), and
    columns h·d..(h+1)·d of the attention output projection, whose bias is shared by all
    heads and kept. That is how the layer splits its projections into heads.
    """
    layers = layer_stack(model)
    n_heads = model.config.num_attention_heads
    for layer_index, head in heads:
        _check_layer(layers, layer_index)
        if not 0 <= head < n_heads:
            raise IndexError(f"head {head} out of range 0..{n_heads - 1}")
        query, key, value, output = attention_projections(layers[layer_index])
        d = query.out_features // n_heads
        rows = slice(head * d, (head + 1) * d)
        generator = seeded_generator(seed, "head", layer_index, head)
        for proj in (query, key, value):
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
        layers[position] = copy.deepcopy(originals[source])
    return model
