"""Reading a table of the store at any size: every usable row once, whatever the folder holds.

Reading goes through DuckDB (already a dependency for the README's SQL): over per-trial
files it reads footers and rows about twice as fast as pyarrow.dataset and four times as
fast as a loop of pq.read_table (measured over 1,000 files; benchmarks/RESULTS.md, "the
store at scale"), reading only the columns asked for. The usual store, whose files all
have the current schema, is read with one ``read_parquet`` call per batch of files; a batch
that DuckDB refuses (an older version's files lack a column, a damaged or foreign file) is
grouped by schema (one ``parquet_schema`` pass over its footers) and each group read the
same way, then conformed (``files.conform``): older files keep loading, other programs'
files are skipped with a warning naming them, damaged ones found by bisection (``bisect``),
and malformed rows are skipped and named (``Problems``). Per-trial files are the
write-ahead format; ``compaction`` merges them into a few large files, which read in a
fraction of a second whatever their row count. Overlaps resolve by key (``read_table``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from reinit_tune.store.files import (
    Vanished,
    compacted_at,
    conform,
    listing,
    literal,
    read_one,
    warn_unreadable,
)
from reinit_tune.store.schema import TRIALS
from reinit_tune.wording import counted

log = logging.getLogger("reinit_tune")


class Table(Protocol):
    """What reading needs of a table of the store (``reinit_tune.store.tables.Table``: the
    files under ``<results>/<name>/``, keyed by ``key``, of ``schema``)."""

    @property
    def name(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def schema(self) -> pa.Schema: ...

# The column each read row's source file travels in, for warnings and ``check_store``.
FILENAME = "__store_file"
_BATCH_FILES = 5000
# How far the clocks of two hosts sharing a store may disagree (``rows_of``' filter).
CLOCK_SKEW_S = 300.0


@dataclasses.dataclass
class Problems:
    """What a read skipped, for warnings and ``check_store``."""

    unreadable: list[Path] = dataclasses.field(default_factory=list)
    foreign: list[Path] = dataclasses.field(default_factory=list)
    malformed: list[tuple[Path, str, str]] = dataclasses.field(default_factory=list)
    # files read around their damaged columns (read as nulls): path -> those columns
    damaged_columns: dict[Path, list[str]] = dataclasses.field(default_factory=dict)
    # per-trial files not named by the trial they hold: a sync tool's "conflicted copy", a
    # backup beside the original; every reader skips them, so no trial counts twice
    strays: list[Path] = dataclasses.field(default_factory=list)

    def add(self, other: Problems) -> None:
        self.unreadable += other.unreadable
        self.foreign += other.foreign
        self.malformed += other.malformed
        self.damaged_columns.update(other.damaged_columns)
        self.strays += other.strays

    @property
    def bad_files(self) -> list[Path]:
        """Files no row of which reads: unreadable or another program's."""
        return self.unreadable + self.foreign


_CONNECTION = threading.local()


def connect():
    """The DuckDB connection this thread reads stores with, made once per thread and
    process: a new one costs ~35 ms, more than reading a small store (the reads create
    nothing in it, so reusing it carries nothing over)."""
    import duckdb

    made = getattr(_CONNECTION, "made", None)
    if made is not None and made[0] == os.getpid():
        return made[1]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    # One thread: over many small files DuckDB's worker threads each keep per-file buffers
    # (10,000 files: 1.2 GB peak with 2 threads, 0.3 GB with one) and gain no speed, the
    # cost being each footer's parse; a compacted file is read in well under a second.
    con.execute("SET threads = 1")
    _CONNECTION.made = (os.getpid(), con)
    return con


_READS: dict[tuple[str, str], tuple[tuple, Any]] = {}


def remembered(results_dir: str | os.PathLike, tables: tuple[str, ...], name: str,
               compute: Callable[[], Any]) -> Any:
    """``compute()`` of the store at ``results_dir``, kept while no file of its ``tables``
    changes (each file's name, size and modification time say so; writes are renames):
    planning many sweeps on one store, as a verdict's priced commands do, reads it once.
    Callers copy what they hand out."""
    root = Path(results_dir).resolve()
    state = tuple(_files_state(root / table) for table in tables)
    key = (str(root), name)
    kept = _READS.get(key)
    if kept is not None and kept[0] == state:
        return kept[1]
    value = compute()
    _READS[key] = (state, value)
    return value


