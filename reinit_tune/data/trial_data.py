"""``TrialData``: the data of one trial, found once and handed on as one value.

A trial's task (and its intermediate task's) is looked up once, with where its splits are
(local files or the hub, ``TaskSource``) and what its train size means there
(``TrainCount``); loading the seeded subset and the dev splits, telling whether a subset file
held fewer examples than the size asks, and fingerprinting the data all read that value
instead of finding the task again by name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reinit_tune.data.encoding import Encoded, encode
from reinit_tune.data.source import TaskSource, identity
from reinit_tune.data.subset import TrainCount, source_count
from reinit_tune.train_size import Size, TrainSize

if TYPE_CHECKING:
    from reinit_tune.config import TrialConfig


@dataclass(frozen=True)
class TrialData:
    """Where a trial's data is and what its size means there. ``source`` is the task's
    splits, ``intermediate`` those of its intermediate task (None without one); ``size`` and
    ``seed`` pick the train subset; ``allow_subset`` trains on all of a subset file where it
    cannot supply the size (else ``SubsetError``)."""

    source: TaskSource
    size: TrainSize
    seed: int = 0
    intermediate: TaskSource | None = None
    allow_subset: bool = False

    @classmethod
    def find(cls, task: str, train_size: Size | TrainSize, seed: int = 0,
             data_dir: str | os.PathLike | None = None, *,
             intermediate_task: str | None = None, allow_subset: bool = False) -> TrialData:
        """The data of a trial of ``task`` in ``data_dir`` (else ``$REINIT_TUNE_DATA``, else
        the hub)."""
        return cls(TaskSource.find(task, data_dir), TrainSize.of(train_size), seed,
                   None if intermediate_task is None
                   else TaskSource.find(intermediate_task, data_dir), allow_subset)

    @classmethod
    def of(cls, config: TrialConfig, data_dir: str | os.PathLike | None = None,
           allow_subset: bool = False) -> TrialData:
        """The data of the trial ``config`` describes."""
        return cls.find(config.task, config.size, config.seed, data_dir,
                        intermediate_task=config.intermediate_task, allow_subset=allow_subset)

    def count(self, available: int | None = None) -> TrainCount:
        """``TrainCount`` of the size for the train split (``available``: the examples
        loaded, else the file's footer)."""
        return source_count(self.source, self.size, available)

    def load(self, model: str, max_seq_length: int) -> tuple[Encoded, dict[str, Encoded]]:
        """The seeded training subset and every dev split (by name, the primary first),
        tokenized for ``model``. For QA the subset is drawn over questions. A fractional size
        is a share of the official split; more than the split file holds is a
        ``SubsetError`` unless ``allow_subset`` (then the whole file)."""
        train = encode(self.source, "train", model, max_seq_length)
        count = self.count(train.num_examples)
        count.used(self.allow_subset)  # clear error before anything else
        train = train.select_examples(count.indices(self.seed, self.allow_subset))
        devs = {split: encode(self.source, split, model, max_seq_length)
                for split in self.source.spec.dev_splits}
        return train, devs

    def short(self, examples: int) -> bool:
        """Whether training on ``examples`` is fewer than the size asks for, or the
        intermediate task's split (trained at the same size) is short alike."""
        return examples < self.count(examples).wanted or (
            self.intermediate is not None
            and source_count(self.intermediate, self.size).short)

    def identity(self) -> tuple[str, str]:
        """(fingerprint, source) of the data the trial trains and is scored on, its
        intermediate task's splits first (``reinit_tune.data.source.identity``)."""
        sources = [self.source] if self.intermediate is None or \
            self.intermediate.task == self.source.task else [self.intermediate, self.source]
        return identity(*sources)


def train_and_devs(
    task: str,
    model: str,
    max_seq_length: int,
    train_size: Size,
    seed: int,
    data_dir=None,
    allow_subset: bool = False,
) -> tuple[Encoded, dict[str, Encoded]]:
    """The seeded training subset and every dev split of ``task`` (``TrialData.load``)."""
    return TrialData.find(task, train_size, seed, data_dir,
                          allow_subset=allow_subset).load(model, max_seq_length)
