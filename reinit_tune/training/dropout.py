"""Stateless dropout: every mask is a pure function of (the trial's dropout key, the optimizer
step, the dropout call, the element's coordinates), the same for a trial run alone or as a
member of any pack, on every device.

The mask definition (``MASKS``, stored with every trial as ``TrialConfig.dropout``):

- a trial's 32-bit key: ``key32 = mix32(lo ^ mix32(hi))`` of its 63-bit
  ``derive_seed(seed, "dropout")`` (``trial_key``);
- the step's key: ``s = mix32((key32 + step) mod 2**32)``, ``step`` the 0-based optimizer
  step over the whole run (so a resumed trial draws what an uninterrupted one draws);
- the call's key: ``c = mix32(s ^ mix32(call + 1))``, ``call`` the 0-based index of the
  dropout call within the step's forward pass;
- an element's index: its coordinates in the trial's own activation with the sequence
  dimensions strided by the trial's ``max_seq_length`` S (not by the batch's length), so the
  padding a pack adds never moves a token's mask: ``(batch, hidden)`` -> ``b·H + h``;
  ``(batch, length, hidden)`` -> ``(b·S + l)·H + h``; ``(batch, heads, length, length)`` ->
  ``((b·A + a)·S + i)·S + j``; other ranks (only where nothing is padded) the row-major index;
- the element's draw ``u = mix32((lo + mix32(c ^ hi)) mod 2**32)`` of the index's low and
  high 32 bits; the element is kept when ``u >= floor(p·2**32)`` and then scaled by
  ``1 / (1 - p)`` in fp32.

A trial that could not draw these masks (``TrialConfig.dropout`` "stream", stored by an
earlier version) is refused (``check_masks``) rather than trained with other ones.

``mix32`` is a xorshift-multiply integer hash (three rounds, odd multipliers under 2**30, so
the eager version's int64 products never overflow and equal the fused kernel's wrapping
uint32 ones). Keeping or dropping an element is then a Bernoulli(1 - p) draw for practical
purposes (``tests/training/test_dropout.py`` checks rates and independence), and the backward
pass recomputes the mask instead of storing it.

``counter_dropout`` is that function as one PyTorch operator (``reinit_tune::counter_dropout``)
with its gradient and its ``vmap`` rule: on CUDA a Triton kernel (one launch per call, fused
with the scaling), elsewhere eager integer arithmetic; the two give the same masks bit for
bit. ``keys`` may carry leading member dimensions (a pack: one key per member), so a pack's
forward pass issues the same operators whatever its number of members and seeds.
``CounterDropout`` routes every ``F.dropout`` of a training forward pass to it; nothing else
about the process changes (no global generator is read, no kernel is replaced).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor
from torch.nn import functional as F  # noqa: N812 - PyTorch's own alias
from torch.overrides import TorchFunctionMode

from reinit_tune.config import DROPOUT_MASKS
from reinit_tune.seeding import derive_seed

# The mask definition this module draws (``TrialConfig.dropout``); trials stored before it
# drew from a generator stream (``"stream"``) and are a different computation.
MASKS = DROPOUT_MASKS[-1]
M32 = 0xFFFFFFFF
# Odd multipliers under 2**30: x < 2**32 times one stays under 2**62 in int64.
_MULTIPLIERS = (0x2C1B3C6D, 0x297A2D39, 0x1B873593)
_SHIFTS = (16, 12, 15, 16)
# Rank of a batch-first activation -> its sequence dimensions (strided by S, not by length).
SEQUENCE_DIMS = {2: (), 3: (1,), 4: (2, 3)}


def check_masks(config) -> None:
    """Refuse to train a ``TrialConfig`` whose masks are not this module's."""
    from reinit_tune.errors import InputError

    if config.dropout != MASKS:
        raise InputError(f"dropout: {config.dropout!r} masks were drawn by reinit-tune 0.2 and "
                         f"earlier and cannot be drawn again; this version trains {MASKS!r} "
                         "trials (leave the field at its default)")


def mix32(x: int) -> int:
    """The integer hash on one 32-bit value (Python ints; ``_mix32_`` is the tensor version)."""
    for shift, mult in zip(_SHIFTS, _MULTIPLIERS, strict=False):
        x ^= x >> shift
        x = (x * mult) & M32
    return x ^ (x >> _SHIFTS[-1])


