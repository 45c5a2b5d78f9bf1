"""Determinism and exact resumption on CPU: one config run twice gives identical numbers, and a
run interrupted after an epoch and resumed from its saved state computes what the
uninterrupted run computed, weight for weight."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from reinit_tune import data, trial
from reinit_tune.config import TrialConfig
from reinit_tune.models import build_model
from reinit_tune.train import finetune

METRIC_KEYS = ("epoch", "train_loss", "eval_loss", "eval_accuracy", "score", "train_examples")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One thread, as a Ray trial with one CPU has; also far faster on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def config(tiny_bert, glue_dir) -> TrialConfig:
    # lr high enough that every epoch moves the weights; dropout on (BERT's 0.1).
    return TrialConfig(model=tiny_bert, task="rte", train_size=40, seed=3, epochs=3, lr=3e-4,
                       reinit_layers=(2, 3))


def metrics(reports: list[dict]) -> list[tuple]:
    return [tuple(r[k] for k in METRIC_KEYS) for r in reports]


def test_one_trial_run_twice_gives_identical_metrics(config, glue_dir):
    first = trial.execute(config, data_dir=str(glue_dir), use_gpu=False)
    second = trial.execute(config, data_dir=str(glue_dir), use_gpu=False)
    assert len(first) == 3
    assert metrics(first) == metrics(second)
    assert len({r["train_loss"] for r in first}) == 3  # training happened: losses differ


def run(config, glue_dir, **kwargs):
    train, dev = data.train_and_dev(config.task, config.model, config.max_seq_length,
                                    config.train_size, config.seed, str(glue_dir))
    model = build_model(config)
    results, _ = finetune(
        model, train, dev, task=config.task, lr=config.lr, batch_size=config.batch_size,
        epochs=config.epochs, seed=config.seed, length_grouped=config.length_grouped,
        use_gpu=False, **kwargs,
    )
    return model, results


class Interrupted(Exception):
    pass


@pytest.mark.parametrize("length_grouped", [False, True])
def test_resumed_run_equals_the_uninterrupted_run(config, glue_dir, tmp_path, length_grouped):
    config = config.replace(length_grouped=length_grouped)
    whole, whole_results = run(config, glue_dir)

    def stop_after_first_epoch(result, setup):
        trial.save_state(setup.state(), tmp_path)  # through the disk, as a checkpoint goes
        raise Interrupted

    with pytest.raises(Interrupted):
        run(config, glue_dir, on_epoch=stop_after_first_epoch)
    state = trial.load_state(tmp_path)
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
        trial.save_state(setup.state(), tmp_path)
        raise Interrupted

    with pytest.raises(Interrupted):
        run(config, glue_dir, on_epoch=keep)
    state = trial.load_state(tmp_path)
    fresh_order = {**state, "data_order": torch.Generator().manual_seed(1).get_state()}
    _, results = run(config, glue_dir, resume=fresh_order)
    assert results[-1].train_loss != whole_results[-1].train_loss
    fresh_dropout = {**state, "torch_rng": torch.Generator().manual_seed(1).get_state()}
    _, results = run(config, glue_dir, resume=fresh_dropout)
    assert results[-1].train_loss != whole_results[-1].train_loss


def test_execute_checkpoints_only_long_epochs_and_never_the_last(config, glue_dir):
    seen = []
    trial.execute(config, data_dir=str(glue_dir), use_gpu=False, checkpoint_after_s=0,
                  report=lambda record, state: seen.append((record["epoch"], state)))
    assert [(epoch, state is not None) for epoch, state in seen] == [
        (1, True), (2, True), (3, False)]
    assert seen[1][1]["epoch"] == 2 and set(seen[1][1]) >= {"model", "optimizer", "scheduler"}

    seen.clear()
    trial.execute(config, data_dir=str(glue_dir), use_gpu=False, checkpoint_after_s=math.inf,
                  report=lambda record, state: seen.append(state))
    assert seen == [None, None, None]


def test_execute_resumes_and_records_where(config, glue_dir):
    states = {}
    whole = trial.execute(config, data_dir=str(glue_dir), use_gpu=False, checkpoint_after_s=0,
                          report=lambda record, state: states.setdefault(
                              record["epoch"], copy.deepcopy(state)))
    resumed = trial.execute(config, data_dir=str(glue_dir), use_gpu=False, resume=states[2])
    assert metrics(resumed) == metrics(whole[2:])
    assert [r["resumed_from_epoch"] for r in whole] == [0, 0, 0]
    assert resumed[0]["resumed_from_epoch"] == 2
