"""Probing: mean-pooled hidden state k of the frozen encoder, layers above k not computed, only
the linear classifier trained."""

from __future__ import annotations

import pytest
import torch

from reinit_tune import TrialConfig, data
from reinit_tune.model.build import build_model
from reinit_tune.model.surgery import layer_stack
from reinit_tune.sweep import trial
from reinit_tune.training.loop import Optimization
from reinit_tune.training.probe import pooled_features, train_probe, truncated


@pytest.fixture(scope="module")
def rte(tiny_bert, glue_dir):
    return data.train_and_devs("rte", tiny_bert, 64, 24, 0, glue_dir)


@pytest.mark.parametrize("k", [0, 2, 4])
def test_features_are_masked_means_of_hidden_state_k(tiny_bert, rte, k):
    train, _ = rte
    model = build_model(TrialConfig(tiny_bert, "rte")).eval()
    idx = list(range(6))
    batch = train.collate(idx)
    with torch.no_grad():
        hidden = model.bert(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                            attention_mask=batch["attention_mask"],
                            output_hidden_states=True).hidden_states[k]
    expected = torch.stack([hidden[i, : int(batch["attention_mask"][i].sum())].mean(0)
                            for i in idx])
    assert (batch["attention_mask"] == 0).any()  # padding present, so the mask matters
    with truncated(model, k) as base:
        features = pooled_features(base, train, torch.device("cpu"))
    assert torch.allclose(features[idx], expected, atol=1e-5)
    assert len(layer_stack(model)) == 4  # the full encoder is back


def test_layers_above_k_are_not_computed(tiny_bert, rte):
    train, _ = rte
    model = build_model(TrialConfig(tiny_bert, "rte"))
    calls = [0] * 4
    for i, layer in enumerate(layer_stack(model)):
        layer.register_forward_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
    with truncated(model, 2) as base:
        pooled_features(base, train, torch.device("cpu"))
    assert calls[0] > 0 and calls[1] > 0 and calls[2:] == [0, 0]


def test_probe_trains_only_the_classifier(tiny_bert, rte):
    train, dev = rte
    model = build_model(TrialConfig(tiny_bert, "rte", seed=1))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    seen = []
    results, setup = train_probe(model, train, dev, layer=3, task="rte", use_gpu=False,
                                 opt=Optimization(lr=1e-2, epochs=2, seed=1),
                                 on_epoch=lambda r, s: seen.append(r.epoch))
    after = model.state_dict()
    encoder = [k for k in before if not k.startswith("classifier.")]
    assert encoder and all(torch.equal(before[k], after[k]) for k in encoder)
    assert not torch.equal(before["classifier.weight"], after["classifier.weight"])
    assert not any(p.requires_grad for n, p in model.named_parameters()
                   if not n.startswith("classifier."))
    assert seen == [1, 2] and [r.epoch for r in results] == [1, 2]
    assert 0 <= results[-1].metrics["accuracy"] <= 1 and results[-1].train_examples == 24
    assert setup.device == "cpu"


def test_execute_runs_a_probe_for_probe_layer(tiny_bert, glue_dir):
    config = TrialConfig(tiny_bert, "stsb", train_size=16, epochs=2, probe_layer=1, lr=1e-2)
    reports = trial.execute(config, data_dir=str(glue_dir), use_gpu=False)
    assert [r["epoch"] for r in reports] == [1, 2]
    assert -1 <= reports[-1]["eval_pearson"] <= 1  # regression probe: MSE loss, one output
    assert reports[-1]["score"] == reports[-1]["eval_pearson"]
