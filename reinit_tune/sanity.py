"""Results that look like results but are not: groups of runs that all sit at the dev set's
majority-class rate (the model predicts one class for everything) or whose scores do not
vary at all across seeds. The sweep summary and the report both say so.

A group is the runs of one configuration that differ only in their seed. A trial row knows
its task's majority-class score on the dev split (``majority_score``, from the dev labels);
rows written before that column existed are checked for zero variance only.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from reinit_tune import store

TOLERANCE = 1e-9


def _group_key(config_json: str) -> str:
    config = json.loads(config_json)
    config.pop("seed", None)
    return json.dumps(config, sort_keys=True)


def _size(row) -> str:
    """The configured train size of a stored row, as text: its fraction, count or "full"."""
    size = store.stored_size(row)
    return "full" if size is None else f"{size:g}"


def degenerate_groups(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (seeds pooled) whose ok runs all score the majority-class
    rate, or (two runs or more) all score the same: experiment, task, train_size, model,
    runs, score, majority_score, why."""
    columns = ["experiment", "task", "train_size", "model", "runs", "score",
               "majority_score", "why"]
    ok = trials[trials["status"] == "ok"] if "status" in trials else trials
    if ok.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for _, group in ok.groupby(ok["config_json"].map(_group_key), sort=False):
        scores = group["score"].to_numpy(dtype=np.float64)
        majority = group["majority_score"].dropna() if "majority_score" in group else []
        first = group.iloc[0]
        why = None
        if len(majority) and np.all(np.abs(scores - float(majority.iloc[0])) < TOLERANCE):
            why = "majority"
        elif len(scores) > 1 and np.ptp(scores) < TOLERANCE:
            why = "zero variance"
        if why:
            rows.append({"experiment": first["experiment"], "task": first["task"],
                         "train_size": _size(first), "model": first["model"],
                         "runs": len(scores), "score": float(scores[0]),
                         "majority_score": float(majority.iloc[0]) if len(majority) else None,
                         "why": why})
    return pd.DataFrame(rows, columns=columns)


def warnings(trials: pd.DataFrame) -> list[str]:
    """Degenerate groups in words, one line per (experiment, task, train size)."""
    groups = degenerate_groups(trials)
    lines = []
    sizes = pd.Series([_size(r) for r in trials.to_dict("records")], index=trials.index,
                      dtype=object)
    for (experiment, task, size, why), sub in groups.groupby(
            ["experiment", "task", "train_size", "why"], sort=True):
        total = sum(1 for key in {_group_key(c) for c in trials.loc[
            (trials["experiment"] == experiment) & (trials["task"] == task)
            & (sizes == size) & (trials["status"] == "ok"), "config_json"]})
        runs = int(sub["runs"].sum())
        if why == "majority":
            lines.append(
                f"{experiment} {task} (train size {size}): {len(sub)} of {total} "
                f"configurations ({runs} runs) score exactly the dev majority-class rate "
                f"{sub['majority_score'].iloc[0]:.4f}: the models predict one class; train "
                "longer, on more data, or with another learning rate")
        else:
            lines.append(
                f"{experiment} {task} (train size {size}): {len(sub)} of {total} "
                f"configurations have the same score in all their runs ({runs} runs): the "
                "seeds changed nothing; check that training ran")
    return lines
