"""Reading the store: empty stores, stores written by earlier versions, only the columns asked
for, foreign, damaged and malformed files and rows skipped and named, listings that raced
a compaction."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store
from reinit_tune.store import files, reader
from tests.helpers import REPO

OLD_STORE = REPO / "tests" / "fixtures" / "store-0.1"  # written by reinit-tune 0.1 (see its rows)


def test_empty_store_reads_as_empty_table(tmp_path):
    df = store.load_trials(tmp_path)
    assert df.empty and "score" in df.columns
    assert store.finished_ids(tmp_path) == set()


def test_a_store_written_by_version_0_1_loads_and_its_trials_count_as_done():
    trials = store.load_trials(OLD_STORE)
    assert len(trials) == 4 and set(trials["status"]) == {"ok"}
    assert set(trials["experiment"]) == {"progressive", "probing"}
    assert all('"reinit_tune": "0.1.0"' in v for v in trials["versions"])
    assert store.finished_ids(OLD_STORE) == set(trials["trial_id"])
    assert len(store.load_epochs(OLD_STORE)) == 4


def test_rows_of_the_float_train_size_era_are_split_on_reading(tmp_path, write):
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


@pytest.mark.parametrize("old_first", [True, False])  # the old file sorted before or after
def test_an_old_fraction_beside_new_rows_is_never_read_as_a_count(tmp_path, old_first, write):
    """A store mixing float-era files with current ones, read for ``train_size`` alone: the
    old 0.5 must not come out as the count 0 because a current file's int column came
    first."""
    import pyarrow as pa

    share = TrialConfig(EMBEDDED_MODEL, "sst2", train_size=0.5, seed=1)
    current = next(c for seed in range(100)
                   if ((c := TrialConfig(EMBEDDED_MODEL, "sst2", train_size=500, seed=seed))
                       .trial_id > share.trial_id) == old_first)
    write(tmp_path, current)
    path = write(tmp_path, share)
    table = pq.read_table(path).drop_columns(["train_size", "train_fraction"])
    pq.write_table(table.append_column("train_size", pa.array([0.5])), path)
    for columns in (["trial_id", "train_size"], ["trial_id", "train_fraction"], None):
        df = store.load_trials(tmp_path, columns=columns).set_index("trial_id")
        if "train_size" in df:
            assert pd.isna(df.loc[share.trial_id, "train_size"]), columns
            assert sorted(df["train_size"].dropna()) == [500], columns
        if "train_fraction" in df:
            assert df.loc[share.trial_id, "train_fraction"] == 0.5, columns


def test_only_the_columns_asked_for_are_read(tmp_path, fill):
    fill(tmp_path, 4)
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


def test_foreign_and_damaged_files_are_skipped_and_named(tmp_path, caplog, fill):
    import pyarrow as pa

    configs = fill(tmp_path, 4)
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


def test_malformed_rows_are_reported_and_skipped(tmp_path, caplog, write):
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


def test_a_file_with_a_sound_footer_and_damaged_pages_is_found_and_skipped(
        tmp_path, caplog, fill):
    configs = fill(tmp_path, 4)
    path = tmp_path / "trials" / f"{configs[0].trial_id}.parquet"
    data = bytearray(path.read_bytes())
    data[4:2000] = b"\xff" * 1996  # the column chunks, not the footer at the end
    path.write_bytes(bytes(data))
    df = store.load_trials(tmp_path)
    assert sorted(df["trial_id"]) == sorted(c.trial_id for c in configs[1:])
    assert path.name in caplog.text
    assert [p.name for p in store.check_store(tmp_path).unreadable] == [path.name]


def test_a_damaged_column_never_hides_the_other_columns_of_its_rows(tmp_path, caplog, fill):
    """Bytes broken inside a compacted file's config_json column only: every trial still
    reads, that column as null, and every reader names the file."""
    configs = fill(tmp_path, 6)
    store.compact(tmp_path)
    [path] = (tmp_path / "trials").glob(f"{store.COMPACTED_PREFIX}*.parquet")
    meta = pq.ParquetFile(path).metadata
    chunk = meta.row_group(0).column(meta.schema.names.index("config_json"))
    data = bytearray(path.read_bytes())
    # past the first page's header, inside its compressed values (the dictionary, if any)
    start = (chunk.dictionary_page_offset or chunk.data_page_offset) + 40
    end = min(start + 256, chunk.data_page_offset + chunk.total_compressed_size - 8)
    data[start:end] = b"\xab" * (end - start)
    path.write_bytes(bytes(data))
    df = store.load_trials(tmp_path)
    assert sorted(df["trial_id"]) == sorted(c.trial_id for c in configs)  # none lost
    assert df["config_json"].isna().all() and df["score"].notna().all()
    assert f"results file {path} is damaged: read without its columns config_json" \
        in caplog.text
    assert len(store.load_trials(tmp_path, columns=store.trial_columns())) == 6
    assert path in store.check_store(tmp_path).damaged  # its checksums fail


def test_a_reader_whose_listing_raced_a_compaction_lists_again(
        tmp_path, monkeypatch, fill, everything, same):
    fill(tmp_path, 4)
    before = everything(tmp_path)
    stale = {name: files.listing(tmp_path / name) for name in ("trials", "epochs")}
    store.compact(tmp_path)  # deletes every file of the stale listings
    real, calls = files.listing, []

    def first_stale(folder):
        calls.append(folder.name)
        if calls.count(folder.name) == 1 and folder.name in stale:
            return stale[folder.name]  # listed just before the compaction renamed its file
        return real(folder)

    monkeypatch.setattr(reader, "listing", first_stale)
    same(before, everything(tmp_path))
    assert calls.count("trials") >= 2
