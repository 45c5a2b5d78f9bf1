"""Compaction: folding a table's per-trial files into a few large compacted files (in size
tiers, as a log-structured store merges), one compaction at a time per store, such that a
kill at any step loses no row and every reader sees each row once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reinit_tune.store.files import (
    COMPACTED_PREFIX,
    Vanished,
    compacted_name,
    listing,
    next_stamp,
)
from reinit_tune.store.reader import FILENAME, Problems, connect, first_wins, read_files
from reinit_tune.store.tables import TABLES

log = logging.getLogger("reinit_tune")


@contextlib.contextmanager
def _compaction_lock(root: Path):
    """One compaction at a time per store (another one running: yield False)."""
    import fcntl

    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".compact.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _identity(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


# A compaction's plan, written before its compacted file goes into place and removed once
# its sources are gone: what ``finish_compactions`` completes after a kill.
_MANIFEST = ".compaction-{stamp}.json"


def _write_manifest(folder: Path, target: Path, sources: dict[str, tuple | None]) -> Path:
    """Record that ``target`` (not yet in place) replaces ``sources`` (path -> identity)."""
    manifest = folder / _MANIFEST.format(stamp=f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}")
    tmp = folder / f"{manifest.name}.{uuid.uuid4().hex}.tmp"
    tmp.write_text(json.dumps({"target": target.name, "sources": {
        Path(f).name: list(i) for f, i in sources.items() if i is not None}}))
    os.replace(tmp, manifest)
    return manifest


def _complete(folder: Path, manifest: Path) -> int:
    """Carry out a manifest: where its compacted file is in place, delete the sources it
    merged that are unchanged since (a source rewritten since is a later attempt: it stays
    and wins); then the manifest goes. Returns the files deleted."""
    try:
        plan = json.loads(manifest.read_text())
    except (OSError, ValueError):
        manifest.unlink(missing_ok=True)
        return 0
    deleted = 0
    if (folder / plan.get("target", "")).is_file():
        for name, identity in plan.get("sources", {}).items():
            path = str(folder / name)
            if _identity(path) == tuple(identity):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    deleted += 1
    manifest.unlink(missing_ok=True)
    return deleted


def finish_compactions(results_dir: str | os.PathLike) -> int:
    """Complete what a killed compaction left: the sources of every compacted file that went
    into place are deleted (readers saw each row once meanwhile; plain SQL saw them twice),
    and its temporary files go. Every command that writes the store calls this first.
    Returns the files deleted; skipped (0) while another compaction runs."""
    root = Path(results_dir)
    if not root.is_dir():
        return 0
    deleted = 0
    with _compaction_lock(root) as locked:
        if not locked:
            return 0
        for name in TABLES:
            folder = root / name
            if not folder.is_dir():
                continue
            for manifest in sorted(folder.glob(".compaction-*.json")):
                deleted += _complete(folder, manifest)
            # no compaction runs now (we hold the lock): its temporaries are stale
            for tmp in (*folder.glob(f".{COMPACTED_PREFIX}*.tmp"),
                        *folder.glob(".compaction-*.tmp")):
                tmp.unlink(missing_ok=True)
                deleted += 1
    return deleted


def small_file_count(results_dir: str | os.PathLike) -> int:
    """How many per-trial (not yet compacted) files the store's tables hold."""
    return sum(len(listing(Path(results_dir) / name)[0]) for name in TABLES)


def compact(results_dir: str | os.PathLike, tables: tuple[str, ...] = tuple(TABLES), *,
            batch_files: int = 50_000, min_files: int = 2) -> dict[str, int]:
    """Merge each table's per-trial files into compacted files; return how many per-trial
    files each table merged.

    Per-trial files stay the write-ahead format: every sweep writes them, atomically, and
    compaction only folds them into ``compacted-<ns>-<id>-n<trials>.parquet`` files in the
    same folder with the table's full current schema (so ``SELECT ... FROM
    'trials/*.parquet'``, pandas and pyarrow read a compacted store as before). Per batch of
    files, in this order:

    1. note each file's identity (inode, size, mtime), then read it (bad files are left in
       place, still reported by ``check_store``: merging must never lose a row);
    2. write the compacted file under a hidden temporary name, fsync, rename it into place;
    3. record in a hidden manifest which files the compacted one replaces, with their
       identities; then delete the merged per-trial files whose identity is unchanged (one
       rewritten since step 1, a later attempt of its trial, stays and wins), then the
       manifest. A kill after the rename leaves the manifest: ``finish_compactions``, which
       every command that writes the store runs first, completes the deletions.

    Readers resolve overlaps by key (``reader.read_table``): a per-trial file's rows win over
    compacted rows of the same trial, a newer compacted file over an older one. Between
    steps 2 and 3 both copies exist and readers see the per-trial one; after 3 the
    compacted one; a kill anywhere leaves either a hidden temporary file (skipped by
    readers, removed by ``remove_partial_files``) or rows in both places: nothing is lost
    and every row reads once. A reader whose listing raced a deletion lists again
    (``files.listing``, ``files.Vanished``). Only one compaction runs at a time (a lock file);
    another returns at once with nothing merged.

    Plain readers (DuckDB or pandas over ``trials/*.parquet``) apply no such rule: they see
    a trial twice while a compaction is between steps 2 and 3, and when a trial compacted
    earlier ran again (its new row, per-trial or compacted later, beside its old compacted
    one). ``load_trials`` and ``sql.connect``'s views resolve both by file rank (a later
    compaction's stamp is always greater: ``files.next_stamp``), never by a row's clock.
    """
    root = Path(results_dir)
    merged = dict.fromkeys(tables, 0)
    finish_compactions(root)
    with _compaction_lock(root) as locked:
        if not locked:
            log.warning("another compaction of %s is running: skipped", root)
            return merged
        con = connect()
        for name in tables:
            spec = TABLES[name]
            key, schema = spec.key, spec.schema
            small, _ = listing(root / name)
            for start in range(0, len(small) if len(small) >= min_files else 0,
                               batch_files):
                batch = small[start:start + batch_files]
                before = {f: _identity(f) for f in batch}
                problems = Problems()
                try:
                    table = read_files(con, batch, spec, list(schema.names), problems,
                                       per_trial=True)
                except Vanished:  # another writer or compaction is at work: next time
                    continue
                bad = {str(p) for p in (*problems.bad_files, *problems.strays)}
                bad |= {str(p) for p, _, _ in problems.malformed}
                if bad:
                    table = table.filter(pc.invert(pc.is_in(
                        table[FILENAME], value_set=pa.array(sorted(bad), pa.string()))))
                done = [f for f in batch if f not in bad and before[f] is not None]
                if not done:
                    continue
                table = table.select(schema.names).cast(schema).sort_by([(key, "ascending")])
                path = root / name / compacted_name(next_stamp(root / name),
                                                    len(pc.unique(table[key])))
                manifest = _write_manifest(root / name, path, {f: before[f] for f in done})
                _write_compacted(table, path)
                _complete(root / name, manifest)
                merged[name] += len(done)
            _merge_compacted(con, root, name)
    return merged


