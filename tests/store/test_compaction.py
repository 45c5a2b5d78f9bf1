"""Compaction: per-trial files merged into few files without losing or duplicating a row,
whatever step a kill interrupts, and compaction at the end of a sweep."""

from __future__ import annotations

import os

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store
from reinit_tune.store import compaction
from tests.helpers import REPO

OLD_STORE = REPO / "tests" / "fixtures" / "store-0.1"  # written by reinit-tune 0.1 (see its rows)


def test_compaction_merges_files_and_every_reader_sees_the_same_rows(
        tmp_path, write, fill, everything, same):
    configs = fill(tmp_path, 8)
    store.write_similarity(tmp_path, configs[0].trial_id, [{"layer": 0, "cka": 0.5}])
    before = everything(tmp_path)
    merged = store.compact(tmp_path)
    assert merged == {"trials": 8, "epochs": 8, "similarity": 0, "steps": 0, "pairs": 0}
    names = [p.name for p in (tmp_path / "trials").iterdir()]
    assert len(names) == 1 and names[0].startswith(store.COMPACTED_PREFIX)
    same(before, everything(tmp_path))
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


def test_a_compaction_killed_at_any_step_loses_nothing(
        tmp_path, monkeypatch, fill, everything, same):
    class Killed(BaseException):
        pass

    fill(tmp_path, 6)
    before = everything(tmp_path)
    seen_during = []
    real_replace, real_unlink = os.replace, os.unlink

    def kill_on_rename(src, dst):
        raise Killed

    monkeypatch.setattr(os, "replace", kill_on_rename)  # before the rename
    try:
        store.compact(tmp_path)
    except Killed:
        pass
    monkeypatch.setattr(os, "replace", real_replace)
    same(before, everything(tmp_path))
    deleted = []

    def kill_after(n):
        def unlink(path):
            seen_during.append(everything(tmp_path))  # a reader between the steps
            if len(deleted) == n:
                raise Killed
            deleted.append(path)
            real_unlink(path)
        return unlink

    for n in (0, 3):  # after the rename, before any deletion; halfway through the deletions
        monkeypatch.setattr(os, "unlink", kill_after(n))
        try:
            store.compact(tmp_path)
        except Killed:
            pass
        monkeypatch.setattr(os, "unlink", real_unlink)
        same(before, everything(tmp_path))
    for during in seen_during:
        same(before, during)
    store.compact(tmp_path)  # finishing the job later merges what is left
    same(before, everything(tmp_path))
    assert store.small_file_count(tmp_path) == 0


def test_many_compactions_keep_few_files_and_every_trial_once(
        tmp_path, monkeypatch, write, everything, same):
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
    before = everything(tmp_path)

    class Killed(BaseException):
        pass

    for n in range(store.MERGE_COMPACTED_AFTER + 1):  # enough new files to merge again
        write(tmp_path, TrialConfig(EMBEDDED_MODEL, "cola", seed=n))
        store.compact(tmp_path, min_files=1)
    before = everything(tmp_path)
    [(plain,)] = duckdb.sql(f"SELECT count(*) FROM '{tmp_path}/trials/*.parquet'").fetchall()
    write(tmp_path, TrialConfig(EMBEDDED_MODEL, "cola", seed=99))
    real_unlink = os.unlink

    def killed(path):
        if store.COMPACTED_PREFIX in str(path):  # the merge's sources, after its rename
            raise Killed
        real_unlink(path)

    monkeypatch.setattr(os, "unlink", killed)
    with pytest.raises(Killed):
        store.compact(tmp_path, min_files=1)
    monkeypatch.setattr(os, "unlink", real_unlink)
    after = everything(tmp_path)
    assert len(after[0]) == len(before[0]) + 1 and after[2] >= before[2]
    store.compact(tmp_path)  # the next compaction folds the leftovers away
    same(after, everything(tmp_path))
    [(n_rows,)] = duckdb.sql(f"SELECT count(*) FROM '{tmp_path}/trials/*.parquet'").fetchall()
    assert n_rows <= plain + 1 + len(rerun)


