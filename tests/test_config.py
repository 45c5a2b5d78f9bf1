"""TrialConfig validates itself, normalizes its fields and has a stable identity."""

from __future__ import annotations

import re

import pytest

from reinit_tune import EMBEDDED_MODEL, TrialConfig


def test_defaults_follow_the_paper():
    c = TrialConfig(EMBEDDED_MODEL, "sst2")
    assert (c.lr, c.batch_size, c.epochs, c.max_seq_length) == (2e-5, 8, 3, 128)
    assert c.train_size is None and c.reinit_layers == ()


@pytest.mark.parametrize("kwargs,field", [
    ({"task": "mnli2"}, "task"),
    ({"reinit_layers": (6,)}, "reinit_layers"),
    ({"reinit_layers": (-1,)}, "reinit_layers"),
    ({"reinit_layers": (1, 1)}, "reinit_layers"),
    ({"train_size": 0}, "train_size"),
    ({"train_size": -5}, "train_size"),
    ({"train_size": 1.5}, "train_size"),
    ({"train_size": True}, "train_size"),
    ({"seed": -1}, "seed"),
    ({"batch_size": 0}, "batch_size"),
    ({"epochs": 0}, "epochs"),
    ({"lr": 0.0}, "lr"),
    ({"lr": -1e-5}, "lr"),
    ({"max_seq_length": 4}, "max_seq_length"),
    ({"max_seq_length": 1024}, "max_seq_length"),
    ({"precision": "fp16"}, "precision"),
    ({"length_grouped": 1}, "length_grouped"),
    ({"experiment": ""}, "experiment"),
])
def test_invalid_fields_name_the_field(kwargs, field):
    args = {"model": EMBEDDED_MODEL, "task": "sst2", **kwargs}
    with pytest.raises(ValueError, match=f"^{field}:"):
        TrialConfig(**args)


def test_out_of_range_message_gives_allowed_values():
    with pytest.raises(ValueError, match=r"allowed: 0\.\.5"):
        TrialConfig(EMBEDDED_MODEL, "sst2", reinit_layers=(9,))


def test_unknown_model_is_rejected(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="^model:"):
        TrialConfig("no-such-org/no-such-model", "sst2")
    with pytest.raises(ValueError, match="config.json"):
        TrialConfig(str(tmp_path), "sst2")


def test_lists_become_sorted_tuples_and_identity_is_canonical():
    a = TrialConfig(EMBEDDED_MODEL, "sst2", reinit_layers=[5, 3, 4])
    b = TrialConfig(EMBEDDED_MODEL, "sst2", reinit_layers=(3, 4, 5))
    assert a.reinit_layers == (3, 4, 5) and a == b and a.trial_id == b.trial_id
    assert a.trial_id != b.replace(seed=1).trial_id
    assert a.trial_id != b.replace(lr=3e-5).trial_id
    assert len(a.trial_id) == 16


def test_dict_round_trip():
    c = TrialConfig(EMBEDDED_MODEL, "cola", train_size=0.1, seed=4, reinit_layers=(0, 5))
    back = TrialConfig.from_dict(c.to_dict())
    assert back == c and back.trial_id == c.trial_id
    with pytest.raises(ValueError, match="unknown TrialConfig fields"):
        TrialConfig.from_dict({**c.to_dict(), "typo": 1})


def test_frozen():
    c = TrialConfig(EMBEDDED_MODEL, "sst2")
    with pytest.raises(AttributeError):
        c.seed = 3  # type: ignore[misc]


def test_num_pretrained_layers_is_k():
    config = TrialConfig(EMBEDDED_MODEL, "sst2", reinit_layers=(2, 3, 4, 5))
    assert config.num_pretrained_layers == 2


@pytest.mark.parametrize("kwargs,field,allowed", [
    ({"reinit_heads": ((6, 0),)}, "reinit_heads", r"layer 0\.\.5, head 0\.\.11"),
    ({"reinit_heads": ((0, 12),)}, "reinit_heads", r"head 0\.\.11"),
    ({"reinit_heads": ((0, 1), (0, 1))}, "reinit_heads", "repeated"),
    ({"reinit_heads": ((0,),)}, "reinit_heads", "pair"),
    ({"reinit_heads": ((2, 0),), "reinit_layers": (2,)}, "reinit_heads", "reinit_layers"),
    ({"layer_order": (0, 1, 2)}, "layer_order", r"permutation of 0\.\.5"),
    ({"layer_order": (0, 0, 1, 2, 3, 4)}, "layer_order", "permutation"),
    ({"layer_order": (0.0, 1, 2, 3, 4, 5)}, "layer_order", "permutation"),
    ({"preserve_layernorm": "yes"}, "preserve_layernorm", "True or False"),
    ({"reinit_lr_multiplier": 0.0}, "reinit_lr_multiplier", "positive"),
    ({"reinit_lr_multiplier": 5.0, "reinit_heads": ((0, 0),)}, "reinit_lr_multiplier",
     "whole reinitialized layers"),
    ({"init_scheme": "xavier"}, "init_scheme", "authors-code"),
    ({"probe_layer": 7}, "probe_layer", r"0\.\.6"),
    ({"probe_layer": -1}, "probe_layer", r"0\.\.6"),
    ({"probe_layer": 3, "intermediate_task": "rte"}, "probe_layer", "intermediate_task"),
    ({"intermediate_task": "squad"}, "intermediate_task", "wnli"),
])
def test_invalid_surgery_and_mode_fields_name_the_field_and_allowed_values(kwargs, field,
                                                                           allowed):
    with pytest.raises(ValueError, match=f"^{field}:") as info:
        TrialConfig(EMBEDDED_MODEL, "sst2", **kwargs)
    assert re.search(allowed, str(info.value))


def test_new_fields_normalize_and_change_identity():
    a = TrialConfig(EMBEDDED_MODEL, "sst2", reinit_heads=[[5, 1], [0, 3]],
                    layer_order=[5, 4, 3, 2, 1, 0])
    assert a.reinit_heads == ((0, 3), (5, 1)) and a.layer_order == (5, 4, 3, 2, 1, 0)
    assert TrialConfig.from_dict(a.to_dict()) == a
    b = TrialConfig(EMBEDDED_MODEL, "sst2", reinit_layers=[3], reinit_lr_multiplier=5)
    assert b.reinit_lr_multiplier == 5.0 and isinstance(b.reinit_lr_multiplier, float)
    assert b.trial_id == b.replace(reinit_lr_multiplier=5.0).trial_id
    base = TrialConfig(EMBEDDED_MODEL, "sst2")
    variants = [base.replace(**change) for change in (
        {"reinit_heads": ((0, 0),)}, {"layer_order": (1, 0, 2, 3, 4, 5)},
        {"preserve_layernorm": True}, {"reinit_lr_multiplier": 5.0},
        {"init_scheme": "authors-code"}, {"probe_layer": 0}, {"intermediate_task": "rte"})]
    assert len({c.trial_id for c in [base, *variants]}) == 1 + len(variants)
