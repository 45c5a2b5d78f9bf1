"""Stateless dropout (``reinit_tune.training.dropout``): the masks are the definition's, a
Bernoulli(1 - p) draw for practical purposes, independent of padding and of the other
members of a pack; the operator's gradient and ``vmap`` rule; the fused kernel's masks equal
the eager ones (through Triton's interpreter where Triton is installed); a pack's forward
pass issues as many operators for 28 members of 28 seeds as for one; nothing in a training
forward pass draws from a random generator."""

from __future__ import annotations

import math

import pytest
import torch
from torch.func import functional_call, vmap
from torch.nn import functional as F  # noqa: N812
from torch.utils._python_dispatch import TorchDispatchMode

from reinit_tune import TrialConfig
from reinit_tune.model.build import build_model
from reinit_tune.training import dropout
from reinit_tune.training.dropout import (
    CounterDropout,
    counter_dropout,
    keep_mask,
    keys_tensor,
    mix32,
    trial_key,
)

STEP = torch.tensor(3)


def reference_mask(key: int, step: int, call: int, p: float, stride: int,
                   shape: tuple[int, ...]) -> torch.Tensor:
    """The definition in the module docstring, element by element in Python integers."""
    dims = dropout.SEQUENCE_DIMS.get(len(shape), ())
    sizes = [stride if d in dims else n for d, n in enumerate(shape)]
    c = mix32(mix32((key + step) & 0xFFFFFFFF) ^ mix32(call + 1))
    out = torch.zeros(shape, dtype=torch.bool)
    for flat in range(math.prod(shape)):
        coords, rest = [], flat
        for n in reversed(shape):
            coords.append(rest % n)
            rest //= n
        coords.reverse()
        index = 0
        for coord, size in zip(coords, sizes, strict=True):
            index = index * size + coord
        u = mix32(((index & 0xFFFFFFFF) + mix32(c ^ (index >> 32))) & 0xFFFFFFFF)
        out[tuple(coords)] = u >= math.floor(p * 2**32)
    return out


@pytest.mark.parametrize("shape, stride", [((2, 3, 5), 4), ((2, 2, 3, 3), 5), ((3, 7), 9),
                                           ((1, 2, 3), 2**31)])
def test_masks_follow_the_definition_element_by_element(shape, stride):
    key = trial_key(11)
    got = keep_mask(torch.tensor(key), torch.tensor(7), 4, 0.3, stride, shape)
    assert torch.equal(got, reference_mask(key, 7, 4, 0.3, stride, shape))


def test_a_mask_is_a_fair_independent_draw():
    keys = keys_tensor(range(64), "cpu")
    shape = (8, 64, 64)
    masks = keep_mask(keys, STEP, 0, 0.1, 64, shape).float()
    assert masks.mean().item() == pytest.approx(0.9, abs=0.002)  # 2.1M draws: SE 0.0002
    n = masks.numel()

    def corr(a, b):
        return torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1].item()

    # neighbours along every axis, other trials, steps and calls: uncorrelated (SE ~ 1/sqrt n)
    for dim in (1, 2, 3):
        size = masks.shape[dim] - 1
        assert abs(corr(masks.narrow(dim, 0, size), masks.narrow(dim, 1, size))) < 5 / n**0.5
    other_step = keep_mask(keys, STEP + 1, 0, 0.1, 64, shape).float()
    other_call = keep_mask(keys, STEP, 1, 0.1, 64, shape).float()
    assert abs(corr(masks, other_step)) < 5 / n**0.5
    assert abs(corr(masks, other_call)) < 5 / n**0.5
    assert abs(corr(masks[0], masks[1])) < 5 / (n / 64) ** 0.5
    # patterns of four neighbours: the binomial frequencies (chi-square, 15 degrees)
    quads = masks.reshape(-1, 4)
    codes = (quads * torch.tensor([8.0, 4.0, 2.0, 1.0])).sum(1).long()
    counts = torch.bincount(codes, minlength=16).float()
    ones = torch.tensor([bin(i).count("1") for i in range(16)], dtype=torch.float64)
    expected = (0.9**ones * 0.1 ** (4 - ones)) * len(quads)
    assert float(((counts - expected) ** 2 / expected).sum()) < 37.7  # chi2(15) 0.999


