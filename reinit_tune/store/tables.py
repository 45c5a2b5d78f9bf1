"""The store's five tables, each one ``Table``: its folder, the key a file is named by and
its schema, and the same three operations for all of them (write one trial's or pair's
rows, load the whole table, the keys it holds), plus ``load_trials`` and ``load_epochs``.

Every file of a table has the same explicit schema, so a folder reads as one table (pandas,
pyarrow, DuckDB: ``SELECT * FROM 'results/trials/*.parquet'``) while a sweep is still
writing it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from reinit_tune.store import files, reader, schema


@dataclasses.dataclass(frozen=True)
class Table:
    """One table of the store: ``<results>/<name>/<key value>.parquet`` files of ``schema``
    (and the compacted files that merged them)."""

    name: str
    key: str
    schema: pa.Schema

    def path(self, results_dir: str | os.PathLike, value: str) -> Path:
        """The per-trial (or per-pair) file of ``value``."""
        return Path(results_dir) / self.name / f"{value}.parquet"

    def write(self, results_dir: str | os.PathLike, value: str,
              rows: list[dict[str, Any]]) -> Path:
        """Store the rows of one trial (or pair), each tagged with ``key=value``, replacing
        an earlier attempt's."""
        path = self.path(results_dir, value)
        files.write_atomic(files.arrow_rows([{**r, self.key: value} for r in rows],
                                            self.schema), path)
        return path

    def load(self, results_dir: str | os.PathLike,
             columns: list[str] | None = None) -> pd.DataFrame:
        """Every row of the table (only ``columns`` when given); join on ``trial_id``."""
        # The current schema, not the first file's: rows written by an older version that
        # lack a newer column read as nulls instead of dropping the column.
        return reader.read_table(results_dir, self, columns).to_pandas()

    def ids(self, results_dir: str | os.PathLike) -> set[str]:
        """The keys the table holds rows of."""
        # per-trial files by name (no need to open them), compacted ones by their key column
        folder = Path(results_dir) / self.name
        small, _ = files.listing(folder)
        return {Path(p).stem for p in small} | reader.compacted_keys(folder, self.key)

    def rows_of(self, results_dir: str | os.PathLike, value: str,
                written_after: float | None = None) -> list[dict[str, Any]]:
        """The stored rows of one trial (or pair), wherever they are (``reader.rows_of``)."""
        return reader.rows_of(results_dir, self, value, written_after)


TRIAL_TABLE = Table(schema.TRIALS, "trial_id", schema.TRIAL_SCHEMA)
EPOCH_TABLE = Table(schema.EPOCHS, "trial_id", schema.EPOCH_SCHEMA)
SIMILARITY_TABLE = Table(schema.SIMILARITY, "trial_id", schema.SIMILARITY_SCHEMA)
STEP_TABLE = Table(schema.STEPS, "trial_id", schema.STEP_SCHEMA)
PAIR_TABLE = Table(schema.PAIRS, "pair_id", schema.PAIR_SCHEMA)
TABLES = {t.name: t for t in (TRIAL_TABLE, EPOCH_TABLE, SIMILARITY_TABLE, STEP_TABLE,
                              PAIR_TABLE)}

# a trial's per-layer similarity rows and per-step losses (written before its trial row),
# and the per-layer comparisons of two trials' models (``reinit-tune consistency``)
write_similarity = SIMILARITY_TABLE.write
load_similarity = SIMILARITY_TABLE.load
similarity_ids = SIMILARITY_TABLE.ids
write_steps = STEP_TABLE.write
load_steps = STEP_TABLE.load
write_pairs = PAIR_TABLE.write
load_pairs = PAIR_TABLE.load
pair_ids = PAIR_TABLE.ids


def load_trials(results_dir: str | os.PathLike, status: str | None = None,
                columns: list[str] | None = None) -> pd.DataFrame:
    """One row per finished trial (``status`` "ok" or "error"); filter with ``status=``.
    ``data_subset`` is a plain bool column (older stores' nulls read as False).

    ``columns``: only these (in this order), read only from disk; every column when None.
    ``trial_columns()`` names all but the large payloads (``config_json``, ``versions``),
    which analysis seldom needs and which dominate the table's memory."""
    wanted = None if columns is None else list(columns)
    read = wanted if wanted is None or status is None or "status" in wanted \
        else [*wanted, "status"]
    df = TRIAL_TABLE.load(results_dir, read)
    if "data_subset" in df:
        df["data_subset"] = df["data_subset"].eq(True).astype(bool)
    if status is not None:
        df = df[df["status"] == status].reset_index(drop=True)
    return df if wanted is None else df[wanted]


def load_epochs(results_dir: str | os.PathLike,
                columns: list[str] | None = None) -> pd.DataFrame:
    """One row per (trial, epoch); join to ``load_trials`` on ``trial_id``."""
    return EPOCH_TABLE.load(results_dir, columns)
