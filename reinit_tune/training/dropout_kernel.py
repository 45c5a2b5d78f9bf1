"""The fused CUDA kernel of ``reinit_tune.training.dropout``'s masks (Triton): one launch per
dropout call, reading the activation once and writing the result once, with the mask computed
in registers from the trial keys, the step, the call and each element's coordinates (the
eager definition's integer arithmetic in wrapping uint32, so the masks are the same bit for
bit). Imported only where ``counter_dropout`` runs on CUDA; without Triton the eager version
runs there instead."""

from __future__ import annotations

import torch
from torch import Tensor

BLOCK = 1024

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the eager version runs
    triton = None


def available() -> bool:
    """Whether Triton can build the kernel here."""
    return triton is not None


if triton is not None:
    # the constants of ``dropout._MULTIPLIERS`` and ``_SHIFTS``, written out: a Triton
    # function reads no Python globals (``tests/training/test_dropout.py`` compares them)
    @triton.jit
    def _mix(x):
        x ^= x >> 16
        x = x * 0x2C1B3C6D
        x ^= x >> 12
        x = x * 0x297A2D39
        x ^= x >> 15
        x = x * 0x1B873593
        x ^= x >> 16
        return x

    @triton.jit
    def _kernel(x_ptr, out_ptr, keys_ptr, step_ptr, call_mix, keep_from, scale, n,
                d1, d2, d3, m0, m1, m2, m3, BLOCK: tl.constexpr):  # noqa: N803 - Triton's
        member = tl.program_id(1)
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = offs < n
        key = tl.load(keys_ptr + member).to(tl.uint32)
        step = tl.load(step_ptr).to(tl.uint32)
        c = _mix(_mix(key + step) ^ call_mix.to(tl.uint32))
        o = offs.to(tl.int64)
        i3 = o % d3
        o = o // d3
        i2 = o % d2
        o = o // d2
        i1 = o % d1
        i0 = o // d1
        index = i0 * m0 + i1 * m1 + i2 * m2 + i3 * m3
        low = (index & 0xFFFFFFFF).to(tl.uint32)
        high = (index >> 32).to(tl.uint32)
        u = _mix(low + _mix(c ^ high))
        base = member.to(tl.int64) * n
        x = tl.load(x_ptr + base + offs, mask=live)
        y = tl.where(u.to(tl.int64) >= keep_from, x.to(tl.float32) * scale, 0.0)
        tl.store(out_ptr + base + offs, y.to(out_ptr.dtype.element_ty), mask=live)


def apply(x: Tensor, keys: Tensor, step: Tensor, call_mix: int, keep_from: int, scale: float,
          shape: list[int], multipliers: list[int]) -> Tensor:
    """``counter_dropout`` on CUDA (``reinit_tune.training.dropout`` computes the call's mix,
    the threshold, the scale and the element index's multipliers of the activation's
    ``shape``, at most 4 dimensions)."""
    dims = [1] * (4 - len(shape)) + list(shape)
    mults = [0] * (4 - len(shape)) + list(multipliers)
    x = x.contiguous()
    out = torch.empty_like(x)
    members = max(1, keys.numel())
    n = x.numel() // members
    if n == 0:
        return out
    grid = (triton.cdiv(n, BLOCK), members)
    _kernel[grid](x, out, keys.contiguous(), step, call_mix, keep_from, scale, n,
                  dims[1], dims[2], dims[3], *mults, BLOCK=BLOCK)
    return out
