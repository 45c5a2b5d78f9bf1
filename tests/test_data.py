"""Data loading, seeded subsets, the tokenization cache and dynamic padding."""

from __future__ import annotations

import numpy as np
import pytest

from reinit_tune import EMBEDDED_MODEL, data
from reinit_tune.errors import InputError


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


def test_env_variable_is_the_fallback(monkeypatch, glue_dir):
    monkeypatch.setenv(data.DATA_ENV, str(glue_dir))
    assert data.resolve_data_dir(None) == glue_dir.resolve()
    assert data.resolve_data_dir("/elsewhere") != glue_dir.resolve()


def test_subsets_are_reproducible_per_seed_and_differ_across_seeds():
    a = data.subset_indices(10_000, 500, seed=3)
    assert np.array_equal(a, data.subset_indices(10_000, 500, seed=3))
    b = data.subset_indices(10_000, 500, seed=4)
    assert len(a) == len(set(a)) == 500 and not np.array_equal(a, b)
    assert len(np.intersect1d(a, b)) < 100  # two 5% samples overlap by ~25 rows


def test_subset_sizes():
    assert len(data.subset_indices(1000, 0.1, seed=0)) == 100
    assert np.array_equal(data.subset_indices(50, None, seed=0), np.arange(50))
    with pytest.raises(InputError, match="train_size: 9000 exceeds the 8551 rows"):
        data.subset_size(9000, 8551, "cola")


def test_fractions_are_shares_of_the_official_split_not_of_a_subset_file(glue_dir):
    """The shared QNLI train file is a 9,999-row subset of the official 104,743 rows (its
    Parquet 'subset' metadata): 1% is 1,047 examples, and sizes it cannot supply stop."""
    assert data.split_rows("qnli", "train", glue_dir) == 9_999
    assert data.official_rows("qnli", "train", glue_dir) == 104_743
    assert data.official_rows("sst2", "train", glue_dir) == 67_349  # complete: its own rows
    assert data.official_rows("qnli", "train", data.env.HUB) == 104_743
    one = data.train_count("qnli", 0.01, glue_dir)
    assert (one.wanted, one.available, one.short, one.used()) == (1_047, 9_999, False, 1_047)
    tenth = data.train_count("qnli", 0.1, glue_dir)
    assert tenth.short and tenth.wanted == 10_474 and tenth.used(allow_subset=True) == 9_999
    with pytest.raises(data.SubsetError, match=r"qnli: train size 0.1 .*needs 10,474 .*"
                                               r"holds 9,999 \(a subset\).*--allow-subset"):
        tenth.used()
    assert data.train_count("qnli", None, glue_dir).wanted == 104_743
    with pytest.raises(data.SubsetError):
        data.subset_size(0.1, 9_999, "qnli", official=104_743)
    assert data.subset_size(0.1, 9_999, "qnli", official=104_743, allow_subset=True) == 9_999
    assert len(data.subset_indices(9_999, 0.01, 0, official=104_743)) == 1_047
    with pytest.raises(InputError, match="exceeds the 104743 rows"):
        data.train_count("qnli", 200_000, glue_dir)


def test_a_subset_file_trains_on_what_it_holds_only_when_allowed(tmp_path, glue_dir):
    import pyarrow.parquet as pq

    (tmp_path / "rte").mkdir()
    table = pq.read_table(glue_dir / "rte" / "train.parquet").slice(0, 40)
    meta = {**table.schema.metadata, b"subset": b'{"rows": 40, "official_rows": 2490}'}
    pq.write_table(table.replace_schema_metadata(meta), tmp_path / "rte" / "train.parquet")
    pq.write_table(pq.read_table(glue_dir / "rte" / "validation.parquet"),
                   tmp_path / "rte" / "validation.parquet")
    with pytest.raises(data.SubsetError, match="needs 249 .* holds 40"):
        data.train_and_devs("rte", EMBEDDED_MODEL, 64, 0.1, 0, tmp_path)
    train, _ = data.train_and_devs("rte", EMBEDDED_MODEL, 64, 0.1, 0, tmp_path,
                                   allow_subset=True)
    assert train.num_examples == 40
    train, _ = data.train_and_devs("rte", EMBEDDED_MODEL, 64, 0.01, 0, tmp_path)
    assert train.num_examples == 25  # 1% of the official 2,490, drawn from the 40 there


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


def test_train_subset_is_the_same_across_reinitializations(glue_dir):
    """What a trial trains on depends on (task, size, seed) only: paired across k."""
    train_a, _ = data.train_and_devs("rte", EMBEDDED_MODEL, 128, 64, 7, glue_dir)
    train_b, _ = data.train_and_devs("rte", EMBEDDED_MODEL, 128, 64, 7, glue_dir)
    assert train_a.input_ids == train_b.input_ids
    train_c, _ = data.train_and_devs("rte", EMBEDDED_MODEL, 128, 64, 8, glue_dir)
    assert train_a.input_ids != train_c.input_ids


