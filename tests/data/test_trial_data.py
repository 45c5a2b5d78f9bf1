"""One trial's data found once: the same subset, counts and fingerprint as the name-based
functions, without looking the task up again."""

from __future__ import annotations

import numpy as np

from reinit_tune import EMBEDDED_MODEL, TrialConfig, data


def test_trial_data_loads_what_train_and_devs_loads(glue_dir):
    config = TrialConfig(EMBEDDED_MODEL, "rte", train_size=0.01, seed=5, max_seq_length=64,
                         intermediate_task="mrpc")
    found = data.TrialData.of(config, glue_dir)
    assert found.source.task == "rte" and found.intermediate.task == "mrpc"
    assert found.source.path("train") == data.local_split_path("rte", "train", glue_dir)
    train, devs = found.load(config.model, config.max_seq_length)
    again, same = data.train_and_devs("rte", EMBEDDED_MODEL, 64, 0.01, 5, glue_dir)
    assert train.input_ids == again.input_ids and list(devs) == list(same) == ["validation"]
    assert np.array_equal(train.labels, again.labels)
    assert found.count() == data.train_count("rte", 0.01, glue_dir)
    assert not found.short(train.num_examples) and found.short(train.num_examples - 1)
    assert found.identity() == data.data_identity("rte", glue_dir, "mrpc")


def test_a_task_source_reads_the_hub_registry_without_files():
    source = data.TaskSource.find("qnli", data.env.HUB)
    assert not source.is_local and source.path("train") is None
    assert source.rows("train") == source.official_rows("train") == 104_743
    assert source.where("train") == "the hub's nyu-mll/glue"
