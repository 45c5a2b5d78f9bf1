"""How a trial on a GPU computes attention and dropout, so that a trial pack
(``reinit_tune.training.pack``) computes exactly what each of its trials computes alone.

A pack's members draw each dropout mask with ``bernoulli_`` from their seed's generator
(``reinit_tune.training.pack_dropout``; a pack of a model outside the BERT family, of one
seed, under ``vmap(randomness="same")`` from the global one). On the CPU that is the draw an
unpacked trial makes (PyTorch's CPU dropout is ``bernoulli_`` too). On CUDA it is not, in two
ways, both seen on an H200 with torch 2.11 (``benchmarks/RESULTS.md``):

- CUDA's dropout is a fused kernel that maps its random stream onto the mask in its own way,
  so an unpacked CUDA trial drew other masks than its pack member (train losses 5% apart for a
  bert-base-shaped model after 3 epochs).
- CUDA's fused attention kernels (flash, memory-efficient, cuDNN) draw attention-dropout masks
  inside the kernel, and ``vmap`` refuses them ("Vmap does not currently support same
  randomness with a batched tensor input"); PyTorch's math kernel under ``vmap`` and bf16
  autocast failed in its backward ("expected input and grad types to match").

So on CUDA every trial that may share a pack (``pack.packable``), packed or not, runs
(``exact_on``): dropout as ``bernoulli_`` (mask ~ Bernoulli(1 - p), output = input x mask x
1/(1 - p); registered once per process for the CUDA dispatch key), which is what a pack's
member draws from its seed's stream (``reinit_tune.training.pack_dropout``), and the model's
eager attention (softmax and dropout as separate operators, which autocast and ``vmap`` both
handle). Trials that never share a pack (probing, sequential transfer, QA) keep the fused
kernels. Elsewhere nothing changes.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Iterator

import torch
from torch import nn

# Devices whose trials run with eager attention and bernoulli_ dropout.
EXACT_DEVICES = frozenset({"cuda"})
_REGISTERED: dict[str, torch.library.Library] = {}


def bernoulli_dropout(input: torch.Tensor, p: float, train: bool | None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """``aten::native_dropout`` computed as PyTorch's CPU kernel and vmap's rule compute it:
    (output, boolean mask)."""
    if train is False or p == 0:
        return input.clone(), torch.ones_like(input, dtype=torch.bool)
    keep = 1.0 - p
    mask = torch.empty_like(input).bernoulli_(keep)
    output = input.mul(mask).mul_(0.0 if keep == 0 else 1.0 / keep)
    return output, mask.to(torch.bool)


def use_bernoulli_dropout(dispatch_key: str) -> None:
    """Make ``aten::native_dropout`` on ``dispatch_key`` ("CUDA") ``bernoulli_dropout`` for
    the rest of this process (idempotent)."""
    if dispatch_key in _REGISTERED:
        return
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # "Overriding a previously registered kernel": intended
        warnings.simplefilter("ignore")
        library.impl("native_dropout", bernoulli_dropout, dispatch_key)
    _REGISTERED[dispatch_key] = library


@contextlib.contextmanager
def exact_on(device: torch.device, modules: Iterable[nn.Module]) -> Iterator[None]:
    """While training ``modules`` on ``device``: on an ``EXACT_DEVICES`` device, bernoulli_
    dropout and eager attention (restored afterwards); elsewhere nothing."""
    if device.type not in EXACT_DEVICES:
        yield
        return
    use_bernoulli_dropout(device.type.upper())
    from transformers import PreTrainedModel

    # each module's outermost model: setting it sets its submodels
    models = [m for m in (next((m for m in module.modules() if isinstance(m, PreTrainedModel)),
                               None) for module in modules) if m is not None]
    before = [m.config._attn_implementation for m in models]
    for m in models:
        m.set_attn_implementation("eager")
    try:
        yield
    finally:
        for m, implementation in zip(models, before, strict=True):
            m.set_attn_implementation(implementation)
