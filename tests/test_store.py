"""The Parquet store: one row per trial, atomic files, one schema readable by pandas/DuckDB,
and stores written by earlier versions."""

from __future__ import annotations

import os
import time

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

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


@pytest.mark.parametrize("old_name", ["0-old", "z-old"])  # sorted before and after
def test_an_old_fraction_beside_new_rows_is_never_read_as_a_count(tmp_path, old_name):
    """A store mixing float-era files with current ones, read for ``train_size`` alone: the
    old 0.5 must not come out as the count 0 because a current file's int column came
    first."""
    import pyarrow as pa

    write(tmp_path, TrialConfig(EMBEDDED_MODEL, "sst2", train_size=500, seed=0))
    share = TrialConfig(EMBEDDED_MODEL, "sst2", train_size=0.5, seed=1)
    path = write(tmp_path, share)
    table = pq.read_table(path).drop_columns(["train_size", "train_fraction"])
    pq.write_table(table.append_column("train_size", pa.array([0.5])),
                   path.with_name(f"{old_name}.parquet"))
    path.unlink()
    for columns in (["trial_id", "train_size"], ["trial_id", "train_fraction"], None):
        df = store.load_trials(tmp_path, columns=columns).set_index("trial_id")
        if "train_size" in df:
            assert pd.isna(df.loc[share.trial_id, "train_size"]), columns
            assert sorted(df["train_size"].dropna()) == [500], columns
        if "train_fraction" in df:
            assert df.loc[share.trial_id, "train_fraction"] == 0.5, columns


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
    assert store.finished_data(tmp_path)[config.trial_id][:2] == ("ab" * 32,
                                                                  seen["data_source"])

    old = store.load_trials(OLD_STORE)  # written before the data columns existed
    assert not old["data_subset"].any() and old["data_fingerprint"].isna().all()
    assert {v[:2] for v in store.finished_data(OLD_STORE).values()} == {(None, None)}


