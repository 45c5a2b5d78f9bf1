"""Train sizes against the split as found, and the seeded train subsets."""

from __future__ import annotations

import numpy as np
import pytest

from reinit_tune import EMBEDDED_MODEL, data
from reinit_tune.errors import InputError


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


def test_train_subset_is_the_same_across_reinitializations(glue_dir):
    """What a trial trains on depends on (task, size, seed) only: paired across k."""
    train_a, _ = data.train_and_devs("rte", EMBEDDED_MODEL, 128, 64, 7, glue_dir)
    train_b, _ = data.train_and_devs("rte", EMBEDDED_MODEL, 128, 64, 7, glue_dir)
    assert train_a.input_ids == train_b.input_ids
    train_c, _ = data.train_and_devs("rte", EMBEDDED_MODEL, 128, 64, 8, glue_dir)
    assert train_a.input_ids != train_c.input_ids
