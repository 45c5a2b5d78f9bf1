"""A model's identity by its weights, not its name: what every trial row records as
``model_fingerprint``, as the data a trial saw is recorded as ``data_fingerprint``.

- a local folder (and the embedded model): ``sha256:<hex>`` over the names and contents of
  its files (config, weights, tokenizer; not README or hidden files), computed once per
  version of the folder (each file's path, size and modification time);
- a hub id: ``hub:<repo>@<revision>``, the commit of the snapshot in the local cache
  (``hub:<repo>`` where none is cached yet).

Re-saving a checkpoint at the same path changes its fingerprint; two folders named alike
(``a/tiny``, ``b/tiny``) have different ones. A sweep that finds stored rows of another
fingerprint stops before training (``reinit_tune.sweep.plan``), and figures never average
across fingerprints (``reinit_tune.analysis.frames``).
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from reinit_tune.model.shape import resolve_model

# Files that say nothing about what the model computes.
_SKIPPED = ("README", ".")


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file()
                  and not p.name.startswith(_SKIPPED) and p.suffix != ".md")


@functools.lru_cache(maxsize=32)
def _hash(folder: str, stats: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _, _ in stats:
        digest.update(name.encode() + b"\0")
        with open(os.path.join(folder, name), "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def _hub_revision(repo: str) -> str | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    found = try_to_load_from_cache(repo, "config.json")
    return Path(found).parent.name if isinstance(found, str) else None


def model_fingerprint(model: str) -> str:
    """The fingerprint of ``model`` (a local folder, the embedded model or a hub id)."""
    resolved = resolve_model(model)
    folder = Path(resolved)
    if folder.is_dir():
        stats = tuple((p.name, (s := p.stat()).st_size, s.st_mtime_ns)
                      for p in _files(folder))
        return _hash(str(folder), stats)
    revision = _hub_revision(resolved)
    return f"hub:{resolved}" + (f"@{revision}" if revision else "")


def short(fingerprint: str | None) -> str:
    """A fingerprint in a label: 8 hex digits of a hash, or the hub revision's first 8."""
    if not fingerprint:
        return "unrecorded"
    if fingerprint.startswith("sha256:"):
        return fingerprint[len("sha256:"):][:8]
    repo, _, revision = fingerprint.removeprefix("hub:").partition("@")
    return revision[:8] if revision else repo
