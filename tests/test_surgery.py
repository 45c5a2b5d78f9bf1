"""Reinitialization is exactly 003 App. A, touches only what it should, and is deterministic."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats
from transformers import AutoModelForSequenceClassification

from reinit_tune import EMBEDDED_MODEL, TrialConfig, build_model
from reinit_tune.models import resolve_model
from reinit_tune.surgery import layer_stack, reinit_layers

# Std of N(0, 1) truncated to [-2, 2]: sqrt(1 - 2·φ(2)·2 / (Φ(2) - Φ(-2))) ≈ 0.8796.
TRUNC_STD = stats.truncnorm(-2, 2).std()


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
    n_layers = TrialConfig(model_name, "sst2").shape.num_layers
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


def test_layer_count_comes_from_the_config(tiny_bert):
    assert len(layer_stack(build_model(TrialConfig(tiny_bert, "sst2")))) == 4
    assert math.isclose(TrialConfig(EMBEDDED_MODEL, "sst2").shape.num_layers, 6)
