"""The statistics that claim verdicts and adaptive seeding are computed from.

Pure functions over arrays of per-seed scores (no store, no pandas): claims.md §0.4's
building blocks ([LIN] contrasts, [BOOT] the seed-cluster bootstrap, [CORR], [VAR], [TREND])
in ``contrasts``, ``bootstrap`` and ``association``, every result an ``Interval``; §0.5's
verdict rules in ``rules``; runs collapsed to the majority rate and the bound their possible
rates put on a contrast (§0.6) in ``collapse``. Each is tested against scipy or statsmodels.
"""

from importlib import import_module
from typing import Any

# name -> its module; imported on first use (PEP 562), so what imports one light module of
# this package (the sweep command's seed rule) does not pay for scipy
_WHERE = {
    "correlation": "association", "trend": "association", "variance_ratio": "association",
    "cluster_bootstrap": "bootstrap",
    "paired_contrast": "contrasts", "seeds_to_decide": "contrasts",
    "share_weights": "contrasts", "stein_seeds": "contrasts", "unpaired_contrast": "contrasts",
    "Interval": "interval",
    "Verdict": "rules", "across_tasks": "rules", "bonferroni_level": "rules",
    "conjunction": "rules", "directional": "rules", "equivalence": "rules",
    "holm_adjusted": "rules", "holm_rejects": "rules", "non_superiority": "rules",
    "threshold": "rules",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