def _mix32_(x: Tensor) -> Tensor:
    """``mix32`` in place on an int64 tensor of 32-bit values."""
    for shift, mult in zip(_SHIFTS, _MULTIPLIERS, strict=False):
        x.bitwise_xor_(x >> shift)
        x.mul_(mult).bitwise_and_(M32)
    return x.bitwise_xor_(x >> _SHIFTS[-1])


def trial_key(seed: int) -> int:
    """A trial's 32-bit dropout key, from its seed's dropout stream seed."""
    full = derive_seed(seed, "dropout")
    return mix32((full & M32) ^ mix32(full >> 32))


def keys_tensor(seeds: Sequence[int], device: torch.device | str) -> Tensor:
    """The dropout keys of trials of ``seeds``, one per trial, as the operator takes them."""
    return torch.tensor([trial_key(s) for s in seeds], dtype=torch.int64, device=device)


def threshold(p: float) -> int:
    """An element is kept when its draw is at least this: P(keep) = 1 - p to 2**-32."""
    return min(M32, math.floor(p * 2**32))


def element_index(shape: Sequence[int], stride: int) -> list[int]:
    """The multipliers of each coordinate of a ``shape`` activation in its element index: the
    sequence dimensions (``SEQUENCE_DIMS``) strided by ``stride`` (the trial's
    ``max_seq_length``) instead of their length."""
    dims = SEQUENCE_DIMS.get(len(shape))
    sizes = list(shape)
    if dims is not None:
        for d in dims:
            if sizes[d] > stride:
                raise ValueError(f"dropout: a sequence of {sizes[d]} tokens is longer than "
                                 f"max_seq_length {stride}")
            sizes[d] = stride
    multipliers, running = [], 1
    for size in reversed(sizes):
        multipliers.append(running)
        running *= size
    return multipliers[::-1]


def _indices(shape: Sequence[int], stride: int, device: torch.device) -> Tensor:
    """Every element's index (``element_index``) as an int64 tensor of ``shape``."""
    out = torch.zeros((), dtype=torch.int64, device=device)
    for d, (size, mult) in enumerate(zip(shape, element_index(shape, stride), strict=True)):
        view = [1] * len(shape)
        view[d] = size
        out = out + torch.arange(0, size * mult, mult, dtype=torch.int64,
                                 device=device).view(view)
    return out


def call_keys(keys: Tensor, step: Tensor, call: int) -> Tensor:
    """The call's key ``c`` of every trial in ``keys`` (int64 tensor of 32-bit values)."""
    s = _mix32_((keys + step).bitwise_and_(M32))
    return _mix32_(s.bitwise_xor_(mix32(call + 1)))


def keep_mask(keys: Tensor, step: Tensor, call: int, p: float, stride: int,
              shape: Sequence[int]) -> Tensor:
    """The boolean keep-mask of every trial in ``keys`` (any leading shape) for one dropout
    call on an activation of (per-trial) ``shape``: ``(*keys.shape, *shape)``."""
    c = call_keys(keys, step, call).view(*keys.shape, *[1] * len(shape))
    index = _indices(shape, stride, keys.device)
    largest = sum((n - 1) * m for n, m in zip(shape, element_index(shape, stride), strict=True))
    if largest <= M32:  # every high half is 0: one offset per trial
        u = _mix32_((index + _mix32_(c.clone())).bitwise_and_(M32))
    else:
        u = _mix32_((index.bitwise_and(M32) + _mix32_(c ^ (index >> 32))).bitwise_and_(M32))
    return u >= threshold(p)


def _eager(x: Tensor, keys: Tensor, step: Tensor, call: int, p: float, stride: int) -> Tensor:
    keep = keep_mask(keys, step, call, p, stride, x.shape[keys.dim():])
    return torch.where(keep, x * (1.0 / (1.0 - p)), torch.zeros((), dtype=x.dtype,
                                                                  device=x.device))


