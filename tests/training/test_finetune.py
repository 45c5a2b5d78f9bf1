"""Finetuning: the reinitialized layers' learning-rate multiplier (003 App. E) reaches the
optimizer as its own parameter group, kept in ratio by the schedule."""

from __future__ import annotations

import pytest
from transformers import get_linear_schedule_with_warmup

from reinit_tune import EMBEDDED_MODEL, TrialConfig
from reinit_tune.model.build import build_model
from reinit_tune.model.surgery import layer_stack
from reinit_tune.sweep import trial
from reinit_tune.training import loop
from reinit_tune.training.finetune import param_groups
from reinit_tune.training.loop import make_optimizer


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
    scheduler = get_linear_schedule_with_warmup(optimizer, 0, 10)
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    lrs = [g["lr"] for g in optimizer.param_groups]
    assert lrs[1] / lrs[0] == pytest.approx(5) and lrs[0] == pytest.approx(2e-5 * 0.7)
    # Without a multiplier there is one group.
    assert len(param_groups(model, 2e-5, (2, 3), 1.0)) == 1


def test_execute_trains_with_the_multiplied_groups(tiny_bert, glue_dir, monkeypatch):
    seen = []
    original = loop.make_optimizer
    monkeypatch.setattr(loop, "make_optimizer",
                        lambda groups, device: seen.append(groups) or original(groups, device))
    config = TrialConfig(tiny_bert, "rte", train_size=8, epochs=1, reinit_layers=(3,),
                         reinit_lr_multiplier=5.0, lr=1e-4)
    reports = trial.execute(config, data_dir=str(glue_dir), use_gpu=False)
    assert len(reports) == 1
    [groups] = seen
    assert [g["lr"] for g in groups] == pytest.approx([1e-4, 5e-4])
