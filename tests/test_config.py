"""TrialConfig validates itself, normalizes its fields and has a stable identity."""

from __future__ import annotations

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
