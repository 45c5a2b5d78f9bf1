"""The store in SQL: one DuckDB view per table that holds each key's rows exactly as the
loaders read them, so a query never counts a rerun twice.

A trial run again after its store was compacted has rows in two files: the compacted file
and its own newer per-trial file (or a newer compacted one). ``load_trials`` keeps the rows
of the file that wins (``reader.read_table``: a per-trial file over any compacted one, a
newer compacted file over an older one); a plain ``SELECT ... FROM 'trials/*.parquet'`` sees
both, and filtering on ``status = 'ok'`` before keeping the latest row brings back the old
ok row of a trial whose rerun failed. The views here keep the winning file's rows first;
filter after::

    from reinit_tune.store import sql
    con = sql.connect("results/quickstart")
    con.sql("SELECT task, num_pretrained_layers AS k, avg(score), count(*) FROM trials "
            "WHERE status = 'ok' GROUP BY ALL ORDER BY k").show()

``views(results_dir)`` is the same as SQL text, for the DuckDB shell or another client.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from reinit_tune.store.files import COMPACTED_PREFIX, literal
from reinit_tune.store.tables import TABLES

if TYPE_CHECKING:
    import duckdb


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def view(results_dir: str | os.PathLike, name: str) -> str:
    """``CREATE OR REPLACE VIEW <name>``: the rows of table ``name`` (``trials``,
    ``epochs``, ...) of the winning file of each key, every column of the table."""
    table = TABLES[name]
    files = _quoted(literal(Path(results_dir) / name) + "/*.parquet")
    # a per-trial file ranks first; compacted files by their time-stamped names, newest first
    rank = (f"CASE WHEN parse_filename(__file) LIKE '{COMPACTED_PREFIX}%' THEN 1 ELSE 0 END, "
            "__file DESC")
    return (f"CREATE OR REPLACE VIEW {name} AS SELECT * EXCLUDE (__file) FROM ("
            "SELECT * EXCLUDE (filename), filename AS __file FROM "
            f"read_parquet({files}, union_by_name = true, filename = true)) "
            f"QUALIFY dense_rank() OVER (PARTITION BY {table.key} ORDER BY {rank}) = 1")


def present(results_dir: str | os.PathLike) -> list[str]:
    """The tables of ``results_dir`` that have at least one file."""
    root = Path(results_dir)
    return [name for name in TABLES
            if (root / name).is_dir() and any((root / name).glob("*.parquet"))]


def views(results_dir: str | os.PathLike) -> str:
    """The SQL that creates a view for every table the store has, one statement a line."""
    return "\n".join(view(results_dir, name) + ";" for name in present(results_dir))


def connect(results_dir: str | os.PathLike,
            con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (``con``, or a new in-memory one) with a view per table of the
    store: ``trials``, ``epochs``, ``steps``, ``similarity`` and ``pairs``, each empty where
    the store has no file of it yet (a query of a store with no trial reads 0 rows). Raises
    ``InputError`` naming the path where ``results_dir`` is no store (a misspelled path)."""
    import duckdb

    from reinit_tune.errors import InputError
    from reinit_tune.store.files import not_a_store

    if (problem := not_a_store(results_dir, flag="results_dir")) is not None:
        raise InputError(problem)
    con = con or duckdb.connect()
    have = present(results_dir)
    for name in TABLES:
        if name in have:
            con.execute(view(results_dir, name))
        else:
            con.register(name, TABLES[name].schema.empty_table())
    return con
