"""Where a task's splits come from: local Parquet files or its hub dataset (``TaskSource``).

Local data lives in ``<dir>/<task>/<split>.parquet`` or ``<dir>/glue/<task>/<split>.parquet``
(the Hugging Face schema of the task's hub dataset: ``nyu-mll/glue``, ``rajpurkar/squad_v2``),
with ``<dir>`` from ``--data-dir`` or ``REINIT_TUNE_DATA``; without one, splits come from
``datasets.load_dataset`` of the task's hub dataset. A ``TaskSource`` is that lookup done once
for one task: its registry entry, and each split's local file or the hub. It reads row counts
from Parquet footers (the ``subset`` note of a file that holds part of the official split)
and fingerprints the files a trial saw (``identity``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyarrow.parquet as pq

from reinit_tune import env
from reinit_tune.env import DATA_ENV
from reinit_tune.errors import DataNotFoundError, InputError
from reinit_tune.tasks import Task, get_task

log = logging.getLogger("reinit_tune")

resolve_data_dir = env.data_dir


def _local_path(root: Path, task: str, split: str) -> Path:
    candidates = [root / task / f"{split}.parquet", root / "glue" / task / f"{split}.parquet"]
    return next((c for c in candidates if c.is_file()), candidates[0])


@dataclass(frozen=True)
class TaskSource:
    """One task's splits as found: its registry entry (``spec``) and, per split of
    ``spec.splits``, the local file where it is (or would be), or None (``paths``) when the
    splits come from the hub."""

    spec: Task
    root: Path | None
    paths: tuple[Path, ...] | None

    @classmethod
    def find(cls, task: str | Task, data_dir: str | os.PathLike | None = None) -> TaskSource:
        """``task``'s splits in ``data_dir`` (else ``$REINIT_TUNE_DATA``, else the hub)."""
        spec = task if isinstance(task, Task) else get_task(task)
        root = resolve_data_dir(data_dir)
        paths = None if root is None else tuple(_local_path(root, spec.name, s)
                                                for s in spec.splits)
        return cls(spec, root, paths)

    @property
    def task(self) -> str:
        return self.spec.name

    @property
    def is_local(self) -> bool:
        return self.paths is not None

    def path(self, split: str) -> Path | None:
        """Where a local split is (or would be); None when splits come from the hub."""
        if self.root is None:
            return None
        if split in self.spec.splits:
            return self.paths[self.spec.splits.index(split)]
        return _local_path(self.root, self.task, split)

    def check_split(self, split: str) -> None:
        if split not in self.spec.splits:
            raise InputError(f"split: {split!r} of {self.task}; allowed: "
                             f"{list(self.spec.splits)}")

    def missing(self, split: str, where: str) -> DataNotFoundError:
        dataset, name = self.spec.hub
        task = self.task
        if self.root is not None and not self.root.is_dir():  # the data folder itself is wrong
            where = (f"the data folder {self.root} is a file, not a folder" if self.root.exists()
                     else f"the data folder {self.root} does not exist")
        return DataNotFoundError(
            f"{task}/{split} not found ({where}). Provide it either way: (1) a local folder "
            f"laid out as <dir>/{task}/{split}.parquet (or <dir>/glue/{task}/{split}.parquet) "
            f"passed with --data-dir or the {DATA_ENV} environment variable (e.g. "
            f"{DATA_ENV}=../shared/data), or (2) internet access to the Hugging Face hub "
            f"dataset {dataset!r}{f' ({name})' if name else ''}."
        )

    def load(self, split: str):
        """The raw ``datasets.Dataset`` of one split."""
        import datasets

        self.check_split(split)
        path = self.path(split)
        if path is not None:
            if not path.is_file():
                raise self.missing(split, f"no file {path}")
            return datasets.Dataset.from_parquet(str(path))
        dataset, name = self.spec.hub
        try:
            return datasets.load_dataset(dataset, name, split=split)
        except Exception as e:  # offline or hub error: say how to provide the data instead
            raise self.missing(split, f"hub load failed: {type(e).__name__}") from e

    def footer(self, split: str) -> tuple[int, int | None] | None:
        """(rows, official rows) of a split's local file (``_footer``); None when the split
        comes from the hub."""
        self.check_split(split)
        path = self.path(split)
        if path is None:
            return None
        if not path.is_file():
            raise self.missing(split, f"no file {path}")
        return _footer(path)

    def rows(self, split: str) -> int:
        """Row count of a split without loading it (Parquet footer, or the official size)."""
        footer = self.footer(split)
        return self.spec.rows[split] if footer is None else footer[0]

    def official_rows(self, split: str) -> int:
        """Rows of the official split, what a fractional size is a share of: a local file's
        ``subset`` metadata (``{"rows": 9999, "official_rows": 104743}``), else the file's
        own row count; the registry's split size when splits come from the hub."""
        footer = self.footer(split)
        if footer is None:
            return self.spec.rows[split]
        rows, official = footer
        return max(rows, official or rows)

    def where(self, split: str) -> str:
        """The file of a split, or the hub dataset, as messages name it."""
        path = self.path(split)
        return str(path) if path is not None else f"the hub's {self.spec.hub[0]}"

    def identity_parts(self) -> list[tuple[str, Path | None, str]]:
        """Per split: (fingerprint part, local file or None, hub dataset as sources name
        it)."""
        parts = []
        for split in self.spec.splits:
            path = self.path(split)
            if path is None:
                dataset, config = self.spec.hub
                parts.append((f"{self.task}/{split}=hub:{dataset}/{config or ''}", None,
                              f"{dataset}{f' ({config})' if config else ''}"))
            elif not path.is_file():
                raise self.missing(split, f"no file {path}")
            else:
                parts.append((f"{self.task}/{split}={file_sha256(path)}", path, ""))
        return parts


