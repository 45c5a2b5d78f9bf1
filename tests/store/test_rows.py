"""A trial's rows written to the store: one schema readable by pandas and DuckDB, atomic
files, earlier attempts replaced, every field round-tripping."""

from __future__ import annotations

import os
import time

import duckdb
import pandas as pd
import pyarrow.parquet as pq

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store
from reinit_tune.store import files
from tests.helpers import REPO

OLD_STORE = REPO / "tests" / "fixtures" / "store-0.1"  # written by reinit-tune 0.1 (see its rows)


def test_rows_round_trip_with_one_schema_across_tasks(tmp_path, write):
    sst = TrialConfig(EMBEDDED_MODEL, "sst2", train_size=500, seed=1, reinit_layers=(4, 5))
    cola = TrialConfig(EMBEDDED_MODEL, "cola", train_size=500, seed=1)
    write(tmp_path, sst)
    write(tmp_path, cola)
    df = store.load_trials(tmp_path)
    assert len(df) == 2 and set(df["task"]) == {"sst2", "cola"}
    row = df.set_index("task").loc["sst2"]
    assert list(row["reinit_layers"]) == [4, 5] and row["num_pretrained_layers"] == 4
    assert row["eval_accuracy"] == 0.7 and pd.isna(row["eval_mcc"])
    assert row["train_time_s"] == 4.0 and row["total_time_s"] == 6.5
    assert row["train_examples_per_s"] == 50.0 and row["epochs_completed"] == 2
    assert df.set_index("task").loc["cola", "eval_mcc"] == 0.7
    # Every file carries the full schema, so plain readers see one table.
    for f in (tmp_path / "trials").glob("*.parquet"):
        assert pq.read_schema(f).names == store.TRIAL_SCHEMA.names
    assert len(pd.read_parquet(tmp_path / "trials")) == 2
    epochs = store.load_epochs(tmp_path)
    assert len(epochs) == 4 and sorted(epochs["epoch"].unique()) == [1, 2]


def test_duckdb_reads_the_folder(tmp_path, write):
    write(tmp_path, TrialConfig(EMBEDDED_MODEL, "sst2", seed=0))
    write(tmp_path, TrialConfig(EMBEDDED_MODEL, "sst2", seed=1))
    [(n,)] = duckdb.sql(
        f"SELECT count(*) FROM '{tmp_path}/trials/*.parquet' WHERE status = 'ok'").fetchall()
    assert n == 2
    joined = duckdb.sql(
        f"SELECT t.seed, e.epoch FROM '{tmp_path}/trials/*.parquet' t "
        f"JOIN '{tmp_path}/epochs/*.parquet' e USING (trial_id)").df()
    assert len(joined) == 4


def test_writes_leave_no_temporary_files_and_replace_earlier_attempts(tmp_path, write):
    config = TrialConfig(EMBEDDED_MODEL, "sst2", seed=2)
    write(tmp_path, config, status="error", epochs=1)
    write(tmp_path, config, status="ok")
    assert [p.name for p in (tmp_path / "trials").iterdir()] == [f"{config.trial_id}.parquet"]
    df = store.load_trials(tmp_path)
    assert list(df["status"]) == ["ok"]


def test_failed_rows_are_rows_and_not_finished(tmp_path, write):
    ok = TrialConfig(EMBEDDED_MODEL, "sst2", seed=0)
    bad = TrialConfig(EMBEDDED_MODEL, "sst2", seed=1)
    write(tmp_path, ok)
    write(tmp_path, bad, status="error", epochs=0)
    df = store.load_trials(tmp_path)
    assert set(df["status"]) == {"ok", "error"}
    assert df.set_index("status").loc["error", "error"] == "boom"
    assert store.finished_ids(tmp_path) == {ok.trial_id}
    assert len(store.load_trials(tmp_path, status="ok")) == 1


def test_surgery_and_mode_fields_round_trip_through_the_store(tmp_path, write):
    config = TrialConfig(EMBEDDED_MODEL, "rte", seed=3, reinit_layers=(4, 5),
                         reinit_heads=((0, 2), (1, 11)), layer_order=(5, 4, 3, 2, 1, 0),
                         preserve_layernorm=True, init_scheme="authors-code",
                         intermediate_task="wnli")
    probe = TrialConfig(EMBEDDED_MODEL, "rte", probe_layer=0)
    fast = TrialConfig(EMBEDDED_MODEL, "rte", reinit_layers=(5,), reinit_lr_multiplier=1.5)
    for c in (config, probe, fast):
        write(tmp_path, c)
    df = store.load_trials(tmp_path).set_index("trial_id")
    row = df.loc[config.trial_id]
    assert [list(p) for p in row["reinit_heads"]] == [[0, 2], [1, 11]]
    assert list(row["layer_order"]) == [5, 4, 3, 2, 1, 0]
    assert row["preserve_layernorm"] and row["reinit_lr_multiplier"] == 1.0
    assert row["init_scheme"] == "authors-code" and row["intermediate_task"] == "wnli"
    assert pd.isna(row["probe_layer"]) and df.loc[probe.trial_id, "probe_layer"] == 0
    assert df.loc[probe.trial_id, "layer_order"] is None
    assert df.loc[fast.trial_id, "reinit_lr_multiplier"] == 1.5
    assert store.finished_ids(tmp_path) == {config.trial_id, probe.trial_id, fast.trial_id}
    [(n,)] = duckdb.sql(f"SELECT count(*) FROM '{tmp_path}/trials/*.parquet' "
                        "WHERE len(reinit_heads) = 2 AND layer_order[1] = 5").fetchall()
    assert n == 1


