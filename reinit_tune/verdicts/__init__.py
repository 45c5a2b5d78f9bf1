"""Claim verdicts: does each finding of the papers hold on the store's own runs?

``catalog`` declares the claims of claims.md (source, quote, the cells and statistic that
decide it, the published number); ``engine.evaluate`` decides each on a store's trials,
one verdict per task, size and protocol (never pooling runs that differ in more than the
seed), with its 95% interval, the runs per cell, the published value beside it, and, when
undecided, what is missing or how many seeds would decide it; ``table`` prints them.
"""

from reinit_tune.verdicts.catalog import BY_ID, CLAIMS
from reinit_tune.verdicts.engine import VerdictRow, evaluate

__all__ = ["BY_ID", "CLAIMS", "VerdictRow", "evaluate"]
