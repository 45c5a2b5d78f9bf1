"""The statistics that claim verdicts and adaptive seeding are computed from.

Pure functions over arrays of per-seed scores (no store, no pandas): claims.md §0.4's
building blocks ([LIN] contrasts, [BOOT] the seed-cluster bootstrap, [CORR], [VAR], [TREND])
in ``contrasts``, ``bootstrap`` and ``association``, every result an ``Interval``; §0.5's
verdict rules in ``rules``. Each is tested against scipy or statsmodels.
"""

from reinit_tune.inference.association import correlation, trend, variance_ratio
from reinit_tune.inference.bootstrap import cluster_bootstrap
from reinit_tune.inference.contrasts import (
    paired_contrast,
    seeds_to_decide,
    share_weights,
    stein_seeds,
    unpaired_contrast,
)
from reinit_tune.inference.interval import Interval
from reinit_tune.inference.rules import (
    Verdict,
    across_tasks,
    bonferroni_level,
    conjunction,
    directional,
    equivalence,
    holm_rejects,
    non_superiority,
    threshold,
)

__all__ = [
    "Interval", "Verdict", "across_tasks", "bonferroni_level", "cluster_bootstrap",
    "conjunction", "correlation", "directional", "equivalence", "holm_rejects",
    "non_superiority", "paired_contrast", "seeds_to_decide", "share_weights", "stein_seeds",
    "threshold", "trend", "unpaired_contrast", "variance_ratio",
]
