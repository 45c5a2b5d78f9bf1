"""``TrainSize``: what a trial's train size means, the one place that reads ``int | float | None``.

A size is a count of examples, a fraction of the official train split in (0, 1), or the full
split. ``TrialConfig.train_size`` stores it as that plain value (trial ids and the Parquet
schema read it so); ``TrainSize.of`` wraps it, ``TrainSize.parse`` reads the command's
``--sizes`` text, ``label`` and ``shown`` format it, and ``wanted`` resolves it against the
official split: the count the paper meant, what the seed and epoch rules read.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from reinit_tune.errors import InputError

# The plain value a config stores: a count, a fraction of the split, or None for all of it.
Size = int | float | None


@dataclass(frozen=True)
class TrainSize:
    """A train size: ``value`` is a count (int), a fraction in (0, 1) (float) or None (full)."""

    value: Size = None

    def __post_init__(self) -> None:
        ts = self.value
        if ts is None:
            return
        if isinstance(ts, bool) or not isinstance(ts, int | float):
            raise InputError(f"train_size: must be None, a count or a fraction, got {ts!r}")
        if isinstance(ts, float) and not 0 < ts < 1:
            raise InputError(
                f"train_size: a fraction must lie in (0, 1), got {ts!r}; "
                "use None for the full split or an integer count"
            )
        if isinstance(ts, int) and ts < 1:
            raise InputError(f"train_size: must be a positive count, got {ts}")

    @classmethod
    def of(cls, value: Size | TrainSize) -> TrainSize:
        return value if isinstance(value, TrainSize) else cls(value)

    @classmethod
    def stored(cls, value: float | None) -> TrainSize:
        """The size a stored row's number means: NaN or None the full split, below 1 a
        fraction, else a count (Parquet and pandas may hand a count back as a float)."""
        if value is None or value != value:  # None or NaN
            return cls(None)
        return cls(float(value)) if value < 1 else cls(int(value))

    @classmethod
    def parse(cls, text: str) -> Size:
        """A train size from the command line: '500' → 500 examples, '0.1' → a 10% fraction,
        'full' → the whole split (None). Returns the plain value a config stores."""
        if text.lower() in ("full", "all", "none"):
            return None
        value: Size
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                value = "bad"
        if isinstance(value, int) and value >= 1 or isinstance(value, float) and 0 < value < 1:
            return value
        raise argparse.ArgumentTypeError(
            f"size {text!r}: give a positive count (500), a fraction in (0, 1) (0.1) or 'full'")

    @property
    def is_full(self) -> bool:
        return self.value is None

    @property
    def is_fraction(self) -> bool:
        return isinstance(self.value, float)

    @property
    def count(self) -> int | None:
        """The example count it names; None for a fraction or the full split."""
        return None if self.is_full or self.is_fraction else self.value

    def fits(self, official: int) -> bool:
        """Whether a split of ``official`` rows can supply it (fractions and full always)."""
        return self.count is None or self.count <= official

    def wanted(self, official: int, task: str = "task") -> int:
        """The examples it asks for of an official split of ``official`` rows: a count, a
        fraction of the official split, or all of it. This is the count the paper meant, what
        the 50-seed and 5-epoch rules read."""
        if self.is_full:
            return official
        if self.is_fraction:
            return max(1, round(self.value * official))
        if self.value > official:
            raise InputError(
                f"train_size: {self.value} exceeds the {official} rows of the {task} train "
                f"split; allowed: 1..{official}, a fraction in (0, 1), or None for all"
            )
        return self.value

    def resolve(self, available_rows: int, official_rows: int | None = None,
                task: str = "task") -> int:
        """``wanted`` of the official split (``official_rows``, at least the rows there; None:
        the split is complete), not capped at ``available_rows``."""
        return self.wanted(max(official_rows or available_rows, available_rows), task)

    @property
    def shown(self) -> str:
        """How a message names it: '500', '0.1 (10.0% of the split)' or 'full (...)'."""
        if self.is_full:
            return "full (all of the split)"
        return f"{self.value:g} ({self.value:.1%} of the split)" if self.is_fraction \
            else str(self.value)

    @property
    def figure_label(self) -> str:
        """How a figure names it: '500', '10%', '0.6%' or 'full' (every distinct fraction
        a distinct label: 000 runs QNLI at both 1% and 0.6%)."""
        if self.is_full:
            return "full"
        return f"{100 * self.value:.4g}%" if self.is_fraction else str(self.value)

    @property
    def label(self) -> str:
        """How a listing names it: '500', '0.1' or 'full'."""
        return "full" if self.is_full else str(self.value)
