"""Trial packs: members trained fused compute what the same trials compute run
apart through the single-trial path, dropout on: per-epoch train losses, dev losses and
scores to 1e-5, and the final weights; which configs may share a pack; a diverging member
is dropped alone; pack sizing for a GPU's free memory."""

from __future__ import annotations

import math

import pytest
import torch

from reinit_tune import TrialConfig, data
from reinit_tune.model.build import build_model
from reinit_tune.training import pack
from reinit_tune.training.finetune import finetune_config
from reinit_tune.training.pack import pack_key, packable, train_pack

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def members(tiny_bert, glue_dir) -> list[TrialConfig]:
    # lr high enough that each epoch moves every weight; dropout on (BERT's 0.1); a
    # progressive reinit, a permutation, a head reinit and 003 App. E's multiplier.
    base = TrialConfig(tiny_bert, "rte", train_size=24, seed=5, epochs=2, lr=3e-4,
                       max_seq_length=32, batch_size=8)
    return [base.replace(reinit_layers=(2, 3)),
            base.replace(layer_order=(3, 1, 2, 0)),
            base.replace(reinit_heads=((1, 2), (3, 0))),
            base.replace(reinit_layers=(3,), reinit_lr_multiplier=5.0)]


@pytest.fixture(scope="module")
def split(members, glue_dir):
    c = members[0]
    train, devs = data.train_and_devs(c.task, c.model, c.max_seq_length, c.train_size, c.seed,
                                      str(glue_dir))
    # 64 dev examples keep the test fast; both runs score the same ones
    return train, {name: dev.select(range(64)) for name, dev in devs.items()}


@pytest.fixture(scope="module")
def apart(members, split):
    """Each member through the single-trial path (``finetune_config``, as ``execute``)."""
    train, devs = split
    runs = []
    for config in members:
        model = build_model(config)
        results, _ = finetune_config(model, train, devs, config, use_gpu=False)
        runs.append((results, {k: v.detach().clone() for k, v in model.state_dict().items()},
                     torch.get_rng_state()))
    return runs


def test_a_pack_equals_its_members_run_apart_with_dropout_on(members, split, apart):
    train, devs = split
    models = [build_model(c) for c in members]
    dropout = models[0].config
    assert dropout.hidden_dropout_prob > 0 and dropout.attention_probs_dropout_prob > 0
    seen = []
    outcomes, setup = train_pack(models, members, train, devs, use_gpu=False,
                                 on_epoch=lambda i, r, s: seen.append((i, r.epoch)),
                                 keep_weights=True)
    # the dropout stream: a pack drew exactly the random numbers each trial drew alone
    assert all(torch.equal(torch.get_rng_state(), rng) for _, _, rng in apart)
    assert setup.device == "cpu" and setup.precision == "fp32"
    assert sorted(seen) == [(i, e) for i in range(4) for e in (1, 2)]
    worst = {"train_loss": 0.0, "eval_loss": 0.0, "metric": 0.0, "weight": 0.0}
    for outcome, (results, weights, _) in zip(outcomes, apart, strict=True):
        assert outcome.error is None
        assert [r.epoch for r in outcome.results] == [r.epoch for r in results] == [1, 2]
        for got, want in zip(outcome.results, results, strict=True):
            assert got.train_loss == pytest.approx(want.train_loss, abs=1e-5)
            assert got.eval_loss == pytest.approx(want.eval_loss, abs=1e-5)
            assert got.metrics.keys() == want.metrics.keys()
            for name, value in want.metrics.items():
                assert got.metrics[name] == pytest.approx(value, abs=1e-5)
            assert (got.train_examples, got.train_tokens) == (want.train_examples,
                                                              want.train_tokens)
            worst["train_loss"] = max(worst["train_loss"], abs(got.train_loss - want.train_loss))
            worst["eval_loss"] = max(worst["eval_loss"], abs(got.eval_loss - want.eval_loss))
            worst["metric"] = max([worst["metric"], *(abs(got.metrics[k] - v)
                                                      for k, v in want.metrics.items())])
        assert outcome.weights.keys() >= {k for k in weights if not k.endswith("_ids")}
        for name, value in weights.items():
            diff = float((outcome.weights[name] - value).abs().max())
            worst["weight"] = max(worst["weight"], diff)
            assert torch.allclose(outcome.weights[name], value, atol=1e-5, rtol=1e-4), name
    # the members really differ, so equality is not a coincidence of identical runs
    losses = {round(r.train_loss, 6) for o in outcomes for r in o.results if r.epoch == 1}
    assert len(losses) == 4
    print(f"largest differences, pack vs apart: {worst}")


def test_a_diverging_member_is_reported_and_dropped_alone(members, split, apart):
    train, devs = split
    configs = members[:2]
    models = [build_model(c) for c in configs]
    with torch.no_grad():  # member 0 starts broken: its loss is NaN from the first step
        models[0].classifier.weight.fill_(math.nan)
    outcomes, _ = train_pack(models, configs, train, devs, use_gpu=False)
    assert outcomes[0].results == []
    assert outcomes[0].error.startswith("diverged: the training loss of epoch 1 is nan")
    assert outcomes[1].error is None
    # the survivor trained as if alone
    want = apart[1][0]
    assert [r.train_loss for r in outcomes[1].results] == pytest.approx(
        [r.train_loss for r in want], abs=1e-5)
    assert [r.metrics for r in outcomes[1].results] == [r.metrics for r in want]