# Past this many compacted files in a table, ``compact`` merges the newest of them (below).
MERGE_COMPACTED_AFTER = 8


def _merge_compacted(con, root: Path, name: str) -> int:
    """Merge a table's newest compacted files into one when it has more than
    ``MERGE_COMPACTED_AFTER``; return how many were merged.

    Every sweep past ``COMPACT_AFTER_FILES`` adds a compacted file; left alone, a store built
    by hundreds of sweeps would be read file by file and keep every superseded row of a rerun
    trial. The merged run is the newest files going back while the next older file is no
    larger than twice what the run holds (size tiers, as a log-structured store merges):
    files keep growing geometrically, so a table has about log2(rows) of them and no merge
    rewrites the whole store each time. The run is the newest, so the merged file, stamped
    now, takes its place in the precedence order (``reader.read_table``); within it a newer file's
    rows win (``first_wins``), so readers see exactly what they saw before. A kill before
    the rename leaves a hidden temporary file; after it, rows in both the merged file and its
    sources, where the merged (newer) one wins with the same rows. A table with an unreadable,
    foreign or malformed compacted file is not merged: that file is left for ``check_store``
    to report, and no row of it may be shadowed or lost."""
    spec = TABLES[name]
    key, schema = spec.key, spec.schema
    _, compacted = listing(root / name)
    if len(compacted) <= MERGE_COMPACTED_AFTER:
        return 0
    sizes = [os.path.getsize(f) for f in compacted]
    run = [len(compacted) - 1]  # positions, newest first
    while run[-1] > 0 and sizes[run[-1] - 1] <= 2 * sum(sizes[i] for i in run):
        run.append(run[-1] - 1)
    if len(run) < 2:
        return 0
    problems = Problems()
    try:
        parts = [read_files(con, [compacted[i]], spec, list(schema.names), problems)
                 for i in run]
    except Vanished:
        return 0
    if problems.unreadable or problems.foreign or problems.malformed:
        log.warning("not merging the compacted %s files of %s: some cannot be read whole "
                    "(reinit-tune store check names them)", name, root)
        return 0
    table = first_wins(parts, key).select(schema.names).cast(schema)
    path = root / name / compacted_name(next_stamp(root / name), len(pc.unique(table[key])))
    manifest = _write_manifest(root / name, path,
                               {compacted[i]: _identity(compacted[i]) for i in run})
    _write_compacted(table, path)
    _complete(root / name, manifest)
    log.info("merged %d compacted %s files of %s into %s", len(run), name, root, path.name)
    return len(run)


def _write_compacted(table: pa.Table, path: Path) -> None:
    # Durable before the per-trial files go: fsync the file, rename, fsync the folder.
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        pq.write_table(table, tmp, row_group_size=100_000, write_page_checksum=True)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Past this many per-trial files, the end of a sweep compacts the store: reading 2,000 small
# files costs about a second, a compacted store a tenth of that at any size.
COMPACT_AFTER_FILES = 2000


def compact_if_many(results_dir: str | os.PathLike,
                    threshold: int | None = None) -> dict[str, int] | None:
    """``compact`` the store when it holds more than ``threshold`` (``COMPACT_AFTER_FILES``)
    per-trial files; what it merged, or None when it was left as it is."""
    limit = COMPACT_AFTER_FILES if threshold is None else threshold
    if small_file_count(results_dir) <= limit:
        return None
    began = time.perf_counter()
    merged = compact(results_dir, min_files=1)
    log.info("compacted %d per-trial files of %s in %.1f s", sum(merged.values()),
             results_dir, time.perf_counter() - began)
    return merged