def test_hostname_is_stored_and_partial_files_are_removed_from_every_table(
        tmp_path, fake_reports):
    config = TrialConfig(EMBEDDED_MODEL, "sst2", seed=0)
    reports = [{**r, "hostname": "node-7"} for r in fake_reports("sst2")]
    store.write_trial(tmp_path, store.trial_row(config, reports, num_layers=6, status="ok"), [])
    assert store.load_trials(tmp_path).loc[0, "hostname"] == "node-7"
    old = time.time() - 7200
    for table in (store.TRIALS, store.EPOCHS, store.SIMILARITY):
        (tmp_path / table).mkdir(exist_ok=True)
        leftover = tmp_path / table / ".abc.parquet.1234.tmp"
        leftover.write_bytes(b"half a file")
        os.utime(leftover, (old, old))
    assert store.remove_partial_files(tmp_path) == 3
    assert not list(tmp_path.glob("*/.*.tmp"))


def test_a_trial_row_that_cannot_be_written_leaves_no_epoch_rows(tmp_path, monkeypatch, write):
    config = TrialConfig(EMBEDDED_MODEL, "sst2", seed=5)
    real = files.write_atomic

    def fail_on_trials(table, path):
        if path.parent.name == store.TRIALS:
            raise OSError(28, "No space left on device")
        real(table, path)

    monkeypatch.setattr(files, "write_atomic", fail_on_trials)
    try:
        write(tmp_path, config)
    except OSError:
        pass
    else:
        raise AssertionError("the write should have failed")
    assert store.load_epochs(tmp_path).empty and store.load_trials(tmp_path).empty


def test_train_size_is_a_count_and_a_fraction_has_its_own_column(tmp_path, write):
    count = TrialConfig(EMBEDDED_MODEL, "sst2", train_size=500, seed=0)
    share = TrialConfig(EMBEDDED_MODEL, "sst2", train_size=0.1, seed=0)
    full = TrialConfig(EMBEDDED_MODEL, "sst2", seed=0)
    for config in (count, share, full):
        write(tmp_path, config)
    df = store.load_trials(tmp_path).set_index("trial_id")
    assert df.loc[count.trial_id, "train_size"] == 500
    assert pd.isna(df.loc[count.trial_id, "train_fraction"])
    assert pd.isna(df.loc[share.trial_id, "train_size"])
    assert df.loc[share.trial_id, "train_fraction"] == 0.1
    assert pd.isna(df.loc[full.trial_id, "train_size"])
    assert pd.isna(df.loc[full.trial_id, "train_fraction"])
    schema = pq.read_schema(tmp_path / "trials" / f"{count.trial_id}.parquet")
    assert str(schema.field("train_size").type) == "int64"


def test_rows_record_the_data_they_saw_and_old_rows_read_as_full_data(
        tmp_path, write, fake_reports):
    config = TrialConfig(EMBEDDED_MODEL, "qnli", train_size=0.1, seed=0)
    seen = {"data_subset": True, "data_fingerprint": "ab" * 32,
            "data_source": "/data/glue/qnli: train.parquet, validation.parquet"}
    reports = [{**r, **seen} for r in fake_reports("qnli")]
    store.write_trial(tmp_path, store.trial_row(config, reports, num_layers=6, status="ok"), [])
    write(tmp_path, TrialConfig(EMBEDDED_MODEL, "sst2", seed=0))  # no data columns reported
    df = store.load_trials(tmp_path).set_index("task")
    assert df["data_subset"].dtype == bool
    assert df.loc["qnli", "data_subset"] and not df.loc["sst2", "data_subset"]
    assert df.loc["qnli", "data_fingerprint"] == "ab" * 32 and pd.isna(df.loc["sst2",
                                                                             "data_source"])
    assert store.ran_on_subset(df.loc["qnli"]) and not store.ran_on_subset(df.loc["sst2"])
    assert not store.ran_on_subset({"data_subset": None}) and not store.ran_on_subset({})
    assert store.finished_data(tmp_path)[config.trial_id][:2] == ("ab" * 32,
                                                                  seen["data_source"])

    old = store.load_trials(OLD_STORE)  # written before the data columns existed
    assert not old["data_subset"].any() and old["data_fingerprint"].isna().all()
    assert {v[:2] for v in store.finished_data(OLD_STORE).values()} == {(None, None)}