def _files_state(folder: Path) -> tuple:
    try:
        with os.scandir(folder) as entries:
            return tuple(sorted((e.name, (st := e.stat()).st_size, st.st_mtime_ns)
                                for e in entries if e.is_file()))
    except FileNotFoundError:
        return ()


def bisect(files: list[str], attempt, bad: list[Path], around=None) -> list:
    """``attempt(files)`` over all files at once; where it fails, over halves, down to the
    single files that fail: one damaged file costs a few extra passes, not a per-file loop
    over a healthy store. A single file that fails is read by ``around(file)`` where given
    (its readable columns), else (or where that gives None) appended to ``bad``."""
    import duckdb

    try:
        return [attempt(files)]
    except (duckdb.Error, pa.ArrowException, OSError):
        if any(not os.path.exists(f) for f in files):
            raise Vanished from None
        if len(files) == 1:
            part = around(files[0]) if around is not None else None
            if part is None:
                bad.append(Path(files[0]))
                return []
            return [part]
        mid = len(files) // 2
        return (bisect(files[:mid], attempt, bad, around)
                + bisect(files[mid:], attempt, bad, around))


def schema_groups(con, files: list[str], problems: Problems) -> list[list[str]]:
    """``files`` grouped by identical schema; files whose footer cannot be read go to
    ``problems.unreadable``."""
    def signatures(chunk: list[str]) -> list[tuple[str, str]]:
        return con.sql(
            "SELECT file_name, string_agg(concat_ws('|', name, type, repetition_type, "
            "converted_type, logical_type, num_children), ';' ORDER BY "
            "concat_ws('|', name, type, repetition_type, converted_type, logical_type, "
            "num_children)) FROM parquet_schema($files) GROUP BY file_name",
            params={"files": [literal(f) for f in chunk]}).fetchall()

    groups: dict[str, list[str]] = {}
    for part in bisect(files, signatures, problems.unreadable):
        for name, signature in part:
            groups.setdefault(signature, []).append(name)
    return list(groups.values())


def usable(schema: pa.Schema, key: str, table: str) -> bool:
    """Whether files of ``schema`` are this store's table (of any version): the key (and a
    trial's status) as strings. Another program's Parquet file has other columns."""
    # every trial row since 0.1 has its config (what resumption recomputes ids from)
    required = (key, "status", "config_json") if table == TRIALS else (key,)
    return all(name in schema.names and pa.types.is_string(schema.field(name).type)
               for name in required)


def _malformed_mask(table: pa.Table, key: str, name: str) -> tuple[pa.Array, list[str]]:
    """Rows no reader can use (True in the mask), and why: no key (or status), a
    ``reinit_heads`` entry that is not a (layer, head) pair, ``versions`` that is not JSON."""
    import pyarrow.compute as pc

    n = len(table)
    reasons = [""] * n

    def flag(mask, why: str) -> None:
        for i in pc.indices_nonzero(mask.fill_null(True) if hasattr(mask, "fill_null")
                                    else mask).to_pylist():
            reasons[i] = reasons[i] or why

    flag(pc.is_null(table[key]), f"no {key}")
    if name == TRIALS:
        if "status" in table.column_names:
            flag(pc.invert(pc.is_in(table["status"], pa.array(["ok", "error"]))),
                 "status is neither 'ok' nor 'error'")
        if "reinit_heads" in table.column_names:
            heads = table["reinit_heads"].combine_chunks()
            if len(heads) and heads.null_count < len(heads):
                pairs = pc.list_flatten(heads)
                bad_pair = pc.invert(pc.equal(pc.list_value_length(pairs), 2).fill_null(False))
                if len(pairs):
                    rows = pc.list_parent_indices(heads).filter(bad_pair)
                    mask = pc.is_in(pa.array(range(n), pa.int64()), value_set=rows.cast(
                        pa.int64()))
                    flag(mask, "a reinit_heads entry is not a (layer, head) pair")
        if "versions" in table.column_names:
            bad_json = []
            for value in pc.unique(table["versions"]).to_pylist():
                if value is None:
                    continue
                try:
                    if not isinstance(json.loads(value), dict):
                        bad_json.append(value)
                except ValueError:
                    bad_json.append(value)
            if bad_json:
                flag(pc.is_in(table["versions"], pa.array(bad_json, pa.string())),
                     "versions is not a JSON object")
    return pa.array([bool(r) for r in reasons], pa.bool_()), reasons


