"""Model surgery: reinitialize parts of a pretrained encoder (S1, S6).

Pure functions: each takes a model (or module) and explicit randomness, changes it in place
and returns it; none reads global RNG state, so results depend only on the arguments.

The initializer is 003 App. A / 000 Alg. 1, the original BERT initializer: every ``nn.Linear``
weight drawn from a normal with mean 0 and std = ``initializer_range`` (0.02), truncated at
±2 std; biases 0; LayerNorm weight 1, bias 0. Embeddings are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

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
    head = getattr(model, "classifier", None)
    if head is None:
        raise TypeError(f"{type(model).__name__} has no classifier head")
    return head


@torch.no_grad()
def trunc_normal_(tensor: torch.Tensor, std: float, generator: torch.Generator) -> torch.Tensor:
    """Fill ``tensor`` from N(0, std²) truncated to [-2·std, 2·std] (003 App. A)."""
    # Draw on CPU in float32 so the values do not depend on the parameter's device or dtype.
    draw = torch.empty(tensor.shape, dtype=torch.float32)
    nn.init.trunc_normal_(draw, mean=0.0, std=std, a=-2 * std, b=2 * std, generator=generator)
    return tensor.copy_(draw)


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
    module: nn.Module, std: float, generator: torch.Generator, *, reset_layernorm: bool = True
) -> nn.Module:
    """Reinitialize every Linear (and, unless told otherwise, LayerNorm) inside ``module``."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            trunc_normal_(sub.weight, std, generator)
            if sub.bias is not None:
                sub.bias.zero_()
        elif isinstance(sub, nn.LayerNorm) and reset_layernorm:
            sub.weight.fill_(1.0)
            sub.bias.zero_()
    return module


def reinit_layers(
    model: nn.Module,
    indices: Iterable[int],
    *,
    std: float,
    seed: int,
    reset_layernorm: bool = True,
) -> nn.Module:
    """Reinitialize the encoder layers at 0-based ``indices``; all else stays bit-identical."""
    layers = layer_stack(model)
    for i in indices:
        if not 0 <= i < len(layers):
            raise IndexError(f"layer {i} out of range 0..{len(layers) - 1}")
        reinit_module(
            layers[i], std, seeded_generator(seed, "layer", i), reset_layernorm=reset_layernorm
        )
    return model
