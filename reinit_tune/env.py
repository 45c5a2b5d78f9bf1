"""The environment variables reinit-tune reads, and the defaults they fall back to.

- ``REINIT_TUNE_DATA``: a folder of local datasets, ``<dir>/<task>/<split>.parquet``
  (``--data-dir`` wins); unset, splits come from the Hugging Face hub.
- ``REINIT_TUNE_CACHE``: tokenized splits and cached intermediate models of sequential
  transfer (default ``~/.cache/reinit_tune``); point it at shared storage on a cluster to
  share intermediate models between nodes.
- ``REINIT_TUNE_STORAGE``: Tune's ``storage_path`` for checkpoints and Tune's own logs
  (``--storage`` wins; default ``<results>/_tune``).
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "REINIT_TUNE_DATA"
HUB = "hub:"  # as a data folder: the hub's datasets, whatever $REINIT_TUNE_DATA says
CACHE_ENV = "REINIT_TUNE_CACHE"
STORAGE_ENV = "REINIT_TUNE_STORAGE"


def cache_dir() -> Path:
    """Where tokenized splits and intermediate models are cached on this machine."""
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "reinit_tune"))


def data_dir(explicit: str | os.PathLike | None = None) -> Path | None:
    """``explicit`` if given, else ``$REINIT_TUNE_DATA``, else None (load from the hub);
    ``HUB`` always means the hub."""
    if explicit == HUB:
        return None
    chosen = explicit if explicit not in (None, "") else os.environ.get(DATA_ENV) or None
    return Path(chosen).expanduser().resolve() if chosen else None


def storage(explicit: str | None, results_dir: Path) -> str:
    """Tune's storage path: ``explicit``, else ``$REINIT_TUNE_STORAGE``, else
    ``<results_dir>/_tune``; local paths are made absolute, URIs kept as they are."""
    chosen = explicit or os.environ.get(STORAGE_ENV) or str(results_dir / "_tune")
    return chosen if "://" in chosen else str(Path(chosen).expanduser().resolve())
