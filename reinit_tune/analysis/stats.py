"""Summary statistics for figures: means with 95% confidence intervals from the t
distribution (003 App. B), computed per group of trials."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from reinit_tune import store
from reinit_tune.metrics import metric_range


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and the two ends of its t-distribution confidence interval.

    With one value the interval is undefined and both ends are NaN (plotted without a bar).
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return (float("nan"),) * 3
    mean = float(x.mean())
    if x.size < 2:
        return mean, float("nan"), float("nan")
    sem = float(stats.sem(x))
    if sem == 0:
        return mean, mean, mean
    low, high = stats.t.interval(confidence, x.size - 1, loc=mean, scale=sem)
    return mean, float(low), float(high)


def summarize(df: pd.DataFrame, by: list[str], value: str = "score") -> pd.DataFrame:
    """Per group of ``by``: n, mean, std and the 95% t-interval of ``value``.

    Where ``value`` is a score and ``metric`` one of ``by``, the interval is clipped to what
    the metric can reach (accuracy cannot pass 1: a t-interval of two runs often does), and
    ``ci_clipped`` says where that happened so that captions can say so."""
    rows = []
    bounded = value == "score" and "metric" in by
    for key, group in df.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        named = dict(zip(by, key, strict=True))
        values = group[value].to_numpy(dtype=np.float64)
        mean, low, high = mean_ci(values)
        clipped = False
        if bounded and not np.isnan(low):
            lo, hi = metric_range(named["metric"])
            clipped = bool(low < lo or high > hi)
            low, high = max(low, lo), min(high, hi)
        rows.append({**named, "n": int(np.sum(~np.isnan(values))),
                     "mean": mean, "std": float(np.nanstd(values, ddof=1)) if len(values) > 1
                     else float("nan"), "ci_low": low, "ci_high": high,
                     "ci_clipped": clipped})
    return pd.DataFrame(rows, columns=[*by, "n", "mean", "std", "ci_low", "ci_high",
                                       "ci_clipped"])


def size_labels(df: pd.DataFrame) -> pd.Series:
    """``size_label`` of every stored row of ``df``; a run on a local subset of the official
    split (``--allow-subset``) says so, with the examples it really trained on ("10%
    (subset: 9999)")."""
    return pd.Series([size_label(store.stored_size(r)) + _subset_note(r)
                      for r in df.to_dict("records")], index=df.index, dtype=object)


def _subset_note(row: dict) -> str:
    if not store.ran_on_subset(row):
        return ""
    examples = row.get("train_examples")
    used = "" if examples is None or pd.isna(examples) else f": {int(examples)}"
    return f" (subset{used})"


def size_label(train_size: float | None) -> str:
    """'500', '10%', '0.6%' or 'full' for a stored ``train_size``: every distinct fraction
    gets a distinct label (000 runs QNLI at both 1% and 0.6%)."""
    if train_size is None or (isinstance(train_size, float) and np.isnan(train_size)):
        return "full"
    if train_size < 1:
        return f"{100 * train_size:.4g}%"
    return f"{int(train_size)}"