def test_a_trial_rewritten_during_compaction_keeps_its_new_attempt(
        tmp_path, monkeypatch, write, fill):
    configs = fill(tmp_path, 4)
    real = compaction._write_compacted

    def rewrite_then_write(table, path):
        if path.parent.name == "trials":
            write(tmp_path, configs[0], status="error", epochs=1)  # a sweep writing meanwhile
        real(table, path)

    monkeypatch.setattr(compaction, "_write_compacted", rewrite_then_write)
    store.compact(tmp_path)
    assert (tmp_path / "trials" / f"{configs[0].trial_id}.parquet").is_file()
    df = store.load_trials(tmp_path).set_index("trial_id")
    assert len(df) == 4 and df.loc[configs[0].trial_id, "status"] == "error"


def test_an_old_store_with_new_rows_compacts_into_the_current_schema(
        tmp_path, write, everything, same):
    import shutil

    shutil.copytree(OLD_STORE, tmp_path, dirs_exist_ok=True)
    new = TrialConfig(EMBEDDED_MODEL, "sst2", seed=9)
    write(tmp_path, new)
    before = everything(tmp_path)
    assert len(before[0]) == 5 and new.trial_id in before[2]
    store.compact(tmp_path)
    same(before, everything(tmp_path))
    [compacted] = (tmp_path / "trials").iterdir()
    assert pq.read_schema(compacted).names == store.TRIAL_SCHEMA.names


def test_a_store_is_compacted_past_a_number_of_small_files(tmp_path, fill):
    fill(tmp_path, 4)  # 8 per-trial files
    assert store.compact_if_many(tmp_path, threshold=8) is None
    assert store.small_file_count(tmp_path) == 8
    assert store.compact_if_many(tmp_path, threshold=7) == {
        "trials": 4, "epochs": 4, "similarity": 0, "steps": 0, "pairs": 0}
    assert store.small_file_count(tmp_path) == 0 and len(store.load_trials(tmp_path)) == 4


@pytest.mark.ray
def test_a_sweep_compacts_a_large_store_and_resumes_and_reuses_from_it(
        ray_local, tiny_bert, glue_dir, tmp_path, monkeypatch):
    from reinit_tune import families
    from reinit_tune.families import Grid
    from reinit_tune.sweep.options import RunOptions
    from reinit_tune.sweep.runner import run_sweep

    monkeypatch.setattr(compaction, "COMPACT_AFTER_FILES", 1)  # a trial writes 2 per-trial files

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


def test_an_interrupted_compaction_is_finished_by_the_next_command_that_writes(
        tmp_path, monkeypatch, capsys, glue_dir, write):
    """Killed after its compacted file went into place: the sources stay beside it (plain
    SQL counts each trial twice) until the next command that writes the store (a sweep with
    nothing left to train, ``store compact``) deletes them, and its temporaries."""
    from tests.helpers import cli, save_tiny_model

    class Killed(BaseException):
        pass

    model = save_tiny_model(tmp_path / "tiny", "bert", layers=4)
    results = tmp_path / "results"
    argv = ["sweep", "progressive", "--model", str(model), "--tasks", "rte", "--sizes", "100",
            "--seeds", "3", "--epochs", "2", "--k", "4", "--precision", "fp32",
            "--results", str(results)]
    from reinit_tune.cli.sweep import configs_of, sweep_parser
    from reinit_tune.families import get

    family = get("progressive")
    for config in configs_of(sweep_parser(family).parse_args(argv[2:]), family):
        write(results, config)
    real_unlink = os.unlink

    def killed(path):
        raise Killed

    monkeypatch.setattr(os, "unlink", killed)
    with pytest.raises(Killed):
        store.compact(results)
    monkeypatch.setattr(os, "unlink", real_unlink)
    files = f"'{results}/trials/*.parquet'"
    [(twice,)] = duckdb.sql(f"SELECT count(*) FROM {files}").fetchall()
    assert twice == 6 and store.small_file_count(results) == 6
    stale = results / "trials" / f".{store.COMPACTED_PREFIX}0-x.parquet.abc.tmp"
    stale.write_bytes(b"half a file")

    code, out = cli(capsys, *argv)  # everything is stored: nothing trains
    assert code == 0 and "0 ran ok" in out and "3 already in the store" in out, out
    [(once,)] = duckdb.sql(f"SELECT count(*) FROM {files}").fetchall()
    per_trial = [p for p in (results / "trials").glob("*.parquet")
                 if not p.name.startswith(store.COMPACTED_PREFIX)]
    assert once == 3 and per_trial == []  # (the epochs table was never compacted)
    assert not stale.exists()
    assert not list((results / "trials").glob(".*"))  # no manifest, no temporary left
    stale.write_bytes(b"half a file")
    code, out = cli(capsys, "store", "compact", "--results", str(results))
    assert code == 0 and not stale.exists()