def identity(*sources: TaskSource) -> tuple[str, str]:
    """(fingerprint, source) of the splits of ``sources``: sha256 over each local split
    file's content hash, and the files' paths; for the hub, its dataset names (the hub pins
    no revision here, so its fingerprint says only which dataset). A row's fingerprint tells
    whether a rerun would see the same data; it is never part of the trial id."""
    parts, local, hub = [], [], []
    for source in sources:
        for part, path, dataset in source.identity_parts():
            parts.append(part)
            if path is None:
                hub.append(dataset)
            else:
                local.append(path)
    fingerprint = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    found = []
    if local:
        root = Path(os.path.commonpath([p.parent for p in local]))
        found.append(f"{root}: " + ", ".join(str(p.relative_to(root)) for p in local))
    if hub:
        found.append("hub: " + ", ".join(dict.fromkeys(hub)))
    return fingerprint, "; ".join(found)


def data_identity(task: str, data_dir: str | os.PathLike | None = None,
                  intermediate_task: str | None = None) -> tuple[str, str]:
    """(fingerprint, source) of the data a trial of ``task`` trains and is scored on (and of
    its ``intermediate_task``'s splits): ``identity`` of their sources."""
    return identity(*(TaskSource.find(name, data_dir)
                      for name in dict.fromkeys(filter(None, (intermediate_task, task)))))


def local_split_path(task: str, split: str, data_dir=None) -> Path | None:
    """Where a local split is (or would be): ``<dir>/<task>/`` or ``<dir>/glue/<task>/``;
    None when splits come from the hub."""
    return TaskSource.find(task, data_dir).path(split)


def load_split(task: str, split: str, data_dir: str | os.PathLike | None = None):
    """The raw ``datasets.Dataset`` of one split of ``task``."""
    return TaskSource.find(task, data_dir).load(split)


def split_rows(task: str, split: str, data_dir: str | os.PathLike | None = None) -> int:
    """Row count of a split without loading it (Parquet footer, or the official size)."""
    return TaskSource.find(task, data_dir).rows(split)


def official_rows(task: str, split: str, data_dir: str | os.PathLike | None = None) -> int:
    """Rows of the official split, what a fractional size is a share of
    (``TaskSource.official_rows``)."""
    return TaskSource.find(task, data_dir).official_rows(split)


def _footer(path: Path) -> tuple[int, int | None]:
    """(rows, official rows from the ``subset`` note or None) of a Parquet file, read from its
    footer once per file version: a grid asks this for every config."""
    stat = path.stat()
    return _footer_of(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=128)
def _footer_of(path: str, mtime_ns: int, size: int) -> tuple[int, int | None]:
    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"{path} is not a readable Parquet file ({e}); replace it or fix "
                         "--data-dir") from None
    note = (meta.metadata or {}).get(b"subset")
    official = None
    if note:
        try:
            official = int(json.loads(note)["official_rows"])
        except (ValueError, KeyError, TypeError):  # a note without a count: trust the rows
            log.warning("%s: unreadable 'subset' metadata %r; using its row count", path, note)
    return meta.num_rows, official


@lru_cache(maxsize=256)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, computed once per file version (path, mtime, size): every
    trial of a sweep asks for the same few files."""
    stat = os.stat(path)
    return _file_sha256(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)
