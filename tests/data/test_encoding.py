"""The tokenization cache, dynamic padding and label checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reinit_tune import EMBEDDED_MODEL, data
from reinit_tune.errors import InputError


def test_tokenization_is_cached_on_disk_and_in_process(glue_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("REINIT_TUNE_CACHE", str(tmp_path))
    monkeypatch.setattr(data.encoding, "_encoded", {})
    first = data.encoded_split("wnli", "validation", EMBEDDED_MODEL, 64, glue_dir)
    files = list((tmp_path / "tokenized").glob("wnli-validation-*.arrow"))
    assert len(files) == 1
    assert data.encoded_split("wnli", "validation", EMBEDDED_MODEL, 64, glue_dir) is first
    # a fresh process: read back from the cache file
    monkeypatch.setattr(data.encoding, "_encoded", {})
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
    monkeypatch.setattr(data.encoding, "_encoded", {})
    first = data.encoded_split("rte", "validation", EMBEDDED_MODEL, 64, glue_dir)
    (entry,) = (tmp_path / "tokenized").glob("rte-validation-*.arrow")
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 3])
    monkeypatch.setattr(data.encoding, "_encoded", {})  # the next trial on this machine
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

    monkeypatch.setattr(data.encoding, "load_tokenizer", load_tokenizer)
    monkeypatch.setenv("REINIT_TUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data.encoding, "_encoded", {})
    split = data.encoded_split("rte", "validation", EMBEDDED_MODEL, 64, glue_dir)
    assert split.token_type_ids is None
    batch = split.collate([0, 1])
    assert "token_type_ids" not in batch and batch["input_ids"].shape[0] == 2


@pytest.mark.parametrize("first", ["with segment ids", "without"])
def test_tokenizers_alike_but_for_segment_ids_get_their_own_cache_entries(
        first, glue_dir, tmp_path, monkeypatch):
    """BERT's and DistilBERT's tokenizers share vocabulary and rules; only DistilBERT's
    returns no token_type_ids. Each model's encoding keeps its own segment ids, whichever
    was tokenized first into the shared cache."""
    from transformers import AutoConfig, AutoTokenizer

    from reinit_tune.model.shape import resolve_model

    folders = {}
    for name in ("with segment ids", "without"):
        folder = tmp_path / name.replace(" ", "-")
        AutoTokenizer.from_pretrained(resolve_model(EMBEDDED_MODEL)).save_pretrained(folder)
        AutoConfig.from_pretrained(resolve_model(EMBEDDED_MODEL)).save_pretrained(folder)
        if name == "without":  # as DistilBERT's tokenizer_config.json says
            config = json.loads((folder / "tokenizer_config.json").read_text())
            config["model_input_names"] = ["input_ids", "attention_mask"]
            (folder / "tokenizer_config.json").write_text(json.dumps(config))
        folders[name] = str(folder)
    monkeypatch.setenv("REINIT_TUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data.encoding, "_encoded", {})
    order = [first, *(n for n in folders if n != first)]
    encoded = {n: data.encoded_split("rte", "validation", folders[n], 64, glue_dir)
               for n in order}
    assert encoded["without"].token_type_ids is None
    assert set(encoded["with segment ids"].token_type_ids[0]) == {0, 1}
    assert encoded["with segment ids"].input_ids == encoded["without"].input_ids
    assert len(list((tmp_path / "cache" / "tokenized").glob("rte-validation-*.arrow"))) == 2
    assert (data.tokenizer_identity(data.load_tokenizer(folders["without"]))
            != data.tokenizer_identity(data.load_tokenizer(folders["with segment ids"])))


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