def test_a_stray_copy_is_read_by_no_reader_compacted_never_and_named_by_check(tmp_path,
                                                                               capsys):
    """A sync tool's "X (conflicted copy).parquet" beside X.parquet: 6 trials load as 6 in
    the loaders and the SQL views, compaction leaves the copy out (and in place), and
    ``store check`` names it and exits non-zero."""
    from reinit_tune.store import sql
    from tests.helpers import SyntheticStore, cli

    synth = SyntheticStore(tmp_path)
    ids = [synth.add("progressive", "sst2", 0.5 + 0.01 * seed, seed=seed, train_size=500,
                     reinit_layers=range(k, 6)) for seed in range(3) for k in (0, 6)]
    original = tmp_path / "trials" / f"{ids[0]}.parquet"
    copy = original.with_name(f"{ids[0]} (conflicted copy).parquet")
    copy.write_bytes(original.read_bytes())
    for compacted in (False, True):
        if compacted:
            store.compact(tmp_path, min_files=1)
            assert copy.exists() and not original.exists()
        trials = store.load_trials(tmp_path)
        assert len(trials) == 6 and sorted(trials["trial_id"]) == sorted(ids), compacted
        con = sql.connect(tmp_path)
        assert con.sql("SELECT count(*) FROM trials").fetchall() == [(6,)], compacted
        check = store.check_store(tmp_path)
        assert check.strays == [copy] and not check.clean
    code, out = cli(capsys, "store", "check", "--results", str(tmp_path))
    assert code != 0 and "stray copy, not named by the trial it holds" in out, out
    assert str(copy) in out


def test_a_compaction_on_a_host_whose_clock_is_behind_still_ranks_last(tmp_path,
                                                                       monkeypatch):
    """A trial rerun after a compaction, compacted again on a host whose clock is a minute
    behind the first: its new row wins (the stamp is one past the newest, not the clock)
    in the loaders and the SQL views."""
    import time

    from reinit_tune.store import sql
    from tests.helpers import SyntheticStore

    synth = SyntheticStore(tmp_path)
    tid = synth.add("progressive", "sst2", 0.2, status="error", train_size=500,
                    reinit_layers=range(2, 6))
    store.compact(tmp_path, min_files=1)
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() - 60 * 10**9)
    assert synth.add("progressive", "sst2", 0.8, train_size=500,
                     reinit_layers=range(2, 6)) == tid
    store.compact(tmp_path, min_files=1)
    assert len(list((tmp_path / "trials").glob("compacted-*.parquet"))) == 2
    (row,) = store.load_trials(tmp_path).itertuples()
    assert row.status == "ok" and row.score == 0.8
    con = sql.connect(tmp_path)
    assert con.sql("SELECT status, score FROM trials").fetchall() == [("ok", 0.8)]