@torch.library.custom_op("reinit_tune::counter_dropout", mutates_args=())
def counter_dropout(x: Tensor, keys: Tensor, step: Tensor, call: int, p: float,
                    stride: int) -> Tensor:
    """Dropout of ``x`` with the masks of this module's definition: ``keys`` (int64 32-bit
    trial keys) are ``x``'s leading dimensions, the rest is the trial's own activation;
    ``step`` a 0-d int64 tensor; ``call`` the call's index in the forward pass; ``p`` the
    drop probability; ``stride`` the trials' ``max_seq_length``."""
    return _eager(x, keys, step, call, p, stride)


@counter_dropout.register_kernel("cuda")
def _cuda(x: Tensor, keys: Tensor, step: Tensor, call: int, p: float, stride: int) -> Tensor:
    from reinit_tune.training import dropout_kernel

    shape = list(x.shape[keys.dim():])
    if not dropout_kernel.available() or len(shape) > 4:
        return _eager(x, keys, step, call, p, stride)
    return dropout_kernel.apply(x, keys, step, mix32(call + 1), threshold(p), 1.0 / (1.0 - p),
                                shape, element_index(shape, stride))


@counter_dropout.register_fake
def _fake(x, keys, step, call, p, stride):
    return torch.empty_like(x)


def _setup(ctx, inputs, output) -> None:
    _, keys, step, call, p, stride = inputs
    ctx.save_for_backward(keys, step)
    ctx.call, ctx.p, ctx.stride = call, p, stride


def _backward(ctx, grad: Tensor):
    keys, step = ctx.saved_tensors
    return counter_dropout(grad, keys, step, ctx.call, ctx.p, ctx.stride), None, None, None, \
        None, None


counter_dropout.register_autograd(_backward, setup_context=_setup)


def _vmap(info, in_dims, x, keys, step, call, p, stride):
    x_dim, key_dim, step_dim = in_dims[:3]
    if step_dim is not None:
        raise ValueError("counter_dropout: one step for every member")
    n = info.batch_size
    x = x.movedim(x_dim, 0) if x_dim is not None else x.expand(n, *x.shape)
    keys = keys.movedim(key_dim, 0) if key_dim is not None else keys.expand(n, *keys.shape)
    return counter_dropout(x, keys, step, call, p, stride), 0


counter_dropout.register_vmap(_vmap)


class CounterDropout(TorchFunctionMode):
    """While active, every ``F.dropout`` in training mode is ``counter_dropout`` with the
    current keys (``keys``: 0-d for a trial, one per member for a pack, which passes each
    forward its member-batched view under ``vmap``), ``step`` and the call's index (counted
    from 0 at each ``forward``)."""

    def __init__(self, keys: Tensor, step: Tensor, stride: int):
        super().__init__()
        self.keys, self.step, self.stride = keys, step, stride
        self.current, self.calls = keys, 0

    def forward(self, keys: Tensor | None = None) -> CounterDropout:
        """Start a forward pass: call indices from 0, drawing with ``keys`` (default: the
        trial's own)."""
        self.current = self.keys if keys is None else keys
        self.calls = 0
        return self

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.dropout:
            names = ("input", "p", "training", "inplace")
            bound = {**dict(zip(names, args, strict=False)), **kwargs}
            p, training = bound.get("p", 0.5), bound.get("training", True)
            if training and p > 0:
                if bound.get("inplace"):
                    raise RuntimeError("counter dropout: in-place dropout is not supported")
                out = counter_dropout(bound["input"], self.current, self.step, self.calls,
                                      float(p), self.stride)
                self.calls += 1
                return out
        return func(*args, **kwargs)


@contextlib.contextmanager
def eager_attention(model: torch.nn.Module) -> Iterator[None]:
    """``model`` (a transformers model, or a module holding one) with eager attention while
    the block runs: its attention dropout is then an ``F.dropout`` call that
    ``CounterDropout`` sees (fused attention kernels draw their own masks)."""
    from transformers import PreTrainedModel

    outer = next((m for m in model.modules() if isinstance(m, PreTrainedModel)), None)
    if outer is None:
        yield
        return
    before = outer.config._attn_implementation
    outer.set_attn_implementation("eager")
    try:
        yield
    finally:
        outer.set_attn_implementation(before)
