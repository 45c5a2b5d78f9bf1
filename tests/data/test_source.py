"""Where splits come from: local Parquet or the hub, row counts, the data fingerprint."""

from __future__ import annotations

import pytest

from reinit_tune import data


def test_local_splits_load_in_glue_schema(glue_dir):
    ds = data.load_split("mrpc", "validation", glue_dir)
    assert len(ds) == 408 and {"sentence1", "sentence2", "label"} <= set(ds.column_names)
    assert data.split_rows("sst2", "train", glue_dir) == 67_349


def test_missing_data_error_names_both_ways(tmp_path, monkeypatch):
    monkeypatch.delenv(data.DATA_ENV, raising=False)
    with pytest.raises(data.DataNotFoundError) as err:
        data.load_split("rte", "train", tmp_path)
    message = str(err.value)
    assert "--data-dir" in message and data.DATA_ENV in message and "nyu-mll/glue" in message
    assert f"(no file {tmp_path / 'rte' / 'train.parquet'})" in message
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for root, said in ((a_file, "is a file, not a folder"), (tmp_path / "none", "does not exist")):
        with pytest.raises(data.DataNotFoundError, match=f"the data folder {root} {said}"):
            data.load_split("rte", "train", root)


def test_env_variable_is_the_fallback(monkeypatch, glue_dir):
    monkeypatch.setenv(data.DATA_ENV, str(glue_dir))
    assert data.resolve_data_dir(None) == glue_dir.resolve()
    assert data.resolve_data_dir("/elsewhere") != glue_dir.resolve()


def test_data_identity_follows_the_files_contents(tmp_path, glue_dir):
    import shutil

    shutil.copytree(glue_dir / "rte", tmp_path / "rte")
    fingerprint, source = data.data_identity("rte", tmp_path)
    assert data.data_identity("rte", tmp_path) == (fingerprint, source)
    assert source == f"{tmp_path / 'rte'}: train.parquet, validation.parquet"
    same, _ = data.data_identity("rte", glue_dir)
    assert same == fingerprint  # a copy of the same bytes is the same data
    hub, hub_source = data.data_identity("rte", data.env.HUB)
    assert hub != fingerprint and hub_source == "hub: nyu-mll/glue (rte)"
    assert data.data_identity("rte", glue_dir, "cola")[0] != fingerprint  # + intermediate
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = tmp_path / "rte" / "validation.parquet"
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.schema.get_field_index("label"), "label",
                                    pc.subtract(1, table["label"])), path)
    assert data.data_identity("rte", tmp_path)[0] != fingerprint
