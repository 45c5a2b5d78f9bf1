"""Surgery is exact: layer reinitialization is 003 App. A and touches only what it should;
head reinitialization, layer permutation, preserved LayerNorm and the authors-code
initializer each change exactly their part; all of it deterministic. On a tiny BERT and the
embedded MiniLM."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats
from transformers import AutoModelForSequenceClassification

from reinit_tune import EMBEDDED_MODEL, TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.families.permutations import permutation
from reinit_tune.model.build import build_model, loaded_shape
from reinit_tune.model.shape import model_shape, resolve_model
from reinit_tune.model.surgery import layer_stack, reinit_layers, truncation_bound

# Std of N(0, 1) truncated to [-2, 2]: sqrt(1 - 2·φ(2)·2 / (Φ(2) - Φ(-2))) ≈ 0.8796.
TRUNC_STD = stats.truncnorm(-2, 2).std()
SIGMA = 0.02
MODELS = ["tiny", EMBEDDED_MODEL]


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


def pretrained_state(model_dir: str, num_labels: int = 2) -> dict[str, torch.Tensor]:
    model = AutoModelForSequenceClassification.from_pretrained(
        resolve_model(model_dir), num_labels=num_labels)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_truncation_constant_matches_issue():
    assert TRUNC_STD == pytest.approx(0.8796, abs=1e-4)


def test_reinitialized_weights_have_bert_init_statistics(wide_bert):
    config = TrialConfig(wide_bert, "sst2", reinit_layers=(1,), seed=3)
    model = build_model(config)
    sigma = model.config.initializer_range
    layer = layer_stack(model)[1]
    linears = [m for m in layer.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 6  # Q, K, V, attention output, intermediate, output (000 §4.3)
    weights = torch.cat([m.weight.flatten() for m in linears])
    assert weights.abs().max() <= 2 * sigma + 1e-7
    assert weights.mean().item() == pytest.approx(0.0, abs=2e-4)
    assert weights.std().item() == pytest.approx(TRUNC_STD * sigma, rel=0.01)
    # The mass near the bounds matches a truncated normal, not a uniform or clipped normal.
    frac_outer = (weights.abs() > sigma).float().mean().item()
    expected_outer = 1 - (stats.norm.cdf(1) - stats.norm.cdf(-1)) / (
        stats.norm.cdf(2) - stats.norm.cdf(-2))
    assert frac_outer == pytest.approx(expected_outer, abs=0.005)
    for m in linears:
        assert torch.count_nonzero(m.bias) == 0
    norms = [m for m in layer.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 2
    for m in norms:
        assert torch.equal(m.weight, torch.ones_like(m.weight))
        assert torch.equal(m.bias, torch.zeros_like(m.bias))


@pytest.mark.parametrize("model_name", ["tiny", EMBEDDED_MODEL])
def test_kept_layers_embeddings_and_pooler_are_bit_identical(model_name, tiny_bert):
    model_name = tiny_bert if model_name == "tiny" else model_name
    reference = pretrained_state(model_name)
    n_layers = model_shape(model_name).num_layers
    reinit = tuple(range(n_layers // 2, n_layers))
    model = build_model(TrialConfig(model_name, "sst2", reinit_layers=reinit, seed=1))
    state = model.state_dict()
    changed_layers = set()
    for name, tensor in state.items():
        if name.startswith("classifier."):
            continue
        if ".encoder.layer." in name:
            index = int(name.split(".encoder.layer.")[1].split(".")[0])
            if index in reinit:
                if not torch.equal(tensor, reference[name]):
                    changed_layers.add(index)
                continue
        assert torch.equal(tensor, reference[name]), f"{name} changed"
    assert changed_layers == set(reinit)


def test_build_model_is_deterministic_and_seed_dependent(tiny_bert):
    config = TrialConfig(tiny_bert, "sst2", reinit_layers=(2, 3), seed=5)
    a, b = build_model(config).state_dict(), build_model(config).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    other = build_model(config.replace(seed=6)).state_dict()
    assert not torch.equal(a["classifier.weight"], other["classifier.weight"])
    key = "bert.encoder.layer.2.attention.self.query.weight"
    assert not torch.equal(a[key], other[key])


def test_head_is_fresh_and_seeded(tiny_bert):
    model = build_model(TrialConfig(tiny_bert, "cola", seed=0))
    w = model.classifier.weight
    assert torch.count_nonzero(model.classifier.bias) == 0
    assert w.std().item() == pytest.approx(0.02, rel=0.5)  # 64 values: loose, but not zero


def test_same_seed_gives_same_weights_for_a_layer_whatever_else_is_reinitialized(tiny_bert):
    """Trials with one seed are paired across k: layer 3 is drawn identically for k=1 and k=3."""
    key = "bert.encoder.layer.3.intermediate.dense.weight"
    k1 = build_model(TrialConfig(tiny_bert, "sst2", reinit_layers=(1, 2, 3), seed=2))
    k3 = build_model(TrialConfig(tiny_bert, "sst2", reinit_layers=(3,), seed=2))
    assert torch.equal(k1.state_dict()[key], k3.state_dict()[key])


def test_regression_task_gets_one_output(tiny_bert):
    model = build_model(TrialConfig(tiny_bert, "stsb"))
    assert model.classifier.out_features == 1
    assert model.config.problem_type == "regression"


def test_reinit_layers_rejects_out_of_range(tiny_bert):
    model = build_model(TrialConfig(tiny_bert, "sst2"))
    with pytest.raises(IndexError):
        reinit_layers(model, [4], std=0.02, seed=0)


def test_layer_count_comes_from_the_model(tiny_bert):
    model = build_model(TrialConfig(tiny_bert, "sst2"))
    assert len(layer_stack(model)) == 4 == loaded_shape(model).num_layers
    assert math.isclose(model_shape(EMBEDDED_MODEL).num_layers, 6)


def test_build_model_checks_the_config_against_the_loaded_model(tiny_bert):
    with pytest.raises(InputError, match=r"reinit_layers: index 4 .* allowed: 0\.\.3"):
        build_model(TrialConfig(tiny_bert, "sst2", reinit_layers=(4,)))


def test_one_head_is_reinitialized_and_nothing_else(model_name):
    config = TrialConfig(model_name, "sst2", reinit_heads=((1, 2),), seed=4)
    shape = model_shape(model_name)
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
    n_layers = model_shape(model_name).num_layers
    order = permutation(3, n_layers)
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