def test_padding_never_moves_a_tokens_mask():
    keys = keys_tensor([1, 2], "cpu")
    short = keep_mask(keys, STEP, 2, 0.1, 32, (4, 2, 9, 9))
    long = keep_mask(keys, STEP, 2, 0.1, 32, (4, 2, 20, 20))
    assert torch.equal(short, long[..., :9, :9])
    hidden_short = keep_mask(keys, STEP, 0, 0.1, 32, (4, 9, 16))
    hidden_long = keep_mask(keys, STEP, 0, 0.1, 32, (4, 30, 16))
    assert torch.equal(hidden_short, hidden_long[:, :, :9])
    with pytest.raises(ValueError, match="longer than max_seq_length 32"):
        keep_mask(keys, STEP, 0, 0.1, 32, (4, 33, 16))


def test_a_members_mask_is_its_trials_alone():
    keys = keys_tensor([5, 7, 5], "cpu")
    x = torch.randn(3, 4, 6, 8)
    packed = counter_dropout(x, keys, STEP, 1, 0.2, 16)
    for m in range(3):
        alone = counter_dropout(x[m], keys[m], STEP, 1, 0.2, 16)
        assert torch.equal(packed[m], alone)
    assert torch.equal(packed[0] == 0, packed[2] == 0)  # one seed, one mask
    assert not torch.equal(packed[0] == 0, packed[1] == 0)
    kept = packed != 0
    assert torch.equal(packed[kept], (x * (1 / 0.8))[kept])  # the kept ones scaled


def test_the_gradient_is_the_same_mask_scaled():
    key = keys_tensor([4], "cpu")[0]
    x = torch.randn(3, 5, 8, requires_grad=True)
    y = counter_dropout(x, key, STEP, 0, 0.25, 8)
    grad = torch.randn_like(y)
    y.backward(grad)
    keep = keep_mask(key, STEP, 0, 0.25, 8, (3, 5, 8))
    assert torch.equal(x.grad, torch.where(keep, grad * (1 / 0.75), torch.zeros(())))
    torch.library.opcheck(counter_dropout, (torch.randn(2, 3, 4), keys_tensor([1, 2], "cpu"),
                                            STEP, 0, 0.1, 4))


def test_under_vmap_each_member_draws_with_its_own_key():
    keys = keys_tensor([3, 9, 27], "cpu")
    x = torch.randn(3, 2, 5, 6, requires_grad=True)

    def member(x, key):
        return counter_dropout(x, key, STEP, 2, 0.1, 8)

    out = vmap(member)(x, keys)
    for m in range(3):
        assert torch.equal(out[m], counter_dropout(x[m], keys[m], STEP, 2, 0.1, 8))
    shared = vmap(member, in_dims=(None, 0))(x[0], keys)  # one input, every member's mask
    assert torch.equal(shared[1], counter_dropout(x[0], keys[1], STEP, 2, 0.1, 8))
    out.sum().backward()
    assert torch.equal(x.grad != 0, out != 0)


def test_the_kernels_constants_are_the_definitions():
    import inspect

    from reinit_tune.training import dropout_kernel

    source = inspect.getsource(dropout_kernel)
    for shift, mult in zip(dropout._SHIFTS, dropout._MULTIPLIERS, strict=False):
        assert f"x ^= x >> {shift}\n        x = x * {mult:#X}".replace("0X", "0x") in source
    assert f"x ^= x >> {dropout._SHIFTS[-1]}\n        return x" in source


KERNEL_CHECK = """
import torch
from reinit_tune.training import dropout_kernel
from reinit_tune.training.dropout import (counter_dropout, element_index, keys_tensor, mix32,
                                          threshold)
keys, step = keys_tensor([1, 2, 3], "cpu"), torch.tensor(3)
for shape, stride in (((3, 4, 10, 16), 16), ((3, 2, 3, 7, 7), 8), ((3, 5, 6), 2**31)):
    x = torch.randn(shape)
    want = counter_dropout(x, keys, step, 5, 0.1, stride)
    own = list(shape[1:])
    got = dropout_kernel.apply(x, keys, step, mix32(6), threshold(0.1), 1 / 0.9, own,
                               element_index(own, stride))
    assert torch.equal(got, want), shape
print("same masks")
"""