def read_files(con, files: list[str], table: Table, columns: list[str],
               problems: Problems, per_trial: bool = False) -> pa.Table:
    """The usable rows of ``files`` (one table folder), conformed to its schema's
    ``columns``, with the file each row came from in ``FILENAME``. ``per_trial`` files
    hold one trial each under its own name (``<key>.parquet``): rows of a file named
    otherwise (a copy) are skipped and the file named in ``problems.strays``."""
    if len(files) > _BATCH_FILES:
        # DuckDB keeps some state per file until its query ends (100,000 files in one query:
        # 1.6 GB peak); batches bound the peak at no cost in speed.
        return pa.concat_tables([read_files(con, files[i:i + _BATCH_FILES], table, columns,
                                            problems, per_trial)
                                 for i in range(0, len(files), _BATCH_FILES)])
    rows = _read_files(con, files, table, columns, problems)
    if not per_trial or not len(rows):
        return rows
    import pyarrow.compute as pc

    folder = os.path.dirname(files[0]) + os.sep
    own = pc.equal(rows[FILENAME], pc.binary_join_element_wise(
        folder, rows[table.key].cast(pa.string()), ".parquet", ""))
    own = pc.fill_null(own, False)
    if not pc.all(own).as_py():
        strays = pc.unique(rows[FILENAME].filter(pc.invert(own))).to_pylist()
        problems.strays += [Path(f) for f in strays]
        log.warning("skipping %s not named by the trial it holds (a copy? e.g. %s)",
                    counted(len(strays), f"{table.name} file"), strays[0])
        rows = rows.filter(own)
    return rows


def _read_files(con, files: list[str], table: Table, columns: list[str],
                problems: Problems) -> pa.Table:
    import duckdb

    known_bad = len(problems.unreadable)
    name, key, schema = table.name, table.key, table.schema
    wanted = list(dict.fromkeys([key, *(["status", "reinit_heads", "versions"]
                                        if name == TRIALS else []), *columns]))
    # The pre-0.3 float train_size held counts and fractions; its files lack
    # train_fraction, so asking for both sends them to the schema groups, where ``_conform``
    # splits it. Asking one read for train_size alone would let DuckDB cast an old 0.5 to
    # the current int column's 0.
    sizes = ("train_size", "train_fraction")
    if any(c in wanted for c in sizes):
        wanted += [c for c in sizes if c not in wanted]
    target = pa.schema([schema.field(c) for c in wanted]
                       + [pa.field(FILENAME, pa.string())])
    def read(chunk: list[str], present: list[str]) -> pa.Table:
        select = ", ".join(f'"{c}"' for c in present)
        return con.sql(f"SELECT {select}, filename AS {FILENAME} FROM "
                       "read_parquet($files, filename = true)",
                       params={"files": [literal(f) for f in chunk]}).to_arrow_table()

    tables = []
    try:
        # The usual store: every file has the current schema, and one read does it (DuckDB
        # refuses a file that lacks a column asked for, which sends the read to the groups).
        tables.append(conform(read(files, wanted), target))
    except (duckdb.Error, pa.ArrowException):
        if any(not os.path.exists(f) for f in files):
            raise Vanished from None
        groups = schema_groups(con, files, problems)
    else:
        groups = []
    for group in groups:
        file_schema = pq.read_schema(group[0])
        if not usable(file_schema, key, name):
            for f in group:
                log.warning("skipping %s: not a reinit-tune %s file (its columns: %s)", f,
                            name, ", ".join(file_schema.names[:8]))
            problems.foreign += [Path(f) for f in group]
            continue
        present = [c for c in wanted if c in file_schema.names]

        def around(path: str, present: list[str] = present) -> pa.Table | None:
            """A damaged file's columns that still read (the others as nulls): one broken
            column never hides the rest of its rows."""
            readable = []
            for column in present:
                with contextlib.suppress(duckdb.Error, pa.ArrowException, OSError):
                    read([path], [column])
                    readable.append(column)
            if key not in readable:
                return None
            lost = [c for c in present if c not in readable]
            problems.damaged_columns[Path(path)] = lost
            log.warning("results file %s is damaged: read without its columns %s",
                        path, ", ".join(lost))
            return read([path], readable)

        for part in bisect(group, lambda chunk, present=present: read(chunk, present),
                           problems.unreadable, around):
            try:
                tables.append(conform(part, target))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                problems.foreign += [Path(f) for f in dict.fromkeys(
                    part[FILENAME].to_pylist())]
                log.warning("skipping %d %s files whose columns have other types (e.g. %s)",
                            len(part), name, part[FILENAME][0])
    for path in problems.unreadable[known_bad:]:
        warn_unreadable(path)
    rows = pa.concat_tables(tables) if tables else target.empty_table()
    mask, reasons = _malformed_mask(rows, key, name)
    if mask.true_count:
        import pyarrow.compute as pc

        keys, origins = rows[key].to_pylist(), rows[FILENAME].to_pylist()
        for i in pc.indices_nonzero(mask).to_pylist():
            problems.malformed.append((Path(origins[i]), keys[i], reasons[i]))
            log.warning("skipping malformed %s row %s in %s: %s", name, keys[i], origins[i],
                        reasons[i])
        rows = rows.filter(pc.invert(mask))
    return rows


