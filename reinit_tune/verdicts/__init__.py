"""Claim verdicts: does each finding of the papers hold on the store's own runs?

``catalog`` declares the claims of claims.md (source, quote, the cells and statistic that
decide it, the published number); ``engine.evaluate`` decides each on a store's trials,
one verdict per task, size and protocol (never pooling runs that differ in more than the
seed), with its 95% interval, the runs per cell, the published value beside it, and, when
undecided, what is missing or how many seeds would decide it; ``table`` prints them.

The names below load on first use: ``reinit_tune.verdicts.depth`` (the layer and block
mapping the localized family builds its grid with) must not pull in the engine, whose
imports reach torch and Ray, when `reinit-tune families` only lists grids.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["BY_ID", "CLAIMS", "VerdictRow", "evaluate"]

_WHERE = {"BY_ID": "catalog", "CLAIMS": "catalog", "VerdictRow": "engine",
          "evaluate": "engine"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