def test_the_fused_kernel_draws_the_eager_masks():
    """Through Triton's interpreter (a fresh process: it reads TRITON_INTERPRET on import);
    on a GPU ``tests/sweep/test_gpu.py`` compares them on the device."""
    import os
    import subprocess
    import sys

    pytest.importorskip("triton")
    done = subprocess.run([sys.executable, "-c", KERNEL_CHECK], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert done.returncode == 0 and "same masks" in done.stdout, done.stderr[-2000:]


class Count(TorchDispatchMode):
    """Every operator dispatched while active, by name."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.fixture(scope="module")
def narrow_bert(tmp_path_factory) -> str:
    from tests.helpers import save_tiny_bert

    return str(save_tiny_bert(tmp_path_factory.mktemp("narrow"), layers=2, hidden=8, heads=2,
                              intermediate=16))


def test_a_packs_forward_issues_as_many_operators_for_28_seeds_as_for_one(narrow_bert):
    """Dispatched operators of a pack's training forward at M = 1 and at M = 28 members of
    28 seeds (each its own batch): within 10% (the masks are one operator per call)."""
    from reinit_tune.training.pack import FusedMembers

    config = TrialConfig(narrow_bert, "rte", max_seq_length=16)
    model = build_model(config)
    counts = {}
    for members in (1, 28):
        fused = FusedMembers(model, members, torch.device("cpu"))
        for _ in range(members):
            fused.add(model)
        fused.start()
        masks = CounterDropout(keys_tensor(range(members), "cpu"),
                               torch.zeros((), dtype=torch.int64), 16)
        batch = {"input_ids": torch.randint(1000, 2000, (members, 4, 12)),
                 "token_type_ids": torch.zeros(members, 4, 12, dtype=torch.long),
                 "attention_mask": torch.zeros(members, 4, 1, 1, 12),
                 "labels": torch.randint(0, 2, (members, 4))}
        with masks, Count() as count:
            losses, _ = fused(batch, train=True, per_member=True, masks=masks)
        assert losses.shape == (members,)
        counts[members] = len(count.ops)
        assert not [op for op in count.ops if "bernoulli" in op or "native_dropout" in op
                    or "rand" in op]
    assert counts[28] <= 1.1 * counts[1], counts


def test_a_training_forward_draws_no_random_numbers_and_sees_every_dropout(tiny_bert):
    config = TrialConfig(tiny_bert, "rte", max_seq_length=16)
    model = build_model(config).train()
    batch = {"input_ids": torch.randint(1000, 2000, (2, 10)),
             "attention_mask": torch.ones(2, 10, dtype=torch.long),
             "labels": torch.tensor([0, 1])}
    masks = CounterDropout(keys_tensor([0], "cpu")[0], torch.zeros((), dtype=torch.int64), 16)
    state = torch.get_rng_state()
    with dropout.eager_attention(model), masks.forward(), Count() as count:
        model(**batch).loss.backward()
    assert torch.equal(torch.get_rng_state(), state)
    assert not [op for op in count.ops if "bernoulli" in op or "native_dropout" in op]
    layers = model.config.num_hidden_layers
    # embeddings, and per layer attention probabilities, attention output and FFN output,
    # and the classifier's: every F.dropout of BERT
    assert masks.calls == 1 + 3 * layers + 1
    assert model.config._attn_implementation != "eager"  # restored after
    # evaluation draws nothing either and is not dropped out
    model.eval()
    with masks.forward(), torch.no_grad():
        a = model(**batch).logits
        b = model(**batch).logits
    assert masks.calls == 0 and torch.equal(a, b)


def test_in_place_dropout_is_refused():
    masks = CounterDropout(keys_tensor([0], "cpu")[0], torch.zeros((), dtype=torch.int64), 8)
    with masks.forward(), pytest.raises(RuntimeError, match="in-place"):
        F.dropout(torch.randn(2, 3), 0.1, True, True)


def test_functional_call_of_a_pack_under_vmap_uses_its_members_keys(tiny_bert):
    """A two-member pack of one model, two seeds, the same batch: each member's loss is the
    model's own with its trial's masks."""
    config = TrialConfig(tiny_bert, "rte", max_seq_length=16)
    model = build_model(config).train()
    model.set_attn_implementation("eager")
    params = {n: torch.stack([p.detach()] * 2) for n, p in model.named_parameters()}
    buffers = dict(model.named_buffers())
    batch = {"input_ids": torch.randint(1000, 2000, (2, 10)),
             "attention_mask": torch.ones(2, 10, dtype=torch.long),
             "labels": torch.tensor([0, 1])}
    keys = keys_tensor([3, 4], "cpu")
    masks = CounterDropout(keys, torch.zeros((), dtype=torch.int64), 16)

    def one(p, key):
        masks.forward(key)
        return functional_call(model, (p, buffers), args=(), kwargs=batch).loss

    with masks:
        packed = vmap(one, randomness="error")(params, keys)
    for m in range(2):
        alone = CounterDropout(keys[m], torch.zeros((), dtype=torch.int64), 16)
        with alone.forward(), torch.no_grad():
            assert torch.equal(model(**batch).loss, packed[m])
    assert packed[0] != packed[1]