def read_table(results_dir: str | os.PathLike, table: Table, columns: list[str] | None = None,
               problems: Problems | None = None) -> pa.Table:
    """Every usable row of a table folder exactly once, in key order: a per-trial file's
    rows win over a compacted file's rows of the same key (the per-trial file is either
    being compacted right now, or a later attempt written since), and a newer compacted file
    wins over an older one."""
    name, key, schema = table.name, table.key, table.schema
    folder = Path(results_dir) / name
    if columns is None:
        columns = list(schema.names)
    unknown = [c for c in columns if c not in schema.names]
    if unknown:
        raise ValueError(f"no column {', '.join(unknown)} in the {name} table")
    con = connect()
    for attempt in range(5):
        found = Problems()
        try:
            small, compacted = listing(folder)
            parts = [read_files(con, small, table, columns, found, per_trial=True)] \
                if small else []
            for path in reversed(compacted):  # newest first
                parts.append(read_files(con, [path], table, columns, found))
            break
        except Vanished:
            if attempt == 4:
                raise
    if problems is not None:
        problems.add(found)
    target = pa.schema([schema.field(c) for c in columns])
    if not parts:
        return target.empty_table()
    return first_wins(parts, key).select(columns).cast(target)


def first_wins(parts: list[pa.Table], key: str) -> pa.Table:
    """Every row of ``parts`` (in precedence order) whose key no earlier part holds, sorted
    by key (stable: a key's rows keep their order). Column-wise, whatever the number of
    parts: sort by (key, part), then keep the rows of each key's first part."""
    import pyarrow.compute as pc

    table = pa.concat_tables(parts)
    if len(parts) > 1 and len(table):
        rank = np.concatenate([np.full(len(p), i, np.int32) for i, p in enumerate(parts)])
        order = pc.sort_indices(pa.table({"k": table[key], "r": rank}),
                                sort_keys=[("k", "ascending"), ("r", "ascending")])
        table = table.take(order)
        keys = table[key].combine_chunks()
        ranks = rank[order.to_numpy()]
        starts = np.ones(len(table), bool)
        starts[1:] = pc.not_equal(keys[1:], keys[:-1]).to_numpy(zero_copy_only=False)
        group = np.cumsum(starts) - 1
        return table.filter(pa.array(ranks == ranks[starts][group]))
    return table.sort_by([(key, "ascending")])


def compacted_keys(folder: Path, key: str) -> set[str]:
    """The keys the compacted files of a table folder hold."""
    _, compacted = listing(folder)
    keys: set[str] = set()
    for path in compacted:
        with contextlib.suppress(OSError, pa.ArrowException):
            keys.update(pq.read_table(path, columns=[key])[key].to_pylist())
    return keys


def rows_of(results_dir: str | os.PathLike, table: Table, value: str,
            written_after: float | None = None) -> list[dict[str, Any]]:
    """The stored rows of one trial (or pair) of a table, from its per-trial file or, once
    compacted, from the newest compacted file that holds it. With ``written_after`` (a Unix
    time), compacted files made before then (less ``CLOCK_SKEW_S``) are not searched."""
    folder = Path(results_dir) / table.name
    path = folder / f"{value}.parquet"
    if path.is_file():
        rows = read_one(path, table.schema)
        if rows is not None or path.exists():
            return [] if rows is None else rows.to_pylist()
        # gone between the two looks: a compaction merged it; read it from there
    _, compacted = listing(folder)
    if written_after is not None:
        compacted = [f for f in compacted
                     if compacted_at(f) >= written_after - CLOCK_SKEW_S]
    for f in reversed(compacted):
        with contextlib.suppress(OSError, pa.ArrowException):
            rows = ds.dataset(f, schema=table.schema, format="parquet").to_table(
                filter=ds.field(table.key) == value)
            if len(rows):
                return rows.to_pylist()
    return []
