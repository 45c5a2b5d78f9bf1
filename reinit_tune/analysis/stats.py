"""Summary statistics for figures: means with 95% confidence intervals from the t
distribution (003 App. B), computed per group of trials."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from reinit_tune import store
from reinit_tune.metrics import metric_range
from reinit_tune.train_size import TrainSize


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
    columns = [*by, "n", "mean", "std", "ci_low", "ci_high", "ci_clipped"]
    if df.empty:
        return pd.DataFrame(columns=columns)
    # column-wise over all groups at once (``mean_ci`` per group cost ~1 ms a group, and
    # a store of 10^5 mixed trials has some 10^4 groups per figure)
    values = df[value].astype(np.float64)
    grouped = values.groupby([df[c] for c in by], sort=True, dropna=False)
    table = pd.DataFrame({"n": grouped.count(), "mean": grouped.mean(),
                          "std": grouped.std(ddof=1)})
    table.index.names = by
    table = table.reset_index()
    n = table["n"].to_numpy()
    sem = table["std"].to_numpy() / np.sqrt(np.maximum(n, 1))
    with np.errstate(invalid="ignore"):
        half = stats.t.ppf(0.975, np.where(n > 1, n - 1, np.nan)) * sem
    half = np.where(sem == 0, 0.0, half)  # every run the same: the interval is the point
    low, high = table["mean"] - half, table["mean"] + half
    table["ci_clipped"] = False
    if value == "score" and "metric" in by and len(table):
        ranges = {m: metric_range(m) for m in table["metric"].unique()}
        lo = table["metric"].map(lambda m: ranges[m][0]).astype(float)
        hi = table["metric"].map(lambda m: ranges[m][1]).astype(float)
        defined = low.notna()
        table["ci_clipped"] = (defined & ((low < lo) | (high > hi))).astype(bool)
        low = low.where(~defined, np.maximum(low, lo))
        high = high.where(~defined, np.minimum(high, hi))
    table["ci_low"], table["ci_high"] = low, high
    table["n"] = table["n"].astype(int)
    return table[columns]


def size_labels(df: pd.DataFrame) -> pd.Series:
    """``size_label`` of every stored row of ``df``; a run on a local subset of the official
    split (``--allow-subset``) says so, with the examples it really trained on ("10%
    (subset: 9999)")."""
    # only the columns a label reads: a record of every column costs memory per row
    read = [c for c in ("train_fraction", "train_size", "data_subset", "train_examples")
            if c in df]
    return pd.Series([size_label(store.stored_size(r)) + _subset_note(r)
                      for r in df[read].to_dict("records")], index=df.index, dtype=object)


def _subset_note(row: dict) -> str:
    if not store.ran_on_subset(row):
        return ""
    examples = row.get("train_examples")
    used = "" if examples is None or pd.isna(examples) else f": {int(examples)}"
    return f" (subset{used})"


def size_label(train_size: float | None) -> str:
    """'500', '10%', '0.6%' or 'full' for a stored ``train_size`` (``TrainSize``)."""
    return TrainSize.stored(train_size).figure_label
