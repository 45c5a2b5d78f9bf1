"""Dropout inside a trial pack: every member draws exactly the masks its trial draws alone.

A trial draws its dropout masks from one stream, the global generator seeded with
``derive_seed(seed, "dropout")`` (``reinit_tune.training.loop``): each dropout call fills a
mask of the activation's shape with ``bernoulli_``, in the order the model calls dropout. A
pack (``reinit_tune.training.pack``) runs its members under ``torch.func.vmap`` and may hold
members of several seeds, each with its own training batch padded to a common length. So
inside a pack every dropout call goes through ``MemberDropout``, whose vmap rule draws, for
each seed of the pack from that seed's own generator (``DropoutStreams``), one mask of the
shape that seed's trial has at that call (its batch's own length, not the padded one), pads
it with ones, and applies it to every member of that seed. The draws, their shapes and their
order are those of the unpacked trials, so the masks are too (``tests/training/test_pack.py``
compares whole runs).

The activations dropout sees in the encoders packs run are batch-first: ``(batch, length,
hidden)`` for hidden states, ``(batch, heads, length, length)`` for attention
probabilities, ``(batch, hidden)`` for the pooled output; ``SEQUENCE_DIMS`` names the
sequence dimensions by rank. The pack runs its model's eager attention, whose attention
dropout is a ``torch.nn.functional.dropout`` call like every other one; ``intercept``
(a ``TorchFunctionMode``) routes those calls to ``MemberDropout`` while a pack trains.

The mask arithmetic is the unpacked trial's on each device: PyTorch's CPU dropout
(``noise = bernoulli(1 - p) / (1 - p)``, ``input * noise``) and, on the devices of
``reinit_tune.training.exact`` (CUDA), the ``bernoulli_`` dropout every packable trial there
runs (``input * mask * 1/(1 - p)``), so fp32 members equal their trials to the last bit of
the mask.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch.nn import functional as F  # noqa: N812 - PyTorch's own alias
from torch.overrides import TorchFunctionMode

from reinit_tune.training import exact

# Rank of a dropout input -> its sequence dimensions (batch-first encoder activations).
SEQUENCE_DIMS = {2: (), 3: (1,), 4: (2, 3)}


@dataclass
class DropoutStreams:
    """The dropout generators of a pack's seeds and what the current step looks like.

    ``generators[s]`` is seed s's stream (seeded as the unpacked trial seeds its global
    generator); ``member_seed[m]`` the seed index of member m; ``lengths[s]`` the length of
    seed s's batch this step (its trial's own padding) and ``padded`` the pack's common one.
    """

    generators: list[torch.Generator]
    member_seed: torch.Tensor
    lengths: list[int] = field(default_factory=list)
    padded: int = 0

    @classmethod
    def of(cls, seeds: Sequence[int], member_seed: Sequence[int],
           device: torch.device) -> DropoutStreams:
        """Streams seeded with ``seeds`` (each the trial's ``derive_seed(seed, "dropout")``)
        on ``device``, members mapped to them by ``member_seed``."""
        generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        return cls(generators, torch.tensor(list(member_seed), dtype=torch.long,
                                            device=device))

    def masks(self, shape: torch.Size, p: float, dtype: torch.dtype,
              device: torch.device) -> torch.Tensor:
        """The scaled keep-masks of every member for one dropout call on activations of
        (per-member) ``shape``: ``(members, *shape)``."""
        dims = SEQUENCE_DIMS.get(len(shape))
        if dims is None or any(shape[d] != self.padded for d in dims):
            raise RuntimeError(f"pack dropout: an activation of shape {tuple(shape)} is not "
                               f"batch-first with sequence length {self.padded}")
        keep = 1.0 - p
        per_seed = []
        for generator, length in zip(self.generators, self.lengths, strict=True):
            own = [length if d in dims else n for d, n in enumerate(shape)]
            mask = torch.empty(own, dtype=dtype, device=device).bernoulli_(keep,
                                                                           generator=generator)
            if device.type not in exact.EXACT_DEVICES:  # PyTorch's CPU dropout: the noise
                mask.div_(keep)  # holds the scale
            if own != list(shape):
                full = torch.ones(shape, dtype=dtype, device=device)
                full[tuple(slice(0, n) for n in own)] = mask
                mask = full
            per_seed.append(mask)
        stacked = torch.stack(per_seed)
        if len(per_seed) == 1:
            return stacked.expand(len(self.member_seed), *shape)
        return stacked.index_select(0, self.member_seed)


class MemberDropout(torch.autograd.Function):
    """``F.dropout`` of a pack's members, defined only under ``vmap`` (``intercept``)."""

    streams: DropoutStreams | None = None  # set by ``intercept`` while a pack trains

    @staticmethod
    def forward(x: torch.Tensor, p: float) -> torch.Tensor:  # noqa: D102 - see vmap
        raise RuntimeError("MemberDropout runs only inside a pack's vmap")

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:  # noqa: D102
        pass

    @staticmethod
    def vmap(info, in_dims, x: torch.Tensor, p: float):  # noqa: D102
        # runs on the members' stacked tensor: plain ops, which autograd records
        x = x.movedim(in_dims[0], 0) if in_dims[0] is not None else x.expand(
            info.batch_size, *x.shape)
        masks = MemberDropout.streams.masks(x.shape[1:], p, x.dtype, x.device)
        if x.device.type not in exact.EXACT_DEVICES:
            return x * masks, 0
        return x.mul(masks).mul(1.0 / (1.0 - p)), 0


class _Intercept(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.dropout:
            names = ("input", "p", "training", "inplace")
            bound = {**dict(zip(names, args, strict=False)), **kwargs}
            p, training = bound.get("p", 0.5), bound.get("training", True)
            if training and p > 0:
                return MemberDropout.apply(bound["input"], p)
        return func(*args, **kwargs)


@contextlib.contextmanager
def intercept(streams: DropoutStreams) -> Iterator[None]:
    """While a pack's training forward runs: every ``F.dropout`` draws from ``streams``."""
    MemberDropout.streams = streams
    try:
        with _Intercept():
            yield
    finally:
        MemberDropout.streams = None
