"""Head reinitialization, layer permutation, preserved LayerNorm, the authors-code initializer
and the reinitialized layers' learning rate: each exact on a tiny BERT and the embedded MiniLM."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from reinit_tune import EMBEDDED_MODEL, TrialConfig, build_model, spaces
from reinit_tune.surgery import layer_stack, truncation_bound
from reinit_tune.train import make_optimizer, param_groups
from tests.test_surgery import TRUNC_STD, pretrained_state

MODELS = ["tiny", EMBEDDED_MODEL]
SIGMA = 0.02


@pytest.fixture(params=MODELS)
def model_name(request, tiny_bert):
    return tiny_bert if request.param == "tiny" else request.param


def layer_prefix(i: int) -> str:
    return f"bert.encoder.layer.{i}."


def assert_identical_except(state, reference, changed: set[str]) -> None:
    """Every tensor not in ``changed`` (and not the classifier) is bit-identical."""
    for name, tensor in state.items():
        if name.startswith("classifier.") or name in changed:
            continue
        assert torch.equal(tensor, reference[name]), f"{name} changed"


def test_one_head_is_reinitialized_and_nothing_else(model_name):
    config = TrialConfig(model_name, "sst2", reinit_heads=((1, 2),), seed=4)
    shape = config.shape
    d = shape.hidden_size // shape.num_heads
    rows = slice(2 * d, 3 * d)
    reference = pretrained_state(model_name)
    state = build_model(config).state_dict()
    attn = layer_prefix(1) + "attention."
    qkv = [attn + f"self.{p}" for p in ("query", "key", "value")]
    out = attn + "output.dense"
    assert_identical_except(state, reference, {f"{p}.{t}" for p in [*qkv, out]
                                               for t in ("weight", "bias")})
    drawn = []
    for p in qkv:
        w, w0 = state[p + ".weight"], reference[p + ".weight"]
        b, b0 = state[p + ".bias"], reference[p + ".bias"]
        outside = torch.ones(w.shape[0], dtype=torch.bool)
        outside[rows] = False
        assert torch.equal(w[outside], w0[outside]) and torch.equal(b[outside], b0[outside])
        assert not torch.equal(w[rows], w0[rows])
        assert torch.count_nonzero(b[rows]) == 0
        drawn.append(w[rows].flatten())
    w, w0 = state[out + ".weight"], reference[out + ".weight"]
    keep = [c for c in range(w.shape[1]) if not rows.start <= c < rows.stop]
    assert torch.equal(w[:, keep], w0[:, keep])
    assert torch.equal(state[out + ".bias"], reference[out + ".bias"])  # shared by all heads
    drawn.append(w[:, rows].flatten())
    values = torch.cat(drawn)
    assert values.numel() == 4 * d * shape.hidden_size
    assert values.abs().max() <= 2 * SIGMA + 1e-7
    if values.numel() > 10_000:  # MiniLM: 4 x 32 x 384 values, enough for a sharp test
        assert values.std().item() == pytest.approx(TRUNC_STD * SIGMA, rel=0.02)
        assert stats.kstest(values.numpy(), stats.truncnorm(-2, 2, scale=SIGMA).cdf).pvalue > 1e-3


def test_heads_of_one_layer_are_drawn_independently_of_the_rest(tiny_bert):
    key = "bert.encoder.layer.0.attention.self.query.weight"
    one = build_model(TrialConfig(tiny_bert, "sst2", reinit_heads=((0, 1),), seed=2))
    two = build_model(TrialConfig(tiny_bert, "sst2", reinit_heads=((0, 1), (3, 0)), seed=2))
    assert torch.equal(one.state_dict()[key], two.state_dict()[key])


def test_permuted_layer_i_is_pretrained_layer_order_i(model_name):
    n_layers = TrialConfig(model_name, "sst2").shape.num_layers
    order = spaces.permutation(3, n_layers)
    assert order != tuple(range(n_layers))  # a real permutation for both models
    reference = pretrained_state(model_name)
    model = build_model(TrialConfig(model_name, "sst2", layer_order=order, seed=0))
    state = model.state_dict()
    for position, source in enumerate(order):
        names = [k for k in state if k.startswith(layer_prefix(position))]
        assert names
        for name in names:
            original = name.replace(layer_prefix(position), layer_prefix(source), 1)
            assert torch.equal(state[name], reference[original]), name
    outside = {k for k in state if k.startswith("bert.encoder.layer.")}
    assert_identical_except(state, reference, outside)
    # Deep copies: no two positions share storage.
    pointers = [p.data_ptr() for layer in layer_stack(model) for p in layer.parameters()]
    assert len(set(pointers)) == len(pointers)


def test_permutation_n_is_numpy_randomstate_n_and_shared_by_every_task(glue_dir):
    assert spaces.permutation(0, 12) == tuple(np.random.RandomState(0).permutation(12))
    configs = spaces.permutations(EMBEDDED_MODEL, ["sst2", "cola"], [100], n_permutations=4,
                                  seeds=2, data_dir=glue_dir)
    permuted = [c for c in configs if c.layer_order is not None]
    assert len(permuted) == 2 * 4
    by_task = {t: {c.seed: c.layer_order for c in permuted if c.task == t}
               for t in ("sst2", "cola")}
    assert by_task["sst2"] == by_task["cola"] == {n: spaces.permutation(n, 6) for n in range(4)}
    assert len(set(by_task["sst2"].values())) == 4


def test_preserved_layernorm_keeps_pretrained_values(model_name):
    reference = pretrained_state(model_name)
    kept = build_model(TrialConfig(model_name, "sst2", reinit_layers=(1,), seed=1,
                                   preserve_layernorm=True)).state_dict()
    reset = build_model(TrialConfig(model_name, "sst2", reinit_layers=(1,), seed=1)).state_dict()
    norms = [k for k in kept if k.startswith(layer_prefix(1)) and "LayerNorm" in k]
    assert len(norms) == 4  # attention-output and output LayerNorms, weight and bias
    for name in norms:
        assert torch.equal(kept[name], reference[name])
        assert torch.equal(reset[name], torch.ones_like(reset[name]) if name.endswith("weight")
                           else torch.zeros_like(reset[name]))
    linears = [k for k in kept if k.startswith(layer_prefix(1)) and "LayerNorm" not in k]
    for name in linears:  # the rest of the layer is reinitialized exactly as without the flag
        assert torch.equal(kept[name], reset[name]) and not torch.equal(kept[name],
                                                                        reference[name])


def test_authors_code_bounds_are_two_sigma_squared():
    assert truncation_bound(SIGMA, "bert") == pytest.approx(0.04)
    assert truncation_bound(SIGMA, "authors-code") == pytest.approx(0.0008)
    # scipy's truncnorm reads its bounds in standard units: truncnorm(-2σ, 2σ, scale=σ).
    authors = stats.truncnorm(-2 * SIGMA, 2 * SIGMA, scale=SIGMA)
    assert authors.support() == pytest.approx((-2 * SIGMA**2, 2 * SIGMA**2))
    assert authors.std() == pytest.approx(0.00046, abs=1e-5)


@pytest.mark.parametrize("model_key", ["wide", EMBEDDED_MODEL])
def test_authors_code_scheme_matches_scipy_and_keeps_biases(model_key, wide_bert):
    model_name = wide_bert if model_key == "wide" else model_key
    reference = pretrained_state(model_name)
    config = TrialConfig(model_name, "sst2", reinit_layers=(1,), init_scheme="authors-code")
    state = build_model(config).state_dict()
    layer = {k: v for k, v in state.items() if k.startswith(layer_prefix(1))}
    weights = torch.cat([v.flatten() for k, v in layer.items()
                         if k.endswith("weight") and "LayerNorm" not in k])
    authors = stats.truncnorm(-2 * SIGMA, 2 * SIGMA, scale=SIGMA)
    assert weights.abs().max() <= 2 * SIGMA**2 + 1e-9
    assert weights.abs().max() > 0.99 * 2 * SIGMA**2  # the density is nearly flat up to the cut
    assert weights.std().item() == pytest.approx(authors.std(), rel=0.01)
    assert stats.kstest(weights.numpy(), authors.cdf).pvalue > 1e-3
    for name, value in layer.items():
        if "LayerNorm" in name:
            fill = 1.0 if name.endswith("weight") else 0.0
            assert torch.equal(value, torch.full_like(value, fill))
        elif name.endswith("bias"):
            assert torch.equal(value, reference[name])  # biases keep pretrained values
    assert_identical_except(state, reference, set(layer))


def test_authors_code_heads_keep_bias_slices(tiny_bert):
    reference = pretrained_state(tiny_bert)
    state = build_model(TrialConfig(tiny_bert, "sst2", reinit_heads=((2, 0),),
                                    init_scheme="authors-code")).state_dict()
    name = layer_prefix(2) + "attention.self.key"
    assert torch.equal(state[name + ".bias"], reference[name + ".bias"])
    assert state[name + ".weight"][:8].abs().max() <= 2 * SIGMA**2 + 1e-9


@pytest.mark.parametrize("model_key", ["tiny", EMBEDDED_MODEL])
def test_reinitialized_layers_get_lr_times_multiplier(model_key, tiny_bert):
    model_name = tiny_bert if model_key == "tiny" else model_key
    config = TrialConfig(model_name, "sst2", reinit_layers=(2, 3), reinit_lr_multiplier=5)
    model = build_model(config)
    groups = param_groups(model, config.lr, config.reinit_layers, config.reinit_lr_multiplier)
    assert [g["lr"] for g in groups] == pytest.approx([2e-5, 1e-4])
    fast = {id(p) for i in (2, 3) for p in layer_stack(model)[i].parameters()}
    assert {id(p) for p in groups[1]["params"]} == fast
    assert {id(p) for g in groups for p in g["params"]} == {id(p) for p in model.parameters()}
    optimizer = make_optimizer(groups, "cpu")
    from transformers import get_linear_schedule_with_warmup

    scheduler = get_linear_schedule_with_warmup(optimizer, 0, 10)
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    lrs = [g["lr"] for g in optimizer.param_groups]
    assert lrs[1] / lrs[0] == pytest.approx(5) and lrs[0] == pytest.approx(2e-5 * 0.7)
    # Without a multiplier there is one group.
    assert len(param_groups(model, 2e-5, (2, 3), 1.0)) == 1


def test_execute_trains_with_the_multiplied_groups(tiny_bert, glue_dir, monkeypatch):
    from reinit_tune import train, trial

    seen = []
    original = train.make_optimizer
    monkeypatch.setattr(train, "make_optimizer",
                        lambda groups, device: seen.append(groups) or original(groups, device))
    config = TrialConfig(tiny_bert, "rte", train_size=8, epochs=1, reinit_layers=(3,),
                         reinit_lr_multiplier=5.0, lr=1e-4)
    reports = trial.execute(config, data_dir=str(glue_dir), use_gpu=False)
    assert len(reports) == 1
    [groups] = seen
    assert [g["lr"] for g in groups] == pytest.approx([1e-4, 5e-4])
