"""What a train size means for a train split as found (``TrainCount``), and the seeded subset.

A train size that is a fraction is a share of the official split (``official_rows``: the
``subset`` note a local file's Parquet metadata carries, else the file's own row count; the
registry's size for the hub), not of a local file that holds only part of it; a size the
local file cannot supply is an error (``SubsetError``) unless the run allows training on
what there is (``--allow-subset``). The subset a trial trains on is drawn from its seed alone
(003 App. B).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from reinit_tune.data.source import TaskSource
from reinit_tune.errors import InputError
from reinit_tune.seeding import derive_seed
from reinit_tune.train_size import Size, TrainSize


def wanted_size(train_size: Size, official: int, task: str = "task") -> int:
    """The examples ``train_size`` asks for of an official split of ``official`` rows
    (``TrainSize.wanted``)."""
    return TrainSize.of(train_size).wanted(official, task)


class SubsetError(InputError):
    """A train size asks for more examples than the local split file, a subset of the
    official split, holds."""


@dataclass(frozen=True)
class TrainCount:
    """What a train size means for one task's train split as found: the examples it asks for
    (``wanted``, of the ``official`` split) and the rows the file holds (``available``)."""

    task: str
    size: Size
    official: int
    available: int
    wanted: int
    where: str  # the file, or the hub dataset

    @classmethod
    def of(cls, task: str, size: Size | TrainSize, available: int, official: int | None,
           where: str) -> TrainCount:
        """``size`` against a split of ``available`` rows, part of an official split of
        ``official`` rows (None: the split is complete)."""
        size = TrainSize.of(size)
        official = max(official or available, available)
        return cls(task, size.value, official, available, size.wanted(official, task), where)

    @property
    def short(self) -> bool:
        """The split as found cannot supply what the size asks for (a subset file)."""
        return self.wanted > self.available

    def used(self, allow_subset: bool = False) -> int:
        """Examples a trial trains on: ``wanted``, or with ``allow_subset`` all there are."""
        if self.short and not allow_subset:
            raise SubsetError(self.problem())
        return min(self.wanted, self.available)

    def problem(self) -> str:
        return (f"{self.task}: train size {TrainSize(self.size).shown} needs {self.wanted:,} "
                f"examples of the official {self.official:,}-row train split, but {self.where} "
                f"holds {self.available:,} (a subset); point --data-dir at the complete split, "
                f"or pass --allow-subset to train on the {self.available:,} there (its rows "
                "are marked data_subset)")

    def indices(self, seed: int, allow_subset: bool = False) -> np.ndarray:
        """Sorted row indices of the training subset of trial ``seed`` (003 App. B).

        The draw depends on ``seed`` only: trial n of every reinitialization sees the same
        examples (paired comparison across k), and different seeds see different subsets.
        """
        size = self.used(allow_subset)
        if size == self.available:
            return np.arange(self.available)
        rng = np.random.default_rng(derive_seed(seed, "train-subset"))
        return np.sort(rng.choice(self.available, size=size, replace=False))


def source_count(source: TaskSource, train_size: Size | TrainSize,
                 available: int | None = None) -> TrainCount:
    """``TrainCount`` of ``train_size`` for ``source``'s train split (``available``: the rows
    already loaded, else the file's footer)."""
    rows = source.rows("train") if available is None else available
    return TrainCount.of(source.task, train_size, rows, source.official_rows("train"),
                         source.where("train"))


def train_count(task: str, train_size: Size, data_dir: str | os.PathLike | None = None, *,
                available: int | None = None) -> TrainCount:
    """``TrainCount`` of ``train_size`` for ``task``'s train split in ``data_dir``
    (``available``: the rows already loaded, else the file's footer)."""
    return source_count(TaskSource.find(task, data_dir), train_size, available)


def subset_size(train_size: Size, n_rows: int, task: str = "task",
                official: int | None = None, allow_subset: bool = False) -> int:
    """Examples drawn from a split of ``n_rows`` rows, part of an official split of
    ``official`` rows (None: the split is complete): ``wanted_size`` of the official split,
    capped at ``n_rows`` only with ``allow_subset`` (else ``SubsetError``)."""
    count = TrainCount.of(task, train_size, n_rows, official, f"the {task} train split")
    return count.used(allow_subset)


def subset_indices(n_rows: int, train_size: Size, seed: int, official: int | None = None,
                   allow_subset: bool = False) -> np.ndarray:
    """Sorted row indices of the training subset of trial ``seed`` (``TrainCount.indices``)."""
    count = TrainCount.of("task", train_size, n_rows, official, "the task train split")
    return count.indices(seed, allow_subset)
