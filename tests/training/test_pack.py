"""Trial packs: members trained fused compute what the same trials compute run
apart through the single-trial path, dropout on, with members of two seeds (their own train
subsets, batch orders, padded lengths and dropout streams): per-epoch train losses, dev
losses and scores to 1e-5, and the final weights; which configs may share a pack; a
diverging member is dropped alone; the fused optimizer step against torch's AdamW and
clipping run member by member."""

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
    # progressive reinit, a permutation, a head reinit and 003 App. E's multiplier, at two
    # seeds (seed 7's subset, batches and dropout masks are its own)
    base = TrialConfig(tiny_bert, "rte", train_size=24, seed=5, epochs=2, lr=3e-4,
                       max_seq_length=96, batch_size=8)
    return [base.replace(reinit_layers=(2, 3)),
            base.replace(layer_order=(3, 1, 2, 0), seed=7),
            base.replace(reinit_heads=((1, 2), (3, 0))),
            base.replace(reinit_layers=(3,), reinit_lr_multiplier=5.0, seed=7)]


@pytest.fixture(scope="module")
def split(members, glue_dir):
    trains = {}
    for c in members:
        trains[c.seed], devs = data.train_and_devs(c.task, c.model, c.max_seq_length,
                                                   c.train_size, c.seed, str(glue_dir))
    # 64 dev examples keep the test fast; both runs score the same ones
    return trains, {name: dev.select(range(64)) for name, dev in devs.items()}


@pytest.fixture(scope="module")
def apart(members, split):
    """Each member through the single-trial path (``finetune_config``, as ``execute``)."""
    trains, devs = split
    runs = []
    for config in members:
        model = build_model(config)
        results, _ = finetune_config(model, trains[config.seed], devs, config, use_gpu=False)
        runs.append((results, {k: v.detach().clone() for k, v in model.state_dict().items()}))
    return runs


def test_a_pack_equals_its_members_run_apart_with_dropout_on(members, split, apart,
                                                             monkeypatch):
    trains, devs = split
    models = [build_model(c) for c in members]
    dropout = models[0].config
    assert dropout.hidden_dropout_prob > 0 and dropout.attention_probs_dropout_prob > 0
    # the seeds' batches really differ in length at some step: padding is exercised
    padded = []
    real = pack._pad

    def spy(batch, length, pad_id):
        padded.append(length - batch["input_ids"].shape[1])
        return real(batch, length, pad_id)

    monkeypatch.setattr(pack, "_pad", spy)
    seen = []
    outcomes, setup = train_pack(models, members, trains, devs, use_gpu=False,
                                 on_epoch=lambda i, r, s: seen.append((i, r.epoch)),
                                 keep_weights=True)
    assert max(padded) > 0
    assert setup.device == "cpu" and setup.precision == "fp32"
    assert sorted(seen) == [(i, e) for i in range(4) for e in (1, 2)]
    worst = {"train_loss": 0.0, "eval_loss": 0.0, "metric": 0.0, "weight": 0.0}
    for outcome, (results, weights) in zip(outcomes, apart, strict=True):
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
    trains, devs = split
    configs = members[:2]
    models = [build_model(c) for c in configs]
    with torch.no_grad():  # member 0 starts broken: its loss is NaN from the first step
        models[0].classifier.weight.fill_(math.nan)
    outcomes, _ = train_pack(models, configs, trains, devs, use_gpu=False)
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
    # a BERT's packs may mix seeds; a model whose code is not BERT's packs one seed
    assert pack_key(base.replace(seed=6)) == pack_key(base)
    assert pack.mixes_seeds(tiny_bert)
    assert not pack.mixes_seeds("no/such-model")
    for other in (base.replace(lr=1e-4), base.replace(train_size=32),
                  base.replace(epochs=2), base.replace(batch_size=16),
                  base.replace(precision="bf16"), base.replace(max_seq_length=64),
                  base.replace(length_grouped=False), base.replace(task="sst2"),
                  base.replace(schedule="slanted-triangular"),
                  base.replace(warmup_ratio=0.1), base.replace(init_scheme="authors-code")):
        assert pack_key(other) != pack_key(base)
    assert {"model", "task", "train_size", "epochs", "batch_size", "lr", "schedule",
            "warmup_ratio", "precision", "max_seq_length", "length_grouped",
            "init_scheme"} <= set(pack.PACK_FIELDS)
    assert "seed" in pack.MEMBER_FIELDS
    probe, sequential = base.replace(probe_layer=2), base.replace(intermediate_task="sst2")
    squad = TrialConfig(tiny_bert, "squad_v2", train_size=24)
    for alone in (probe, sequential, squad):
        assert not packable(alone)
        assert pack_key(alone) != pack_key(alone.replace(experiment="x"))  # never shared
    with pytest.raises(ValueError, match="pack_key"):
        train_pack([], [base, base.replace(lr=1.0)], None, {}, use_gpu=False)


