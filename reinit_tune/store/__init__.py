"""The results store: one Parquet file per trial, plus one per trial for its epochs, in
tables a folder each (``schema`` lays them out), compacted as they grow.

Files are written to a hidden temporary name and renamed into place (``files``), so readers
(pandas, pyarrow, DuckDB: ``SELECT * FROM 'results/trials/*.parquet'``) never see half a file
and a crash never damages earlier rows. Every table is one ``Table`` (``tables``); a trial's
rows are built and written by ``rows``, read back at any size by ``reader``, merged by
``compaction``, checked by ``check``, copied across families by ``reuse`` and looked up for
claims and planning by ``lookup``. This package re-exports what callers use.
"""

from __future__ import annotations

# pyarrow's writer, under the name callers that simulate a failing disk patch
from pyarrow import parquet as pq

from reinit_tune.store.check import (
    StoreCheck,
    broken_files,
    check_store,
    malformed_rows,
    unreadable_files,
)
from reinit_tune.store.compaction import (
    COMPACT_AFTER_FILES,
    MERGE_COMPACTED_AFTER,
    compact,
    compact_if_many,
    finish_compactions,
    small_file_count,
)
from reinit_tune.store.files import (
    COMPACTED_PREFIX,
    DAMAGED,
    damaged_files,
    key_count,
    not_a_store,
    remove_partial_files,
    set_aside,
    trials_in,
)
from reinit_tune.store.lookup import finished_data, finished_ids, stored_rows
from reinit_tune.store.reader import CLOCK_SKEW_S
from reinit_tune.store.reuse import equivalence_key, equivalent_ids, reuse_trial
from reinit_tune.store.rows import (
    epoch_rows,
    outcome_rows,
    outcome_steps,
    step_rows,
    trial_row,
    write_trial,
)
from reinit_tune.store.schema import (
    CONFIG_FIELDS,
    EPOCH_SCHEMA,
    EPOCHS,
    PAIR_SCHEMA,
    PAIRS,
    PAYLOAD_COLUMNS,
    SIMILARITY,
    SIMILARITY_SCHEMA,
    STEP_SCHEMA,
    STEPS,
    TRIAL_SCHEMA,
    TRIALS,
    WEIGHT_PROJECTIONS,
    config_columns,
    ran_on_subset,
    stored_size,
    trial_columns,
)
from reinit_tune.store.tables import (
    TABLES,
    Table,
    load_epochs,
    load_pairs,
    load_similarity,
    load_steps,
    load_trials,
    pair_ids,
    similarity_ids,
    write_pairs,
    write_similarity,
    write_steps,
)

__all__ = [
    "CLOCK_SKEW_S", "COMPACTED_PREFIX", "COMPACT_AFTER_FILES", "CONFIG_FIELDS", "DAMAGED",
    "EPOCHS", "EPOCH_SCHEMA", "MERGE_COMPACTED_AFTER", "PAIRS", "PAIR_SCHEMA",
    "PAYLOAD_COLUMNS", "SIMILARITY", "SIMILARITY_SCHEMA", "STEPS", "STEP_SCHEMA", "StoreCheck",
    "TABLES", "TRIALS", "TRIAL_SCHEMA", "Table", "WEIGHT_PROJECTIONS", "broken_files",
    "check_store", "compact",
    "compact_if_many", "config_columns", "damaged_files", "epoch_rows", "equivalence_key",
    "equivalent_ids", "finish_compactions", "finished_data", "finished_ids", "key_count",
    "load_epochs",
    "load_pairs", "load_similarity", "load_steps", "load_trials", "malformed_rows",
    "not_a_store", "outcome_rows", "outcome_steps", "pair_ids", "pq", "ran_on_subset",
    "remove_partial_files", "reuse_trial", "set_aside", "similarity_ids", "small_file_count",
    "step_rows", "stored_rows", "stored_size", "trial_columns", "trial_row", "trials_in",
    "unreadable_files", "write_pairs", "write_similarity", "write_steps", "write_trial",
]
