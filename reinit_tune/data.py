"""GLUE data: splits from local Parquet or the hub, seeded train subsets, tokenization, batches.

Local data lives in ``<dir>/<task>/{train,validation}.parquet`` (Hugging Face ``glue`` schema)
with ``<dir>`` from ``--data-dir`` or ``REINIT_TUNE_DATA``; without one, splits come from
``datasets.load_dataset("nyu-mll/glue", task)``. Each (split, tokenizer, max length) is
tokenized once per machine into a ``datasets`` cache file and reused by every trial; batches
are padded to their longest member, not to ``max_seq_length``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

from reinit_tune import env
from reinit_tune.env import DATA_ENV
from reinit_tune.errors import DataNotFoundError, InputError
from reinit_tune.model.shape import resolve_model
from reinit_tune.seeding import derive_seed
from reinit_tune.tasks import get_task

HUB_DATASET = "nyu-mll/glue"
SPLITS = ("train", "validation")
resolve_data_dir = env.data_dir


def _missing(task: str, split: str, where: str) -> DataNotFoundError:
    return DataNotFoundError(
        f"GLUE {task}/{split} not found ({where}). Provide it either way: "
        f"(1) a local folder laid out as <dir>/{task}/{split}.parquet passed with --data-dir "
        f"or the {DATA_ENV} environment variable (e.g. {DATA_ENV}=../shared/data/glue), or "
        f"(2) internet access to the Hugging Face hub dataset {HUB_DATASET!r}."
    )


def local_split_path(task: str, split: str, data_dir=None) -> Path | None:
    root = resolve_data_dir(data_dir)
    return None if root is None else root / task / f"{split}.parquet"


def load_split(task: str, split: str, data_dir: str | os.PathLike | None = None):
    """The raw ``datasets.Dataset`` of one GLUE split."""
    import datasets

    get_task(task)
    if split not in SPLITS:
        raise InputError(f"split: {split!r}; allowed: {list(SPLITS)}")
    path = local_split_path(task, split, data_dir)
    if path is not None:
        if not path.is_file():
            raise _missing(task, split, f"no file {path}")
        return datasets.Dataset.from_parquet(str(path))
    try:
        return datasets.load_dataset(HUB_DATASET, task, split=split)
    except Exception as e:  # offline or hub error: say how to provide the data instead
        raise _missing(task, split, f"hub load failed: {type(e).__name__}") from e


def split_rows(task: str, split: str, data_dir: str | os.PathLike | None = None) -> int:
    """Row count of a split without loading it (Parquet footer, or the official GLUE size)."""
    spec = get_task(task)
    path = local_split_path(task, split, data_dir)
    if path is None:
        return spec.train_rows if split == "train" else spec.dev_rows
    if not path.is_file():
        raise _missing(task, split, f"no file {path}")
    return pq.ParquetFile(path).metadata.num_rows


def subset_size(train_size: int | float | None, n_rows: int, task: str = "task") -> int:
    if train_size is None:
        return n_rows
    if isinstance(train_size, float):
        return max(1, round(train_size * n_rows))
    if train_size > n_rows:
        raise InputError(
            f"train_size: {train_size} exceeds the {n_rows} rows of the {task} train split; "
            f"allowed: 1..{n_rows}, a fraction in (0, 1), or None for all"
        )
    return train_size


def subset_indices(n_rows: int, train_size: int | float | None, seed: int) -> np.ndarray:
    """Sorted row indices of the training subset of trial ``seed`` (003 App. B).

    The draw depends on ``seed`` only: trial n of every reinitialization sees the same
    examples (paired comparison across k), and different seeds see different subsets.
    """
    size = subset_size(train_size, n_rows)
    if size == n_rows:
        return np.arange(n_rows)
    rng = np.random.default_rng(derive_seed(seed, "train-subset"))
    return np.sort(rng.choice(n_rows, size=size, replace=False))


@lru_cache(maxsize=4)
def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model(model))


def tokenizer_identity(tokenizer) -> str:
    """Hash of the tokenizer's vocabulary and rules, without the truncation/padding state that
    the fast tokenizer records in its JSON after each call (which would change the hash)."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    spec.pop("truncation", None)
    spec.pop("padding", None)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