def test_tokenization_is_cached_on_disk_and_in_process(glue_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("REINIT_TUNE_CACHE", str(tmp_path))
    monkeypatch.setattr(data, "_encoded", {})
    first = data.encoded_split("wnli", "validation", EMBEDDED_MODEL, 64, glue_dir)
    files = list((tmp_path / "tokenized").glob("wnli-validation-*.arrow"))
    assert len(files) == 1
    assert data.encoded_split("wnli", "validation", EMBEDDED_MODEL, 64, glue_dir) is first
    monkeypatch.setattr(data, "_encoded", {})  # a fresh process: read back from the cache file
    again = data.encoded_split("wnli", "validation", EMBEDDED_MODEL, 64, glue_dir)
    assert again.input_ids == first.input_ids
    assert len(list((tmp_path / "tokenized").glob("wnli-validation-*.arrow"))) == 1
    assert max(len(x) for x in first.input_ids) <= 64
    assert np.array_equal(first.labels, np.asarray(
        data.load_split("wnli", "validation", glue_dir)["label"]))


def test_batches_pad_to_their_longest_member_not_to_max_length(glue_dir):
    dev = data.encoded_split("sst2", "validation", EMBEDDED_MODEL, 128, glue_dir)
    idx = [0, 1, 2, 3]
    batch = dev.collate(idx)
    longest = max(len(dev.input_ids[i]) for i in idx)
    assert batch["input_ids"].shape == (4, longest) < (4, 128)
    assert batch["attention_mask"].sum().item() == sum(len(dev.input_ids[i]) for i in idx)
    assert (batch["input_ids"][batch["attention_mask"] == 0] == dev.pad_id).all()


def test_sentence_pairs_use_segment_ids(glue_dir):
    dev = data.encoded_split("rte", "validation", EMBEDDED_MODEL, 128, glue_dir)
    assert set(dev.token_type_ids[0]) == {0, 1}
    assert dev.labels.dtype == np.int64
    stsb = data.encoded_split("stsb", "validation", EMBEDDED_MODEL, 128, glue_dir)
    assert stsb.labels.dtype == np.float32


def test_a_truncated_tokenization_cache_entry_is_rebuilt(glue_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("REINIT_TUNE_CACHE", str(tmp_path))
    monkeypatch.setattr(data, "_encoded", {})
    first = data.encoded_split("rte", "validation", EMBEDDED_MODEL, 64, glue_dir)
    (entry,) = (tmp_path / "tokenized").glob("rte-validation-*.arrow")
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 3])
    monkeypatch.setattr(data, "_encoded", {})  # the next trial on this machine
    again = data.encoded_split("rte", "validation", EMBEDDED_MODEL, 64, glue_dir)
    assert again.input_ids == first.input_ids and np.array_equal(again.labels, first.labels)
    assert entry.stat().st_size > 0


def test_a_tokenizer_without_segment_ids_feeds_the_data_path(glue_dir, tmp_path, monkeypatch):
    """RoBERTa-style tokenizers return no token_type_ids: batches then carry none."""
    from transformers import AutoTokenizer

    from reinit_tune.model.shape import resolve_model

    def load_tokenizer(model):
        tokenizer = AutoTokenizer.from_pretrained(resolve_model(model))
        tokenizer.model_input_names = ["input_ids", "attention_mask"]
        return tokenizer

    monkeypatch.setattr(data, "load_tokenizer", load_tokenizer)
    monkeypatch.setenv("REINIT_TUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data, "_encoded", {})
    split = data.encoded_split("rte", "validation", EMBEDDED_MODEL, 64, glue_dir)
    assert split.token_type_ids is None
    batch = split.collate([0, 1])
    assert "token_type_ids" not in batch and batch["input_ids"].shape[0] == 2


@pytest.mark.parametrize("task,values,message", [
    ("rte", [0, 1, 0.95], "1 are not class indices 0..1 (e.g. 0.95)"),
    ("rte", [0, 1, 2], "are not class indices"),
    ("rte", [0, float("nan")], "are not class indices"),
    ("rte", ["entailment"], "are not numbers"),
    ("stsb", [1.0, float("nan"), float("inf")], "2 are not finite"),
])
def test_labels_that_would_be_cast_wrongly_are_refused(task, values, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        data.checked_labels(values, task, "train")


def test_good_labels_keep_their_values():
    assert data.checked_labels([0, 1.0, 1], "rte", "train").tolist() == [0, 1, 1]
    assert data.checked_labels([0, 1.0, 1], "rte", "train").dtype == np.int64
    assert data.checked_labels([0.5, 4.8], "stsb", "train").dtype == np.float32