def test_the_fused_optimizer_step_equals_adamw_and_clipping_member_by_member():
    """One fused AdamW over the flat buffer (members at their own learning rates, 003 App.
    E's multiplier on one layer, the embedding's reachable rows on their own) against
    torch's AdamW and ``clip_grad_norm_`` run for each member alone, on the loop's
    schedule."""
    from torch import nn

    from reinit_tune.training.loop import MAX_GRAD_NORM, Optimization, make_scheduler

    torch.manual_seed(0)
    models = [nn.Sequential(nn.Embedding(50, 4), nn.Linear(4, 6), nn.Linear(6, 3))
              for _ in range(3)]
    lrs = [{"0.weight": 1e-2, "1.weight": 1e-2, "1.bias": 1e-2, "2.weight": lr, "2.bias": lr}
           for lr in (1e-2, 5e-2, 1e-2)]
    rows = torch.tensor([1, 5, 7, 30])
    fused = pack.FusedMembers(models[0], 3, torch.device("cpu"), rows="0.weight")
    for model in models:
        fused.add(model)
    fused.start()
    opt = Optimization(lr=1e-2, epochs=1)
    optimizer = pack.PackOptimizer(fused, lrs, rows, opt, total_steps=4)
    reference = [[p.detach().clone().requires_grad_() for p in m.parameters()] for m in models]
    names = [n for n, _ in models[0].named_parameters()]
    alone = []
    for params, member in zip(reference, lrs, strict=True):
        adamw = torch.optim.AdamW([{"params": [p], "lr": member[n]}
                                   for n, p in zip(names, params, strict=True)],
                                  betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                                  foreach=False)
        alone.append((adamw, make_scheduler(adamw, opt, 4)))
    for step in range(4):
        scale = 10.0 if step % 2 else 0.01  # some steps clip, some do not
        flat_grad = torch.randn(fused.flat.shape) * scale
        table_grad = torch.zeros(fused.table.shape)
        table_grad[:, rows] = torch.randn(3, len(rows), 4) * scale  # unreached rows: 0
        fused.flat.grad, fused.table.grad = flat_grad.clone(), table_grad.clone()
        for m, (params, (adamw, scheduler)) in enumerate(zip(reference, alone, strict=True)):
            pieces = iter(flat_grad[m].split([p.numel() for p in params[1:]]))
            params[0].grad = table_grad[m].clone()
            for p in params[1:]:
                p.grad = next(pieces).view(p.shape).clone()
            torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM)
            adamw.step()
            scheduler.step()
        optimizer.step()
        optimizer.advance()
    for m, params in enumerate(reference):
        state = fused.member_state(m)
        for name, want in zip(names, params, strict=True):
            torch.testing.assert_close(state[name], want.detach(), rtol=1e-5, atol=1e-7,
                                       msg=name)
    # rows no member's data reaches never moved
    untouched = torch.ones(50, dtype=torch.bool)
    untouched[rows] = False
    assert torch.equal(fused.table.detach()[:, untouched],
                       torch.stack([m[0].weight[untouched] for m in models]))