@dataclass
class Encoded:
    """Tokenized examples held in memory, batched with padding to the longest member."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    labels: np.ndarray
    pad_id: int

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, i: int) -> int:
        return i  # the DataLoader hands indices to ``collate``, which pads the whole batch

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.input_ids), dtype=np.int64, count=len(self))

    def select(self, indices) -> Encoded:
        idx = [int(i) for i in indices]
        return Encoded(
            [self.input_ids[i] for i in idx],
            [self.token_type_ids[i] for i in idx],
            self.labels[idx],
            self.pad_id,
        )

    def collate(self, indices: list[int]) -> dict[str, torch.Tensor]:
        # Hand-written rather than DataCollatorWithPadding: that goes through tokenizer.pad
        # per batch, several times slower than this for the short GLUE batches we train on.
        longest = max(len(self.input_ids[i]) for i in indices)
        ids = torch.full((len(indices), longest), self.pad_id, dtype=torch.long)
        types = torch.zeros((len(indices), longest), dtype=torch.long)
        mask = torch.zeros((len(indices), longest), dtype=torch.long)
        for row, i in enumerate(indices):
            n = len(self.input_ids[i])
            ids[row, :n] = torch.tensor(self.input_ids[i])
            types[row, :n] = torch.tensor(self.token_type_ids[i])
            mask[row, :n] = 1
        return {
            "input_ids": ids,
            "token_type_ids": types,
            "attention_mask": mask,
            "labels": torch.from_numpy(self.labels[indices]),
        }


_encoded: dict[tuple, Encoded] = {}


def encoded_split(
    task: str, split: str, model: str, max_seq_length: int, data_dir=None
) -> Encoded:
    """A whole split, tokenized for ``model`` (cached in this process and on disk)."""
    root = resolve_data_dir(data_dir)
    key = (task, split, model, max_seq_length, str(root))
    if key in _encoded:
        return _encoded[key]
    spec = get_task(task)
    raw = load_split(task, split, root)
    tokenizer = load_tokenizer(model)
    fingerprint = hashlib.sha256(
        repr((raw._fingerprint, tokenizer_identity(tokenizer), max_seq_length, spec.text_fields))
        .encode()
    ).hexdigest()[:20]
    cache = env.cache_dir() / "tokenized"
    cache.mkdir(parents=True, exist_ok=True)

    def encode(batch):
        columns = [batch[f] for f in spec.text_fields]
        out = tokenizer(*columns, truncation=True, max_length=max_seq_length)
        return {"input_ids": out["input_ids"], "token_type_ids": out["token_type_ids"]}

    tokenized = raw.map(
        encode,
        batched=True,
        batch_size=2000,
        remove_columns=[c for c in raw.column_names if c != "label"],
        cache_file_name=str(cache / f"{task}-{split}-{fingerprint}.arrow"),
        new_fingerprint=fingerprint,
        desc=f"tokenizing {task}/{split}",
    )
    columns = tokenized.to_dict()
    labels = np.asarray(columns["label"], dtype=np.float32 if spec.is_regression else np.int64)
    encoded = Encoded(
        columns["input_ids"], columns["token_type_ids"], labels, tokenizer.pad_token_id
    )
    if len(_encoded) >= 8:  # bounded: a worker rarely sees more than a few tasks
        _encoded.pop(next(iter(_encoded)))
    _encoded[key] = encoded
    return encoded


def train_and_dev(
    task: str,
    model: str,
    max_seq_length: int,
    train_size: int | float | None,
    seed: int,
    data_dir=None,
) -> tuple[Encoded, Encoded]:
    """The seeded training subset and the full dev split of ``task``, tokenized."""
    train = encoded_split(task, "train", model, max_seq_length, data_dir)
    subset_size(train_size, len(train), task)  # clear error before anything else
    train = train.select(subset_indices(len(train), train_size, seed))
    return train, encoded_split(task, "validation", model, max_seq_length, data_dir)