def test_pack_key_groups_what_shares_data_batches_dropout_and_optimizer(tiny_bert):
    base = TrialConfig(tiny_bert, "rte", train_size=24, seed=5)
    same = [base.replace(reinit_layers=(1,)), base.replace(layer_order=(1, 0, 2, 3)),
            base.replace(reinit_heads=((0, 1),)), base.replace(experiment="other"),
            base.replace(reinit_layers=(2, 3), reinit_lr_multiplier=5.0),
            base.replace(preserve_layernorm=True)]
    assert {pack_key(c) for c in same} == {pack_key(base)}
    for other in (base.replace(seed=6), base.replace(lr=1e-4), base.replace(train_size=32),
                  base.replace(epochs=2), base.replace(batch_size=16),
                  base.replace(precision="bf16"), base.replace(max_seq_length=64),
                  base.replace(length_grouped=False), base.replace(task="sst2"),
                  base.replace(schedule="slanted-triangular"),
                  base.replace(warmup_ratio=0.1), base.replace(init_scheme="authors-code")):
        assert pack_key(other) != pack_key(base)
    assert {"model", "task", "train_size", "seed", "epochs", "batch_size", "lr", "schedule",
            "warmup_ratio", "precision", "max_seq_length", "length_grouped",
            "init_scheme"} <= set(pack.PACK_FIELDS)
    probe, sequential = base.replace(probe_layer=2), base.replace(intermediate_task="sst2")
    squad = TrialConfig(tiny_bert, "squad_v2", train_size=24)
    for alone in (probe, sequential, squad):
        assert not packable(alone)
        assert pack_key(alone) != pack_key(alone.replace(experiment="x"))  # never shared
    with pytest.raises(ValueError, match="pack_key"):
        train_pack([], [base, base.replace(seed=1)], None, {}, use_gpu=False)


def test_the_stacked_adamw_clips_each_member_alone():
    params = {"w": torch.zeros(2, 3, requires_grad=True)}
    params["w"].grad = torch.tensor([[3.0, 4.0, 0.0], [0.3, 0.4, 0.0]])
    adamw = pack.StackedAdamW(params, {"w": [1.0, 2.0]}, None)
    adamw.step(params, factor=0.5)
    # member 0: norm 5 clipped to 1; member 1: norm 0.5 kept. The first Adam step moves each
    # entry with a gradient by lr (sign of the gradient), whatever its size.
    grad0 = torch.tensor([3.0, 4.0, 0.0]) / (5 + 1e-6)
    assert torch.allclose(adamw.exp_avg["w"][0], 0.1 * grad0)
    assert torch.allclose(adamw.exp_avg["w"][1], 0.1 * torch.tensor([0.3, 0.4, 0.0]))
    assert torch.allclose(params["w"].detach(), torch.tensor([[-0.5, -0.5, 0.0],
                                                              [-1.0, -1.0, 0.0]]), atol=1e-4)


def test_a_bf16_pack_autocasts_as_the_loop_does(members, split):
    # bf16 matmuls of a member-batched step round differently from a lone trial's: close,
    # not equal (the exactness claim is fp32's)
    train, devs = split
    configs = [c.replace(precision="bf16") for c in members[:2]]
    outcomes, setup = train_pack([build_model(c) for c in configs], configs, train, devs,
                                 use_gpu=False)
    assert setup.precision == "bf16"
    for config, outcome in zip(configs, outcomes, strict=True):
        want, _ = finetune_config(build_model(config), train, devs, config, use_gpu=False)
        for got, ref in zip(outcome.results, want, strict=True):
            assert got.train_loss == pytest.approx(ref.train_loss, abs=1e-3)
            assert got.eval_loss == pytest.approx(ref.eval_loss, abs=1e-3)


def test_a_bf16_pack_evaluates_under_autocast_as_the_loop_does(members, split, monkeypatch):
    """The unpacked model's forward is wrapped in bf16 autocast by Accelerate for evaluation
    too; a pack's fused evaluation must run the same way, or its bf16 dev scores would be
    fp32 ones."""
    train, devs = split
    seen: list[tuple[bool, bool]] = []
    real = pack.FusedMembers.__call__

    def spy(self, batch, train):
        seen.append((train, torch.is_autocast_enabled("cpu")))
        return real(self, batch, train)

    monkeypatch.setattr(pack.FusedMembers, "__call__", spy)
    for precision in ("bf16", "fp32"):
        seen.clear()
        configs = [c.replace(precision=precision, epochs=1) for c in members[:2]]
        train_pack([build_model(c) for c in configs], configs, train, devs, use_gpu=False)
        evaluation = {on for is_train, on in seen if not is_train}
        training = {on for is_train, on in seen if is_train}
        assert evaluation == training == {precision == "bf16"}, precision
