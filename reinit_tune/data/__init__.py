"""Task data: splits from local Parquet or the hub, seeded train subsets, tokenization, batches.

One module per concept, their public names re-exported here (``data.X``):

- ``source``: where a task's splits are (``TaskSource``: local Parquet files under
  ``--data-dir`` or ``REINIT_TUNE_DATA``, else the hub), their row counts, and the
  fingerprint of the data a trial saw (``data_identity``).
- ``subset``: what a train size means for a split as found (``TrainCount``, ``SubsetError``)
  and the seeded train subset of a trial.
- ``encoding``: tokenization, cached per machine, into padded batches (``Encoded``).
- ``trial_data``: one trial's data found once (``TrialData``) and loaded from that.
"""

from __future__ import annotations

from reinit_tune import env
from reinit_tune.data.encoding import (
    CHARS_PER_CALL,
    Encoded,
    QAExamples,
    checked_labels,
    encode,
    encoded_split,
    load_tokenizer,
    qa_stride,
    text_chunks,
    tokenizer_identity,
    uses_segments,
)
from reinit_tune.data.source import (
    TaskSource,
    data_identity,
    file_sha256,
    load_split,
    local_split_path,
    official_rows,
    resolve_data_dir,
    split_rows,
)
from reinit_tune.data.subset import (
    SubsetError,
    TrainCount,
    subset_indices,
    subset_size,
    train_count,
    wanted_size,
)
from reinit_tune.data.trial_data import TrialData, train_and_devs
from reinit_tune.env import DATA_ENV
from reinit_tune.errors import DataNotFoundError

__all__ = [
    "CHARS_PER_CALL", "DATA_ENV", "DataNotFoundError", "Encoded", "QAExamples", "SubsetError",
    "TaskSource", "TrainCount", "TrialData", "checked_labels", "data_identity", "encode",
    "encoded_split", "env", "file_sha256", "load_split", "load_tokenizer", "local_split_path",
    "official_rows", "qa_stride", "resolve_data_dir", "split_rows", "subset_indices",
    "subset_size", "text_chunks", "tokenizer_identity", "train_and_devs", "train_count",
    "uses_segments", "wanted_size",
]
