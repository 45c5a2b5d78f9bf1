"""One trial without Ray (``execute``): deterministic, checkpoints only long epochs and never
the last, resumes from a checkpoint and records where."""

from __future__ import annotations

import copy
import math

import pytest

from reinit_tune import TrialConfig
from reinit_tune.sweep import trial

METRIC_KEYS = ("epoch", "train_loss", "eval_loss", "eval_accuracy", "score", "train_examples")


pytestmark = pytest.mark.usefixtures("one_thread")


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


def test_execute_checkpoints_only_long_epochs_and_never_the_last(config, glue_dir):
    seen = []
    trial.execute(config, data_dir=str(glue_dir), use_gpu=False, checkpoint_after_s=0,
                  report=lambda record, state: seen.append((record.epoch, state)))
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
                              record.epoch, copy.deepcopy(state)))
    resumed = trial.execute(config, data_dir=str(glue_dir), use_gpu=False, resume=states[2])
    assert metrics(resumed) == metrics(whole[2:])
    assert [r["resumed_from_epoch"] for r in whole] == [0, 0, 0]
    assert resumed[0]["resumed_from_epoch"] == 2


def test_grouped_trial_trains_and_scores(tiny_bert, glue_dir):
    config = TrialConfig(tiny_bert, "rte", train_size=24, epochs=2, length_grouped=True,
                         precision="bf16", lr=1e-4)
    reports = trial.execute(config)
    assert [r["epoch"] for r in reports] == [1, 2]
    assert all(0 <= r["eval_accuracy"] <= 1 and r["train_examples"] == 24 for r in reports)
    assert reports[0]["precision_used"] == "bf16"


def test_a_trial_on_a_subset_file_runs_only_when_allowed_and_says_so(tiny_bert, glue_dir,
                                                                     tmp_path):
    import pyarrow.parquet as pq

    from reinit_tune import data

    (tmp_path / "rte").mkdir()
    table = pq.read_table(glue_dir / "rte" / "train.parquet").slice(0, 40)
    meta = {**table.schema.metadata, b"subset": b'{"rows": 40, "official_rows": 2490}'}
    pq.write_table(table.replace_schema_metadata(meta), tmp_path / "rte" / "train.parquet")
    pq.write_table(pq.read_table(glue_dir / "rte" / "validation.parquet").slice(0, 32),
                   tmp_path / "rte" / "validation.parquet")
    config = TrialConfig(tiny_bert, "rte", train_size=0.1, epochs=1, lr=1e-4)
    with pytest.raises(data.SubsetError, match="needs 249"):
        trial.execute(config, data_dir=str(tmp_path), use_gpu=False)
    [report] = trial.execute(config, data_dir=str(tmp_path), use_gpu=False, allow_subset=True)
    assert report["train_examples"] == 40 and report["data_subset"] is True
    assert (report["data_fingerprint"], report["data_source"]) == data.data_identity(
        "rte", tmp_path)
    [full] = trial.execute(config.replace(train_size=0.01), data_dir=str(tmp_path),
                           use_gpu=False)
    assert full["train_examples"] == 25 and full["data_subset"] is False




def test_only_infrastructure_failures_are_retried():
    from ray.exceptions import RayActorError

    from reinit_tune.errors import InputError, TrialDiverged

    assert trial.is_infrastructure_failure(ConnectionResetError("peer reset"))
    assert trial.is_infrastructure_failure(TimeoutError())
    assert trial.is_infrastructure_failure(RayActorError())
    for deterministic in (KeyError("token_type_ids"), InputError("model: bad"),
                          TrialDiverged("diverged: nan"), OSError("offline"), ValueError()):
        assert not trial.is_infrastructure_failure(deterministic)
    assert trial.failure_text(TrialDiverged("diverged: x")) == "diverged: x"
    assert trial.failure_text(KeyError("token_type_ids")) == "KeyError: 'token_type_ids'"


def test_a_trial_whose_loss_overflows_raises_diverged(tiny_bert, glue_dir, tmp_path):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from reinit_tune.errors import TrialDiverged

    shutil.copytree(glue_dir / "stsb", tmp_path / "stsb")
    path = tmp_path / "stsb" / "train.parquet"
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.schema.get_field_index("label"), "label",
                                    pa.array([1e30] * len(table))), path)
    config = TrialConfig(model=tiny_bert, task="stsb", train_size=16, seed=0, epochs=2,
                         max_seq_length=32)
    reports = []
    with pytest.raises(TrialDiverged, match="diverged: the training loss of epoch 1 is inf"):
        trial.execute(config, data_dir=str(tmp_path), use_gpu=False,
                      report=lambda record, state: reports.append(record))
    assert reports == []  # nothing non-finite was reported
