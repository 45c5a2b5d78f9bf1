"""The Parquet store: one row per trial, atomic files, one schema readable by pandas/DuckDB,
and stores written by earlier versions."""

from __future__ import annotations

import os
import time

import duckdb
import pandas as pd
import pyarrow.parquet as pq

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store
from tests.helpers import REPO

OLD_STORE = REPO / "tests" / "fixtures" / "store-0.1"  # written by reinit-tune 0.1 (see its rows)


def fake_reports(task: str, epochs: int = 2) -> list[dict]:
    metric = TrialConfig(EMBEDDED_MODEL, task).task_spec.primary
    return [{"epoch": e, "train_loss": 1.0 / e, "eval_loss": 0.5, f"eval_{metric}": 0.5 + e / 10,
             "score": 0.5 + e / 10, "train_time_s": 2.0, "eval_time_s": 1.0,
             "train_examples_per_s": 50.0, "train_examples": 100, "setup_time_s": 0.5,
             "device": "cpu", "precision_used": "fp32", "node_id": "n1", "versions": "{}"}
            for e in range(1, epochs + 1)]


def write(results, config, status="ok", epochs=2):
    reports = fake_reports(config.task, epochs)
    row = store.trial_row(config, reports, num_layers=6, status=status,
                          error=None if status == "ok" else "boom")
    return store.write_trial(results, row, store.epoch_rows(config, reports))


def test_rows_round_trip_with_one_schema_across_tasks(tmp_path):
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


def test_duckdb_reads_the_folder(tmp_path):
    write(tmp_path, TrialConfig(EMBEDDED_MODEL, "sst2", seed=0))
    write(tmp_path, TrialConfig(EMBEDDED_MODEL, "sst2", seed=1))
    [(n,)] = duckdb.sql(
        f"SELECT count(*) FROM '{tmp_path}/trials/*.parquet' WHERE status = 'ok'").fetchall()
    assert n == 2
    joined = duckdb.sql(
        f"SELECT t.seed, e.epoch FROM '{tmp_path}/trials/*.parquet' t "
        f"JOIN '{tmp_path}/epochs/*.parquet' e USING (trial_id)").df()
    assert len(joined) == 4


def test_writes_leave_no_temporary_files_and_replace_earlier_attempts(tmp_path):
    config = TrialConfig(EMBEDDED_MODEL, "sst2", seed=2)
    write(tmp_path, config, status="error", epochs=1)
    write(tmp_path, config, status="ok")
    assert [p.name for p in (tmp_path / "trials").iterdir()] == [f"{config.trial_id}.parquet"]
    df = store.load_trials(tmp_path)
    assert list(df["status"]) == ["ok"]


def test_failed_rows_are_rows_and_not_finished(tmp_path):
    ok = TrialConfig(EMBEDDED_MODEL, "sst2", seed=0)
    bad = TrialConfig(EMBEDDED_MODEL, "sst2", seed=1)
    write(tmp_path, ok)
    write(tmp_path, bad, status="error", epochs=0)
    df = store.load_trials(tmp_path)
    assert set(df["status"]) == {"ok", "error"}
    assert df.set_index("status").loc["error", "error"] == "boom"
    assert store.finished_ids(tmp_path) == {ok.trial_id}
    assert len(store.load_trials(tmp_path, status="ok")) == 1


def test_empty_store_reads_as_empty_table(tmp_path):
    df = store.load_trials(tmp_path)
    assert df.empty and "score" in df.columns
    assert store.finished_ids(tmp_path) == set()


def test_surgery_and_mode_fields_round_trip_through_the_store(tmp_path):
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


def test_a_store_written_by_version_0_1_loads_and_its_trials_count_as_done():
    trials = store.load_trials(OLD_STORE)
    assert len(trials) == 4 and set(trials["status"]) == {"ok"}
    assert set(trials["experiment"]) == {"progressive", "probing"}
    assert all('"reinit_tune": "0.1.0"' in v for v in trials["versions"])
    assert store.finished_ids(OLD_STORE) == set(trials["trial_id"])
    assert len(store.load_epochs(OLD_STORE)) == 4


def test_hostname_is_stored_and_partial_files_are_removed_from_every_table(tmp_path):
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


def test_a_trial_row_that_cannot_be_written_leaves_no_epoch_rows(tmp_path, monkeypatch):
    config = TrialConfig(EMBEDDED_MODEL, "sst2", seed=5)
    real = store._write_atomic

    def fail_on_trials(table, path):
        if path.parent.name == store.TRIALS:
            raise OSError(28, "No space left on device")
        real(table, path)

    monkeypatch.setattr(store, "_write_atomic", fail_on_trials)
    try:
        write(tmp_path, config)
    except OSError:
        pass
    else:
        raise AssertionError("the write should have failed")
    assert store.load_epochs(tmp_path).empty and store.load_trials(tmp_path).empty


def test_train_size_is_a_count_and_a_fraction_has_its_own_column(tmp_path):
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


def test_rows_of_the_float_train_size_era_are_split_on_reading(tmp_path):
    """Before train_fraction existed, counts and fractions shared a float column."""
    import pyarrow as pa

    for config in (TrialConfig(EMBEDDED_MODEL, "sst2", train_size=500, seed=0),
                   TrialConfig(EMBEDDED_MODEL, "sst2", train_size=0.1, seed=1)):
        path = write(tmp_path, config)
        table = pq.read_table(path).drop_columns(["train_size", "train_fraction"])
        old = table.append_column("train_size", pa.array([float(config.train_size)]))
        pq.write_table(old, path)
    df = store.load_trials(tmp_path).sort_values("seed")
    assert list(df["train_size"].fillna(-1)) == [500, -1]
    assert list(df["train_fraction"].fillna(-1)) == [-1, 0.1]
    assert store.finished_ids(tmp_path) == set(df["trial_id"])


def test_rows_record_the_data_they_saw_and_old_rows_read_as_full_data(tmp_path):
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
    assert store.finished_data(tmp_path)[config.trial_id] == ("ab" * 32, seen["data_source"])

    old = store.load_trials(OLD_STORE)  # written before the data columns existed
    assert not old["data_subset"].any() and old["data_fingerprint"].isna().all()
    assert set(store.finished_data(OLD_STORE).values()) == {(None, None)}
