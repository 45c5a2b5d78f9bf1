"""Sequential transfer: one intermediate model per (intermediate task, seed, surgery), reused by
every final task, with a fresh classification head."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from safetensors.torch import load_file

from reinit_tune import TrialConfig
from reinit_tune.model.build import build_model
from reinit_tune.sweep import trial
from reinit_tune.training import sequential


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REINIT_TUNE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / sequential.CACHE_FOLDER


@pytest.fixture
def trainings(monkeypatch):
    """Records each intermediate training (slowed down a little to widen race windows)."""
    calls = []
    original = sequential.train_intermediate

    def spy(config, path, **kwargs):
        calls.append(config)
        time.sleep(0.2)
        return original(config, path, **kwargs)

    monkeypatch.setattr(sequential, "train_intermediate", spy)
    return calls


def config(model, task, **kw):
    return TrialConfig(model, task, train_size=8, epochs=1, lr=1e-3, intermediate_task="wnli",
                       **kw)


def test_final_tasks_reuse_one_intermediate_model(tiny_bert, glue_dir, cache, trainings):
    finals = [config(tiny_bert, task) for task in ("rte", "stsb")]
    for c in finals:
        reports = trial.execute(c, data_dir=str(glue_dir), use_gpu=False)
        assert len(reports) == 1
    assert len(trainings) == 1 and trainings[0].task == "wnli"
    assert trainings[0] == finals[0].intermediate_phase()
    assert [p.suffix for p in sorted(cache.iterdir())] == [".json", ".lock", ".safetensors"]

    stored = load_file(str(sequential.cache_path(finals[0])))
    pretrained = TrialConfig(tiny_bert, "rte").replace(seed=0)

    direct = build_model(pretrained).state_dict()
    for c in finals:
        model = sequential.build_final_model(c, data_dir=str(glue_dir), use_gpu=False)
        state = model.state_dict()
        encoder = [k for k in state if not k.startswith("classifier.")]
        assert all(torch.equal(state[k], stored[k]) for k in encoder)
        # The intermediate phase really trained the encoder ...
        assert not torch.equal(state["bert.encoder.layer.0.output.dense.weight"],
                               direct["bert.encoder.layer.0.output.dense.weight"])
        # ... and the head is fresh for the final task, as in direct finetuning.
        fresh = build_model(c.replace(intermediate_task=None)).state_dict()
        assert torch.equal(state["classifier.weight"], fresh["classifier.weight"])
    assert len(trainings) == 1

    # Another seed or another surgery is another intermediate model.
    trial.execute(finals[0].replace(seed=1), data_dir=str(glue_dir), use_gpu=False)
    sequential.build_final_model(finals[0].replace(reinit_layers=(3,)), data_dir=str(glue_dir),
                                 use_gpu=False)
    assert len(trainings) == 3


def test_concurrent_trials_train_the_intermediate_model_once(tiny_bert, glue_dir, cache,
                                                             trainings):
    finals = [config(tiny_bert, task, seed=2) for task in ("rte", "cola")]
    errors = []

    def run(c):
        try:
            sequential.build_final_model(c, data_dir=str(glue_dir), use_gpu=False)
        except Exception as e:  # surfaced below; a thread cannot fail the test itself
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in finals]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(trainings) == 1
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temporary files
