"""The training loop: seeded and length-grouped batch orders, the fused AdamW kernel (an
execution choice that must not change the update), and exact resumption: a run interrupted
after an epoch and resumed from its saved state computes what the uninterrupted run computed,
weight for weight."""

from __future__ import annotations

import platform

import numpy as np
import pytest
import torch

from reinit_tune import EMBEDDED_MODEL, TrialConfig, data
from reinit_tune.model.build import build_model
from reinit_tune.sweep.trial import load_state, save_state
from reinit_tune.training.finetune import finetune, param_groups
from reinit_tune.training.loop import (
    Optimization,
    batch_loader,
    make_optimizer,
    retain_freed_memory,
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def config(tiny_bert, glue_dir) -> TrialConfig:
    # lr high enough that every epoch moves the weights; dropout on (BERT's 0.1).
    return TrialConfig(model=tiny_bert, task="rte", train_size=40, seed=3, epochs=3, lr=3e-4,
                       reinit_layers=(2, 3))


@pytest.fixture(scope="module")
def sst2_subset(glue_dir):
    train_split, _ = data.train_and_devs("sst2", EMBEDDED_MODEL, 128, 400, seed=0)
    return train_split


def loader(split, seed: int, grouped: bool):
    return batch_loader(len(split), 8, seed, lengths=split.lengths if grouped else None)


def epoch_batches(batches) -> list[list[int]]:
    return [list(b) for b in batches.batch_sampler]


def test_length_grouped_batches_cover_every_example_once_per_epoch_with_less_padding(
        sst2_subset):
    lengths = sst2_subset.lengths
    grouped = loader(sst2_subset, 3, grouped=True)
    shuffled = loader(sst2_subset, 3, grouped=False)
    epochs = [epoch_batches(grouped) for _ in range(2)]
    for batches in epochs:
        assert sorted(i for b in batches for i in b) == list(range(len(sst2_subset)))
        assert all(len(b) == 8 for b in batches)
    assert epochs[0] != epochs[1]  # a new order every epoch

    def padded(batches):
        return sum(int(lengths[b].max()) * len(b) for b in batches)

    # SST-2: ~13 tokens per sentence, batch maxima ~29 when shuffled, ~15 when grouped.
    assert padded(epochs[0]) < 0.7 * padded(epoch_batches(shuffled))
    assert padded(epochs[0]) < 1.25 * int(lengths.sum())


def test_batch_order_is_seeded(sst2_subset):
    def first_epoch(seed, grouped):
        return epoch_batches(loader(sst2_subset, seed, grouped))

    for grouped in (True, False):
        assert first_epoch(5, grouped) == first_epoch(5, grouped)
        assert first_epoch(5, grouped) != first_epoch(6, grouped)
    # what a batch holds really depends on the choice (so it is part of the trial's identity)
    assert first_epoch(5, True) != first_epoch(5, False)


def test_length_grouping_is_part_of_the_trial_identity():
    base = TrialConfig(EMBEDDED_MODEL, "sst2", train_size=500, length_grouped=False)
    # stored trials that predate the field ran shuffled
    assert TrialConfig.from_dict({k: v for k, v in base.to_dict().items()
                                  if k != "length_grouped"}) == base
    grouped = base.replace(length_grouped=True)
    assert grouped.trial_id != base.trial_id
    assert TrialConfig.from_dict(grouped.to_dict()) == grouped
    assert TrialConfig.from_dict({**grouped.to_dict(), "length_grouped": np.bool_(True)}) == grouped


def test_fused_adamw_gives_the_foreach_update(tiny_bert):
    """The fused kernel runs the same AdamW math (run_glue settings) as the reference
    implementation: after 20 steps of identical gradients the weights agree to float32
    rounding. An AdamW with other settings (torch's default weight decay 0.01) does not."""
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    reference = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    models = {k: AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
              for k in ("fused", "foreach", "decay")}
    for m in models.values():
        m.load_state_dict(reference.state_dict())
    fused = make_optimizer(param_groups(models["fused"], 1e-3), "cpu")
    assert fused.defaults["fused"] and fused.defaults["weight_decay"] == 0.0
    assert fused.defaults["eps"] == 1e-8 and fused.defaults["betas"] == (0.9, 0.999)
    optimizers = {
        "fused": fused,
        "foreach": torch.optim.AdamW(models["foreach"].parameters(), lr=1e-3, eps=1e-8,
                                     weight_decay=0.0, foreach=True),
        "decay": torch.optim.AdamW(models["decay"].parameters(), lr=1e-3, eps=1e-8,
                                   foreach=True),
    }
    generator = torch.Generator().manual_seed(1)
    params = {k: list(m.parameters()) for k, m in models.items()}
    for _ in range(20):
        grads = [torch.randn(p.shape, generator=generator) * 1e-2 for p in params["fused"]]
        for k, opt in optimizers.items():
            for p, g in zip(params[k], grads, strict=True):
                p.grad = g.clone()
            opt.step()
    with torch.no_grad():
        moved = 0.0
        for pf, pr, p0 in zip(params["fused"], params["foreach"], reference.parameters(),
                              strict=True):
            torch.testing.assert_close(pf, pr, rtol=1e-5, atol=1e-7)
            moved = max(moved, float((pf - p0).abs().max()))
        assert moved > 1e-3  # the weights really moved
        gap = max(float((pd - pr).abs().max())
                  for pd, pr in zip(params["decay"], params["foreach"], strict=True))
    assert gap > 1e-6


def run(config, glue_dir, **kwargs):
    train, dev = data.train_and_devs(config.task, config.model, config.max_seq_length,
                                     config.train_size, config.seed, str(glue_dir))
    model = build_model(config)
    results, _ = finetune(model, train, dev, task=config.task, opt=Optimization.of(config),
                          use_gpu=False, **kwargs)
    return model, results


class Interrupted(Exception):
    pass


@pytest.mark.parametrize("length_grouped", [False, True])
def test_resumed_run_equals_the_uninterrupted_run(config, glue_dir, tmp_path, length_grouped):
    config = config.replace(length_grouped=length_grouped)
    whole, whole_results = run(config, glue_dir)

    def stop_after_first_epoch(result, setup):
        save_state(setup.state(), tmp_path)  # through the disk, as a checkpoint goes
        raise Interrupted

    with pytest.raises(Interrupted):
        run(config, glue_dir, on_epoch=stop_after_first_epoch)
    state = load_state(tmp_path)
    assert state["epoch"] == 1
    resumed, resumed_results = run(config, glue_dir, resume=state)

    assert [r.epoch for r in resumed_results] == [2, 3]
    for a, b in zip(whole_results[1:], resumed_results, strict=True):
        assert (a.train_loss, a.eval_loss, a.metrics) == (b.train_loss, b.eval_loss, b.metrics)
    expected = whole.state_dict()
    for name, tensor in resumed.state_dict().items():
        assert torch.equal(tensor, expected[name]), name


def test_resuming_without_the_rng_states_would_differ(config, glue_dir, tmp_path):
    """The test above is sharp: dropping the data order or dropout state changes the result."""
    _, whole_results = run(config, glue_dir)

    def keep(result, setup):
        save_state(setup.state(), tmp_path)
        raise Interrupted

    with pytest.raises(Interrupted):
        run(config, glue_dir, on_epoch=keep)
    state = load_state(tmp_path)
    fresh_order = {**state, "data_order": torch.Generator().manual_seed(1).get_state()}
    _, results = run(config, glue_dir, resume=fresh_order)
    assert results[-1].train_loss != whole_results[-1].train_loss
    fresh_dropout = {**state, "torch_rng": torch.Generator().manual_seed(1).get_state()}
    _, results = run(config, glue_dir, resume=fresh_dropout)
    assert results[-1].train_loss != whole_results[-1].train_loss


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_cpu_training_keeps_freed_memory_on_glibc():
    """The allocator setting really applies (mallopt accepts both parameters)."""
    assert retain_freed_memory() is True


# -- learning-rate schedules --------------------------------------------------------------
def test_slanted_triangular_schedule_is_howard_and_ruders_formula():
    """Howard & Ruder 2018 eq. 3 with cut_frac 0.1, ratio 32, for T = 1000 steps: cut = 100;
    p = t/cut before it, 1 - (t - cut)/(cut (1/cut_frac - 1)) after; lr = (1 + p(ratio-1))/ratio."""
    from reinit_tune.training.loop import schedule_factor

    def formula(t: int, total: int = 1000, cut_frac: float = 0.1, ratio: int = 32) -> float:
        cut = int(total * cut_frac)
        p = t / cut if t < cut else 1 - (t - cut) / (cut * (1 / cut_frac - 1))
        return (1 + p * (ratio - 1)) / ratio

    for t in (0, 1, 50, 99, 100, 101, 500, 999, 1000):
        assert schedule_factor(t, 1000, "slanted-triangular") == pytest.approx(formula(t))
    assert schedule_factor(0, 1000, "slanted-triangular") == pytest.approx(1 / 32)
    assert schedule_factor(100, 1000, "slanted-triangular") == pytest.approx(1.0)  # the peak
    assert schedule_factor(1000, 1000, "slanted-triangular") == pytest.approx(1 / 32)


def test_linear_schedules_match_transformers_with_and_without_warmup():
    from transformers import get_linear_schedule_with_warmup

    from reinit_tune.training.loop import make_scheduler, schedule_factor

    for warmup_ratio in (0.0, 0.1):
        reference = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        theirs = get_linear_schedule_with_warmup(reference, int(np.ceil(0.1 * 40))
                                                 if warmup_ratio else 0, 40)
        ours = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        scheduler = make_scheduler(ours, Optimization(lr=1.0, warmup_ratio=warmup_ratio), 40)
        for step in range(40):
            assert scheduler.get_last_lr()[0] == pytest.approx(theirs.get_last_lr()[0])
            assert schedule_factor(step, 40, "linear", warmup_ratio) == pytest.approx(
                theirs.get_last_lr()[0])
            reference.step(), theirs.step(), ours.step(), scheduler.step()
    assert schedule_factor(2, 40, "linear", 0.1) == pytest.approx(0.5)  # half way up


def test_the_loop_trains_with_the_configs_schedule_and_logs_step_losses(tiny_bert, glue_dir):
    config = TrialConfig(tiny_bert, "rte", train_size=32, epochs=2, lr=1e-3, batch_size=8,
                         schedule="slanted-triangular")
    train, devs = data.train_and_devs("rte", tiny_bert, 64, 32, 0, str(glue_dir))
    model = build_model(config)
    results, _ = finetune(model, train, devs, task="rte", opt=Optimization.of(config),
                          use_gpu=False, log_every=3)
    steps = [s for r in results for s in r.steps]
    assert [s for s, _, _ in steps] == [3, 6]  # 8 steps in all, every third logged
    from reinit_tune.training.loop import schedule_factor

    for step, loss, lr in steps:  # the rate each logged step used: the formula's
        assert lr == pytest.approx(1e-3 * schedule_factor(step - 1, 8, "slanted-triangular"))
        assert np.isfinite(loss) and loss > 0
    # 4 steps per epoch: each epoch's result carries the steps it took
    assert [[s for s, _, _ in r.steps] for r in results] == [[3], [6]]