# -- reading at scale, bad files, compaction (issue 21) ------------------------------------
def _store(tmp_path, n=6):
    configs = [TrialConfig(EMBEDDED_MODEL, task, seed=seed, train_size=500)
               for task in ("sst2", "cola") for seed in range(n // 2)]
    for c in configs:
        write(tmp_path, c)
    return configs


def _frame(df):
    return df.sort_values(list(df.columns[:1])).reset_index(drop=True).astype(str)


def test_only_the_columns_asked_for_are_read(tmp_path):
    _store(tmp_path, 4)
    df = store.load_trials(tmp_path, columns=["trial_id", "score"], status="ok")
    assert list(df.columns) == ["trial_id", "score"] and len(df) == 4
    light = store.load_trials(tmp_path, columns=store.trial_columns())
    assert "config_json" not in light and "versions" not in light and "score" in light
    assert list(store.load_epochs(tmp_path, columns=["epoch"])["epoch"]) == [1, 2] * 4
    try:
        store.load_trials(tmp_path, columns=["no_such_column"])
    except ValueError as e:
        assert "no_such_column" in str(e)
    else:
        raise AssertionError("an unknown column must be refused")


def test_foreign_and_damaged_files_are_skipped_and_named(tmp_path, caplog):
    import pyarrow as pa

    configs = _store(tmp_path, 4)
    trials = tmp_path / "trials"
    pq.write_table(pa.table({"a": [1], "b": ["x"]}), trials / "other-program.parquet")
    pq.write_table(pa.table({"trial_id": [7], "status": ["ok"]}), trials / "int-ids.parquet")
    (trials / "damaged.parquet").write_bytes(b"PAR1 not really")
    (trials / ".half.parquet.0123.tmp").write_bytes(b"half a file")
    df = store.load_trials(tmp_path)
    assert sorted(df["trial_id"]) == sorted(c.trial_id for c in configs)  # no phantom rows
    for name in ("other-program.parquet", "int-ids.parquet", "damaged.parquet"):
        assert name in caplog.text
    assert ".half" not in caplog.text
    assert {p.name for p in store.unreadable_files(tmp_path)} == {
        "other-program.parquet", "int-ids.parquet", "damaged.parquet"}
    check = store.check_store(tmp_path)
    assert {p.name for p in check.unreadable} == {"damaged.parquet"}
    assert {p.name for p in check.foreign} == {"other-program.parquet", "int-ids.parquet"}
    assert not check.clean and "damaged.parquet" in str(check)
    assert store.finished_ids(tmp_path) == {c.trial_id for c in configs}


def test_malformed_rows_are_reported_and_skipped(tmp_path, caplog):
    good, heads, versions = (TrialConfig(EMBEDDED_MODEL, "rte", seed=s) for s in range(3))
    for c in (good, heads, versions):
        write(tmp_path, c)
    for config, column, value in ((heads, "reinit_heads", [[0, 1], [2, 3, 4]]),
                                  (versions, "versions", "torch 2.x")):
        path = tmp_path / "trials" / f"{config.trial_id}.parquet"
        rows = pq.read_table(path).to_pylist()
        rows[0][column] = value
        pq.write_table(pq.read_table(path).from_pylist(rows, schema=store.TRIAL_SCHEMA), path)
    df = store.load_trials(tmp_path)
    assert list(df["trial_id"]) == [good.trial_id]
    assert heads.trial_id in caplog.text and "not a (layer, head) pair" in caplog.text
    assert versions.trial_id in caplog.text and "not a JSON object" in caplog.text
    check = store.check_store(tmp_path)
    assert {(key, why.split()[0]) for _, key, why in check.malformed} == {
        (heads.trial_id, "a"), (versions.trial_id, "versions")}
    assert store.finished_ids(tmp_path) == {good.trial_id}


def test_a_trial_whose_epoch_file_is_unreadable_is_not_finished(tmp_path):
    lost, kept = TrialConfig(EMBEDDED_MODEL, "rte", seed=0), TrialConfig(EMBEDDED_MODEL, "rte",
                                                                        seed=1)
    write(tmp_path, lost)
    write(tmp_path, kept)
    (tmp_path / "epochs" / f"{lost.trial_id}.parquet").write_bytes(b"disk fault")
    assert len(store.load_trials(tmp_path)) == 2 and len(store.load_epochs(tmp_path)) == 2
    assert store.finished_ids(tmp_path) == {kept.trial_id}  # the next sweep reruns it
    check = store.check_store(tmp_path)
    assert check.lost_epochs == [lost.trial_id] and "runs it again" in str(check)
    write(tmp_path, lost)  # the rerun rewrites both files
    assert store.finished_ids(tmp_path) == {lost.trial_id, kept.trial_id}
    assert store.check_store(tmp_path).clean


def _everything(root):
    return (_frame(store.load_trials(root)), _frame(store.load_epochs(root)),
            store.finished_ids(root))


def _same(a, b):
    assert a[0].equals(b[0]) and a[1].equals(b[1]) and a[2] == b[2]


def test_compaction_merges_files_and_every_reader_sees_the_same_rows(tmp_path):
    configs = _store(tmp_path, 8)
    store.write_similarity(tmp_path, configs[0].trial_id, [{"layer": 0, "cka": 0.5}])
    before = _everything(tmp_path)
    merged = store.compact(tmp_path)
    assert merged == {"trials": 8, "epochs": 8, "similarity": 0, "steps": 0, "pairs": 0}
    names = [p.name for p in (tmp_path / "trials").iterdir()]
    assert len(names) == 1 and names[0].startswith(store.COMPACTED_PREFIX)
    _same(before, _everything(tmp_path))
    assert store.small_file_count(tmp_path) == 1  # the one similarity file (min_files=2)
    [(n,)] = duckdb.sql(f"SELECT count(*) FROM '{tmp_path}/trials/*.parquet' "
                        "WHERE status = 'ok'").fetchall()
    assert n == 8 and len(pd.read_parquet(tmp_path / "trials")) == 8
    joined = duckdb.sql(f"SELECT t.seed, e.epoch FROM '{tmp_path}/trials/*.parquet' t "
                        f"JOIN '{tmp_path}/epochs/*.parquet' e USING (trial_id)").df()
    assert len(joined) == 16
    # a later attempt of a compacted trial (a new per-trial file) wins over its compacted row
    write(tmp_path, configs[1], status="error", epochs=1)
    df = store.load_trials(tmp_path).set_index("trial_id")
    assert len(df) == 8 and df.loc[configs[1].trial_id, "status"] == "error"
    assert len(store.load_epochs(tmp_path)) == 15
    store.compact(tmp_path)  # and the newer compacted file wins over the older one
    assert store.load_trials(tmp_path).set_index("trial_id").loc[configs[1].trial_id,
                                                                 "status"] == "error"
    assert len(list((tmp_path / "trials").iterdir())) == 2
    assert configs[1].trial_id not in store.finished_ids(tmp_path)


def test_reuse_and_ids_work_on_a_compacted_store(tmp_path):
    source = TrialConfig(EMBEDDED_MODEL, "rte", seed=0, experiment="progressive")
    other = TrialConfig(EMBEDDED_MODEL, "rte", seed=1, experiment="progressive")
    for c in (source, other):
        write(tmp_path, c)
        store.write_similarity(tmp_path, c.trial_id, [{"layer": 0, "cka": 0.5}])
    store.compact(tmp_path)
    assert store.similarity_ids(tmp_path) == {source.trial_id, other.trial_id}
    copy = TrialConfig(EMBEDDED_MODEL, "rte", seed=0, experiment="heads")
    assert store.equivalent_ids(tmp_path)[store.equivalence_key(copy)] == source.trial_id
    store.reuse_trial(tmp_path, source.trial_id, copy)
    df = store.load_trials(tmp_path).set_index("trial_id")
    assert df.loc[copy.trial_id, "reused_from"] == source.trial_id
    assert df.loc[copy.trial_id, "score"] == df.loc[source.trial_id, "score"]
    epochs = store.load_epochs(tmp_path)
    assert list(epochs[epochs["trial_id"] == copy.trial_id]["experiment"]) == ["heads"] * 2
    assert copy.trial_id in store.similarity_ids(tmp_path)
    assert store.finished_ids(tmp_path) == {source.trial_id, other.trial_id, copy.trial_id}


def test_a_compaction_killed_at_any_step_loses_nothing(tmp_path, monkeypatch):
    class Killed(BaseException):
        pass

    _store(tmp_path, 6)
    before = _everything(tmp_path)
    seen_during = []
    real_replace, real_unlink = os.replace, os.unlink

    def kill_on_rename(src, dst):
        raise Killed

    monkeypatch.setattr(store.os, "replace", kill_on_rename)  # before the rename
    try:
        store.compact(tmp_path)
    except Killed:
        pass
    monkeypatch.setattr(store.os, "replace", real_replace)
    _same(before, _everything(tmp_path))
    deleted = []

    def kill_after(n):
        def unlink(path):
            seen_during.append(_everything(tmp_path))  # a reader between the steps
            if len(deleted) == n:
                raise Killed
            deleted.append(path)
            real_unlink(path)
        return unlink

    for n in (0, 3):  # after the rename, before any deletion; halfway through the deletions
        monkeypatch.setattr(store.os, "unlink", kill_after(n))
        try:
            store.compact(tmp_path)
        except Killed:
            pass
        monkeypatch.setattr(store.os, "unlink", real_unlink)
        _same(before, _everything(tmp_path))
    for during in seen_during:
        _same(before, during)
    store.compact(tmp_path)  # finishing the job later merges what is left
    _same(before, _everything(tmp_path))
    assert store.small_file_count(tmp_path) == 0


def test_many_compactions_keep_few_files_and_every_trial_once(tmp_path, monkeypatch):
    """Thirty sweeps, each compacting what it wrote, some rerunning a trial an earlier sweep
    stored: compacted files are merged in size tiers, so a table keeps a handful of them,
    every trial reads once with its latest row, and plain SQL no longer sees superseded
    rows once they are merged away. A merge killed after its rename changes nothing."""
    configs = [TrialConfig(EMBEDDED_MODEL, "rte", seed=s, train_size=100 + n)
               for n in range(30) for s in (0, 1)]
    for n in range(30):
        write(tmp_path, configs[2 * n])
        write(tmp_path, configs[2 * n + 1])
        if n % 3 == 2:  # a rerun of a trial compacted sweeps ago: its new row must win
            write(tmp_path, configs[n], status="error", epochs=1)
        store.compact(tmp_path)
        compacted = list((tmp_path / "trials").glob(f"{store.COMPACTED_PREFIX}*"))
        assert len(compacted) <= store.MERGE_COMPACTED_AFTER + 1, n
    df = store.load_trials(tmp_path).set_index("trial_id")
    assert len(df) == 60
    rerun = {configs[n].trial_id for n in range(2, 30, 3)}
    assert set(df.index[df["status"] == "error"]) == rerun
    assert len(store.load_epochs(tmp_path)) == 2 * 60 - len(rerun)
    before = _everything(tmp_path)

    class Killed(BaseException):
        pass

    for n in range(store.MERGE_COMPACTED_AFTER + 1):  # enough new files to merge again
        write(tmp_path, TrialConfig(EMBEDDED_MODEL, "cola", seed=n))
        store.compact(tmp_path, min_files=1)
    before = _everything(tmp_path)
    [(plain,)] = duckdb.sql(f"SELECT count(*) FROM '{tmp_path}/trials/*.parquet'").fetchall()
    write(tmp_path, TrialConfig(EMBEDDED_MODEL, "cola", seed=99))
    real_unlink = os.unlink

    def killed(path):
        if store.COMPACTED_PREFIX in str(path):  # the merge's sources, after its rename
            raise Killed
        real_unlink(path)

    monkeypatch.setattr(store.os, "unlink", killed)
    with pytest.raises(Killed):
        store.compact(tmp_path, min_files=1)
    monkeypatch.setattr(store.os, "unlink", real_unlink)
    after = _everything(tmp_path)
    assert len(after[0]) == len(before[0]) + 1 and after[2] >= before[2]
    store.compact(tmp_path)  # the next compaction folds the leftovers away
    _same(after, _everything(tmp_path))
    [(n_rows,)] = duckdb.sql(f"SELECT count(*) FROM '{tmp_path}/trials/*.parquet'").fetchall()
    assert n_rows <= plain + 1 + len(rerun)


def test_a_trial_rewritten_during_compaction_keeps_its_new_attempt(tmp_path, monkeypatch):
    configs = _store(tmp_path, 4)
    real = store._write_compacted

    def rewrite_then_write(table, path):
        if path.parent.name == "trials":
            write(tmp_path, configs[0], status="error", epochs=1)  # a sweep writing meanwhile
        real(table, path)

    monkeypatch.setattr(store, "_write_compacted", rewrite_then_write)
    store.compact(tmp_path)
    assert (tmp_path / "trials" / f"{configs[0].trial_id}.parquet").is_file()
    df = store.load_trials(tmp_path).set_index("trial_id")
    assert len(df) == 4 and df.loc[configs[0].trial_id, "status"] == "error"


def test_an_old_store_with_new_rows_compacts_into_the_current_schema(tmp_path):
    import shutil

    shutil.copytree(OLD_STORE, tmp_path, dirs_exist_ok=True)
    new = TrialConfig(EMBEDDED_MODEL, "sst2", seed=9)
    write(tmp_path, new)
    before = _everything(tmp_path)
    assert len(before[0]) == 5 and new.trial_id in before[2]
    store.compact(tmp_path)
    _same(before, _everything(tmp_path))
    [compacted] = (tmp_path / "trials").iterdir()
    assert pq.read_schema(compacted).names == store.TRIAL_SCHEMA.names


def test_a_store_is_compacted_past_a_number_of_small_files(tmp_path):
    _store(tmp_path, 4)  # 8 per-trial files
    assert store.compact_if_many(tmp_path, threshold=8) is None
    assert store.small_file_count(tmp_path) == 8
    assert store.compact_if_many(tmp_path, threshold=7) == {
        "trials": 4, "epochs": 4, "similarity": 0, "steps": 0, "pairs": 0}
    assert store.small_file_count(tmp_path) == 0 and len(store.load_trials(tmp_path)) == 4


def test_the_store_command_checks_and_compacts(tmp_path, capsys):
    from tests.helpers import cli

    configs = _store(tmp_path, 4)
    code, out = cli(capsys, "store", "check", "--results", str(tmp_path))
    assert code == 0 and "trials: 4 per-trial files, 0 compacted" in out
    assert "store is clean" in out
    code, out = cli(capsys, "store", "compact", "--results", str(tmp_path))
    assert code == 0 and "merged 4 trials, 4 epochs per-trial files" in out
    assert store.small_file_count(tmp_path) == 0
    (tmp_path / "epochs" / f"{configs[0].trial_id}.parquet").write_bytes(b"disk fault")
    write(tmp_path, configs[1], status="error", epochs=0)
    code, out = cli(capsys, "store", "check", "--results", str(tmp_path))
    assert code == 1 and f"unreadable file (delete or restore it): {tmp_path}" in out
    assert "trials: 1 per-trial files, 1 compacted" in out
    code, out = cli(capsys, "store", "check", "--results", str(tmp_path / "missing"))
    assert code == 2


def test_a_reader_whose_listing_raced_a_compaction_lists_again(tmp_path, monkeypatch):
    _store(tmp_path, 4)
    before = _everything(tmp_path)
    stale = {name: store._listing(tmp_path / name) for name in ("trials", "epochs")}
    store.compact(tmp_path)  # deletes every file of the stale listings
    real, calls = store._listing, []

    def first_stale(folder):
        calls.append(folder.name)
        if calls.count(folder.name) == 1 and folder.name in stale:
            return stale[folder.name]  # listed just before the compaction renamed its file
        return real(folder)

    monkeypatch.setattr(store, "_listing", first_stale)
    _same(before, _everything(tmp_path))
    assert calls.count("trials") >= 2


def test_a_file_with_a_sound_footer_and_damaged_pages_is_found_and_skipped(tmp_path, caplog):
    configs = _store(tmp_path, 4)
    path = tmp_path / "trials" / f"{configs[0].trial_id}.parquet"
    data = bytearray(path.read_bytes())
    data[4:2000] = b"\xff" * 1996  # the column chunks, not the footer at the end
    path.write_bytes(bytes(data))
    df = store.load_trials(tmp_path)
    assert sorted(df["trial_id"]) == sorted(c.trial_id for c in configs[1:])
    assert path.name in caplog.text
    assert [p.name for p in store.check_store(tmp_path).unreadable] == [path.name]


@pytest.mark.ray
def test_a_sweep_compacts_a_large_store_and_resumes_and_reuses_from_it(
        ray_local, tiny_bert, glue_dir, tmp_path, monkeypatch):
    from reinit_tune import families
    from reinit_tune.families import Grid
    from reinit_tune.sweep.options import RunOptions
    from reinit_tune.sweep.runner import run_sweep

    monkeypatch.setattr(store, "COMPACT_AFTER_FILES", 1)  # a trial writes 2 per-trial files

    def grid(family: str) -> list:
        return families.get(family).configs(Grid(
            tiny_bert, tasks=("rte",), sizes=(8,), seeds=1, epochs=1, data_dir=str(glue_dir),
            lr=1e-4), k=[4])

    options = RunOptions(results_dir=tmp_path, data_dir=str(glue_dir), max_failures=0)
    assert run_sweep(grid("progressive"), options).ok == 1
    assert store.small_file_count(tmp_path) == 0
    assert [p.name.split("-")[0] for p in (tmp_path / "trials").iterdir()] == ["compacted"]
    again = run_sweep(grid("progressive"), options)
    assert (again.ok, again.skipped) == (0, 1)
    copied = run_sweep(grid("small_data"), options)
    assert (copied.ok, copied.reused) == (0, 1)
    trials = store.load_trials(tmp_path)
    assert len(trials) == 2 and trials["reused_from"].notna().sum() == 1
    assert len(store.load_epochs(tmp_path)) == 2
