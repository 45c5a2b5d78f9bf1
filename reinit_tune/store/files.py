"""The store's files one at a time: writing one atomically (a hidden temporary name renamed
into place, so readers never see half a file and a crash never damages earlier rows),
listing a table folder's per-trial and compacted files, reading one file, and conforming a
file written by an older version to the current schema.

A killed writer leaves only a hidden ``.*.tmp`` file, which readers skip (pandas, pyarrow
and DuckDB's ``'*.parquet'`` glob ignore dot files) and ``remove_partial_files`` deletes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from reinit_tune.store.schema import EPOCHS, PAIRS, SIMILARITY, STEPS, TRIALS

log = logging.getLogger("reinit_tune")

# Compacted files sit beside the per-trial files of their table, under this prefix.
COMPACTED_PREFIX = "compacted-"


def literal(path: str | os.PathLike) -> str:
    """``path`` as DuckDB's file readers take it literally: they expand ``[ ] * ?`` in
    every path they are given, even in a list of files, so a store at ``runs[1]`` would
    read ``runs1``; each of ``[ * ?`` becomes a one-character class (``[[]``)."""
    return "".join(f"[{c}]" if c in "[*?" else c for c in str(path))


def next_stamp(folder: Path) -> int:
    """A new compacted file's stamp, what ranks it above every compacted file before it:
    this host's clock, or one past the newest stamp in ``folder`` where that is later (a
    host whose clock is behind the one that compacted last, a step back of NTP). Compactions
    of a store hold its lock, so stamps only grow whatever the clocks say."""
    _, compacted = listing(folder)
    stamps = [Path(f).name[len(COMPACTED_PREFIX):].split("-")[0] for f in compacted]
    newest = max((int(s) for s in stamps if s.isdigit()), default=0)
    return max(time.time_ns(), newest + 1)


def compacted_name(stamp_ns: int, keys: int) -> str:
    """A new compacted file's name: its stamp (what orders compacted files), a random part
    (two compactions in one nanosecond), and how many keys (trials) it holds, which stays
    known when the file itself can no longer be read (``key_count``)."""
    return f"{COMPACTED_PREFIX}{stamp_ns:020d}-{uuid.uuid4().hex[:8]}-n{keys}.parquet"


class Vanished(Exception):
    """A file listed for reading is gone: a compaction merged it meanwhile; list again."""


# what a sweep leaves in its results folder before any trial is stored: its log, its
# drivers' claims, Tune's own storage
SWEEP_TRACES = ("_logs", "claims", "_tune")


def not_a_store(results_dir: str | os.PathLike, flag: str = "--results",
                depth: int = 3) -> str | None:
    """Why ``results_dir`` is not a results store (it has no ``trials/`` folder), naming the
    nearest store below it if one is within ``depth`` folders; None for a store."""
    root = Path(results_dir)
    if (root / TRIALS).is_dir():
        return None
    if root.is_dir() and any((root / trace).is_dir() for trace in SWEEP_TRACES):
        return (f"{flag} {root} holds 0 trials yet: a sweep ran there and stored none (its "
                f"log is in {root / '_logs'}; a sweep still running stores each trial as it "
                "ends)")
    what = "does not exist" if not root.exists() else (
        "is not a folder" if not root.is_dir() else "is not a results store")
    message = (f"{flag} {root} {what} (a store holds {TRIALS}/ with one Parquet file per "
               "trial, written by a sweep)")
    below = _stores_below(root, depth) if root.is_dir() else []
    if below:
        message += f"; the nearest store below it: {flag} {below[0]}"
    return message


def _stores_below(root: Path, depth: int) -> list[Path]:
    """Stores under ``root``, breadth first (the nearest first), hidden folders skipped."""
    level, found = [root], []
    for _ in range(depth):
        nxt = []
        for folder in level:
            try:
                children = sorted(p for p in folder.iterdir()
                                  if p.is_dir() and not p.name.startswith((".", "_")))
            except OSError:
                continue
            found += [c for c in children if (c / TRIALS).is_dir()]
            nxt += children
        if found:
            return found
        level = nxt
    return found


def arrow_rows(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """``rows`` as a table of ``schema``: keys the schema lacks are left out, columns the
    rows lack are null."""
    return pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows],
                                schema=schema)


def write_atomic(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A leading dot hides the partial file from pyarrow/pandas folder reads and from
    # DuckDB's '*.parquet' glob; os.replace is atomic within one filesystem.
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        pq.write_table(table, tmp, write_page_checksum=True)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# Where a damaged file is moved (``set_aside``): out of every reader's way, never deleted.
DAMAGED = "damaged"


@functools.lru_cache(maxsize=65536)
def _verified(path: str, size: int, mtime_ns: int) -> str | None:
    try:
        parquet = pq.ParquetFile(path, page_checksum_verification=True)
    except (OSError, pa.ArrowException):
        return None  # no Parquet footer: an unreadable file, which every reader names
    try:
        parquet.read()
    except (OSError, pa.ArrowException) as e:
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    return None


def damaged(path: str | os.PathLike) -> str | None:
    """Why a store file whose footer reads fails to read whole with its page checksums
    verified (files written since checksums carry them; a flipped byte in a data page is
    found), or None. Checked once per file version; a file without a readable footer is
    the readers' "unreadable" one, not this."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return _verified(str(path), st.st_size, st.st_mtime_ns)


def damaged_files(results_dir: str | os.PathLike,
                  tables: tuple[str, ...] = (TRIALS, EPOCHS, SIMILARITY, STEPS, PAIRS)
                  ) -> dict[Path, str]:
    """The store's damaged files (``damaged``) and why."""
    found = {}
    for name in tables:
        small, compacted = listing(Path(results_dir) / name)
        for f in (*small, *compacted):
            if (why := damaged(f)) is not None:
                found[Path(f)] = why
    return found


def trials_in(path: str | os.PathLike, key: str = "trial_id") -> list[str] | None:
    """The keys a (possibly damaged) file holds, where its key column still reads."""
    try:
        return sorted(set(pq.read_table(path, columns=[key])[key].to_pylist()))
    except (OSError, pa.ArrowException, KeyError):
        return None


def key_count(path: str | os.PathLike, key: str = "trial_id") -> int | None:
    """How many trials (keys) a store file holds, even where it cannot be read: its key
    column where that reads, else 1 for a per-trial file and the count in a compacted file's
    name (``compacted_name``; None for one made before names carried it)."""
    if (held := trials_in(path, key)) is not None:
        return len(held)
    name = Path(path).name
    if not name.startswith(COMPACTED_PREFIX):
        return 1
    match = re.search(r"-n(\d+)\.parquet$", name)
    return int(match.group(1)) if match else None


def set_aside(results_dir: str | os.PathLike, path: Path) -> Path:
    """Move a damaged file to ``RESULTS/damaged/<table>/``, where no reader looks."""
    target = Path(results_dir) / DAMAGED / path.parent.name / path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    return target


def remove_partial_files(results_dir: str | os.PathLike, older_than_s: float = 3600) -> int:
    """Delete temporary files left by writers that were killed mid-write; return how many.

    Only old ones: a younger one may belong to another sweep writing to the same store."""
    cutoff = time.time() - older_than_s
    removed = 0
    for folder in (Path(results_dir) / name
                   for name in (TRIALS, EPOCHS, SIMILARITY, STEPS, PAIRS)):
        for tmp in folder.glob(".*.tmp") if folder.is_dir() else ():
            with contextlib.suppress(FileNotFoundError):
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
                    removed += 1
    return removed


def listing(folder: Path) -> tuple[list[str], list[str]]:
    """The per-trial files and the compacted files of a table folder (oldest first)."""
    if not folder.is_dir():
        return [], []
    small = sorted(e.path for e in os.scandir(folder) if e.name.endswith(".parquet")
                   and not e.name.startswith((".", COMPACTED_PREFIX)))
    # A second listing, taken after the first: a per-trial file missing from the first was
    # deleted by a compaction after it renamed its compacted file into place, so this one
    # sees that compacted file (``compact``).
    compacted = sorted(e.path for e in os.scandir(folder)
                       if e.name.startswith(COMPACTED_PREFIX) and e.name.endswith(".parquet"))
    return small, compacted


def compacted_at(path: str) -> float:
    """When a compacted file was made (Unix seconds), from the stamp in its name."""
    stamp = Path(path).name[len(COMPACTED_PREFIX):].split("-")[0]
    return int(stamp) / 1e9 if stamp.isdigit() else math.inf


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A table written by an older version in ``schema``: missing columns as nulls, and a
    float ``train_size`` (counts and fractions in one column, before 0.3) split into the
    count and ``train_fraction``."""
    columns = {}
    if "train_size" in schema.names and "train_size" in table.column_names and \
            pa.types.is_floating(table.schema.field("train_size").type):
        sizes = table["train_size"].to_pylist()
        columns["train_size"] = pa.array([None if v is None or v != v or v < 1 else int(v)
                                          for v in sizes], pa.int64())
        columns["train_fraction"] = pa.array([v if v is not None and 0 < v < 1 else None
                                              for v in sizes], pa.float64())
    arrays = []
    for field in schema:
        if field.name in columns:
            arrays.append(columns[field.name])
        elif field.name in table.column_names:
            arrays.append(table[field.name].cast(field.type))
        else:
            arrays.append(pa.nulls(len(table), field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def read_one(path: Path, schema: pa.Schema) -> pa.Table | None:
    """One store file, or None (with a warning naming it) when it cannot be read: one damaged
    file must not hide every other result."""
    try:
        try:
            return ds.dataset(str(path), schema=schema, format="parquet").to_table()
        except pa.ArrowInvalid:  # written by an older version: convert what it holds
            return conform(pq.read_table(path), schema)
    except (OSError, pa.ArrowException) as e:
        warn_unreadable(path, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return None


_WARNED: set[str] = set()  # unreadable files this process has named already


def warn_unreadable(path: str | os.PathLike, why: str = "") -> None:
    """Name an unreadable store file, once per process: a command that reads a table
    several times (``store check``, a sweep's plan) would otherwise repeat the line."""
    if str(path) in _WARNED:
        return
    _WARNED.add(str(path))
    log.warning("skipping unreadable results file %s%s; delete or restore it", path,
                f" ({why})" if why else "")