def test_a_bf16_pack_autocasts_as_the_loop_does(members, split):
    # bf16 matmuls of a member-batched step round differently from a lone trial's: close,
    # not equal (the exactness claim is fp32's)
    trains, devs = split
    configs = [c.replace(precision="bf16") for c in members[:2]]
    outcomes, setup = train_pack([build_model(c) for c in configs], configs, trains, devs,
                                 use_gpu=False)
    assert setup.precision == "bf16"
    for config, outcome in zip(configs, outcomes, strict=True):
        want, _ = finetune_config(build_model(config), trains[config.seed], devs, config,
                                  use_gpu=False)
        for got, ref in zip(outcome.results, want, strict=True):
            assert got.train_loss == pytest.approx(ref.train_loss, abs=1e-3)
            assert got.eval_loss == pytest.approx(ref.eval_loss, abs=1e-3)


def test_a_bf16_pack_evaluates_under_autocast_as_the_loop_does(members, split, monkeypatch):
    """The unpacked model's forward is wrapped in bf16 autocast by Accelerate for evaluation
    too; a pack's fused evaluation must run the same way, or its bf16 dev scores would be
    fp32 ones."""
    trains, devs = split
    seen: list[tuple[bool, bool]] = []
    real = pack.FusedMembers.__call__

    def spy(self, batch, train, **kwargs):
        seen.append((train, torch.is_autocast_enabled("cpu")))
        return real(self, batch, train, **kwargs)

    monkeypatch.setattr(pack.FusedMembers, "__call__", spy)
    for precision in ("bf16", "fp32"):
        seen.clear()
        configs = [c.replace(precision=precision, epochs=1) for c in members[:2]]
        train_pack([build_model(c) for c in configs], configs, trains, devs, use_gpu=False)
        evaluation = {on for is_train, on in seen if not is_train}
        training = {on for is_train, on in seen if is_train}
        assert evaluation == training == {precision == "bf16"}, precision


def test_a_trials_numbers_do_not_depend_on_its_pack(members, split):
    """Four surgeries of one seed (one batch order, so one padding) trained as a pack of 4,
    as two of 2 and as four of 1: every epoch's losses and scores and the final weights
    equal to the last bit (stateless masks: a member draws the same ones in any pack)."""
    trains, devs = split
    base = members[0].replace(reinit_layers=())
    configs = [base.replace(reinit_layers=(2, 3)), base.replace(layer_order=(3, 1, 2, 0)),
               base.replace(reinit_heads=((1, 2), (3, 0))),
               base.replace(reinit_layers=(3,), reinit_lr_multiplier=5.0)]

    def run(packs):
        out = []
        for chunk in packs:
            outcomes, _ = train_pack([build_model(c) for c in chunk], chunk, trains, devs,
                                     use_gpu=False, keep_weights=True)
            out += outcomes
        return out

    four = run([configs])
    for other in (run([configs[:2], configs[2:]]), run([[c] for c in configs])):
        for a, b in zip(four, other, strict=True):
            assert [(r.train_loss, r.eval_loss, r.metrics) for r in a.results] == \
                [(r.train_loss, r.eval_loss, r.metrics) for r in b.results]
            assert all(torch.equal(a.weights[k], b.weights[k]) for k in a.weights)
    assert len({round(o.results[0].train_loss, 7) for o in four}) == 4


def test_padding_leaves_a_members_forward_pass_bit_for_bit(tiny_bert, split):
    """A member whose batch a pack pads to another seed's longer one computes the loss it
    computes on its own batch, to the last bit (masks and attention ignore the padding);
    the backward pass sums over the padded tokens too, in another order, so its gradients
    agree to rounding (the pack test above bounds the whole run)."""
    from reinit_tune.training.dropout import CounterDropout, keys_tensor

    trains, _ = split
    config = TrialConfig(tiny_bert, "rte", max_seq_length=128)
    model = build_model(config).train()
    model.set_attn_implementation("eager")
    batch = trains[5].collate(list(range(8)))
    length = batch["input_ids"].shape[1]
    losses = []
    for extra in (0, 5):
        padded = dict(pack._pad(batch, length + extra, trains[5].pad_id))
        padded["attention_mask"] = pack.additive_mask(padded["attention_mask"])
        masks = CounterDropout(keys_tensor([5], "cpu")[0], torch.tensor(4), 128)
        with masks.forward():
            losses.append(model(**padded).loss)
    assert torch.equal(losses[0], losses[1])
