"""Results that look like results but are not, per configuration (the runs of one trial
configuration that differ only in their seed): runs that score exactly the dev set's
majority-class rate (the model predicts one class for everything), or on a two-class task
scored by accuracy exactly 1 - that rate (it predicts the minority class for everything), and
configurations whose runs do not vary at all across seeds. The sweep summary and the report
both list them, one configuration at a time, with how many of its runs are affected.

A trial row knows its task's majority-class score on the dev split (``majority_score``, from
the dev labels); rows written before that column existed are checked for zero variance only.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from reinit_tune import store
from reinit_tune.config import REPLICATE_FIELDS
from reinit_tune.errors import InputError
from reinit_tune.tasks import SCORE_TOLERANCE as TOLERANCE
from reinit_tune.tasks import get_task
from reinit_tune.wording import counted

# Scores are ratios of counts computed in float64: equal rates agree far below this.
# The sweep summary names at most this many configurations; the report lists every one.
SUMMARY_LINES = 20

COLUMNS = ["experiment", "task", "train_size", "model", "configuration", "runs",
           "majority_runs", "minority_runs", "scores", "majority_score", "why",
           "configurations"]


def _config(config_json: str) -> dict:
    """A configuration without its replicate fields: the same rule as every figure's
    (``reinit_tune.config.REPLICATE_FIELDS``)."""
    config = json.loads(config_json)
    for name in REPLICATE_FIELDS:
        config.pop(name, None)
    return config


def _group_key(config_json: str) -> str:
    return json.dumps(_config(config_json), sort_keys=True)


def _size(row) -> str:
    """The configured train size of a stored row, as text: its fraction, count or "full"."""
    size = store.stored_size(row)
    return "full" if size is None else f"{size:g}"


def _value(value) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _describe(config: dict, varying: list[str]) -> str:
    """What sets ``config`` apart from the other configurations of its experiment, task,
    train size and model: its values of the fields that differ among them."""
    return "; ".join(f"{name} {_value(config.get(name))}" for name in varying) or "all runs"


def _minority_rate_counts(task: str, metric) -> bool:
    """Whether predicting the minority class for everything scores 1 - majority: accuracy
    on a two-class task (MCC and correlations give 0 either way, F1 gives 0)."""
    try:
        spec = get_task(task)
    except InputError:
        return False
    metric = metric if isinstance(metric, str) and metric else spec.primary
    return metric == "accuracy" and spec.num_labels == 2


def degenerate_groups(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (its seeds together) with a run at the majority-class rate
    (or, see the module docstring, at 1 - it), or with two runs or more that all score the
    same: experiment, task, train_size, model, configuration (the fields that set it apart),
    runs, majority_runs, minority_runs, scores (its distinct scores), majority_score, why
    ("one class" or "zero variance"), configurations (how many its experiment, task, train
    size and model have)."""
    ok = trials[trials["status"] == "ok"] if "status" in trials else trials
    if ok.empty:
        return pd.DataFrame(columns=COLUMNS)
    sizes = ok[[c for c in ("train_fraction", "train_size") if c in ok]]
    ok = ok.assign(_key=ok["config_json"].map(_group_key),
                   _size=[_size(r) for r in sizes.to_dict("records")])
    candidates = _candidates(ok)
    rows = []
    for _, family in ok.groupby(["experiment", "task", "_size", "model"], sort=True):
        if not family["_key"].isin(candidates).any():
            continue
        configs = {key: _config(blob) for key, blob in zip(family["_key"],
                                                            family["config_json"],
                                                            strict=True)}
        names = sorted({n for c in configs.values() for n in c})
        varying = [n for n in names
                   if len({json.dumps(c.get(n), sort_keys=True) for c in configs.values()}) > 1]
        for key, group in family[family["_key"].isin(candidates)].groupby("_key", sort=True):
            row = _check(group)
            if row is not None:
                first = group.iloc[0]
                rows.append({"experiment": first["experiment"], "task": first["task"],
                             "train_size": first["_size"], "model": first["model"],
                             "configuration": _describe(configs[key], varying), **row,
                             "configurations": len(configs)})
    return pd.DataFrame(rows, columns=COLUMNS)


def _candidates(ok: pd.DataFrame) -> set[str]:
    """The configurations ``_check`` can flag, found column-wise (a check per configuration
    costs ~0.5 ms, minutes at 10^5 trials): a score at its majority rate or 1 - it, all
    scores equal, or majority rates that differ within the configuration (then ``_check``
    decides)."""
    score = ok["score"].astype(float)
    if "majority_score" in ok:
        majority = ok["majority_score"].astype(float)
        near = ((score - majority).abs() < TOLERANCE) | ((score - (1 - majority)).abs()
                                                         < TOLERANCE)
    else:
        majority, near = pd.Series(np.nan, index=ok.index), pd.Series(False, index=ok.index)
    frame = pd.DataFrame({"key": ok["_key"], "score": score, "majority": majority,
                          "near": near})
    groups = frame.groupby("key", sort=False)
    spread = groups["score"].max() - groups["score"].min()
    flagged = (groups["near"].any() | ((groups["score"].count() > 1) & (spread < TOLERANCE))
               | (groups["majority"].nunique() > 1)
               | (groups["majority"].count().between(1, groups.size() - 1)))
    return set(flagged[flagged].index)


def _check(group: pd.DataFrame) -> dict | None:
    """The findings of one configuration's runs, or None when they look like results."""
    scores = group["score"].to_numpy(dtype=np.float64)
    scores = scores[~np.isnan(scores)]
    if not len(scores):
        return None
    majority = (group["majority_score"].dropna() if "majority_score" in group
                else pd.Series(dtype=float))
    first = group.iloc[0]
    at_majority = at_minority = 0
    rate = None
    if len(majority):
        rate = float(majority.iloc[0])
        at_majority = int(np.sum(np.abs(scores - rate) < TOLERANCE))
        if _minority_rate_counts(first["task"], first.get("metric")) and \
                abs(rate - 0.5) > TOLERANCE:  # at 0.5 the two rates are one
            at_minority = int(np.sum(np.abs(scores - (1 - rate)) < TOLERANCE))
    if at_majority or at_minority:
        why = "one class"
    elif len(scores) > 1 and np.ptp(scores) < TOLERANCE:
        why = "zero variance"
    else:
        return None
    distinct = sorted({round(float(s), 6) for s in scores})
    return {"runs": len(scores), "majority_runs": at_majority, "minority_runs": at_minority,
            "scores": ", ".join(f"{s:.4f}" for s in distinct[:6])
                      + (f" (+{len(distinct) - 6})" if len(distinct) > 6 else ""),
            "majority_score": rate, "why": why}


def describe(row: dict) -> str:
    """What is wrong with one flagged configuration (a row of ``degenerate_groups``)."""
    runs = row["runs"]
    if row["why"] == "zero variance":
        return f"all {counted(runs, 'run')} score {row['scores']}"
    found = []
    if row["majority_runs"]:
        found.append(f"{row['majority_runs']} of {runs} runs score exactly the dev "
                     f"majority-class rate {row['majority_score']:.4f}")
    if row["minority_runs"]:
        found.append(f"{row['minority_runs']} of {runs} runs score exactly "
                     f"{1 - row['majority_score']:.4f}, 1 - the dev majority-class rate "
                     f"{row['majority_score']:.4f} (the minority class for everything)")
    return "; ".join(found)


ADVICE = {"one class": "models that predict one class for everything; train longer, on more "
                       "data, or with another learning rate",
          "zero variance": "the seeds changed nothing; check that training ran"}


def warnings(trials: pd.DataFrame, limit: int | None = SUMMARY_LINES,
             groups: pd.DataFrame | None = None) -> list[str]:
    """The flagged configurations in words: per experiment, task, train size and model a line
    that counts them, then one indented line per configuration; past ``limit`` configuration
    lines (None: no limit) one more line counts the rest. ``groups``: ``degenerate_groups``
    of ``trials`` where the caller has it already."""
    groups = degenerate_groups(trials) if groups is None else groups
    lines: list[str] = []
    shown = 0
    for (experiment, task, size, model, why), sub in groups.groupby(
            ["experiment", "task", "train_size", "model", "why"], sort=True):
        flagged = int(sub["majority_runs"].sum() + sub["minority_runs"].sum()
                      if why == "one class" else sub["runs"].sum())
        rate = sub["majority_score"].iloc[0]
        lines.append(f"{experiment} {task} (train size {size}, {model}): {len(sub)} of "
                     f"{counted(int(sub['configurations'].iloc[0]), 'configuration')}, "
                     f"{counted(flagged, 'run')}"
                     + (f" at the dev majority-class rate {rate:.4f} or 1 - it"
                        if why == "one class" else "") + f": {ADVICE[why]}")
        for row in sub.to_dict("records"):
            if limit is None or shown < limit:
                lines.append(f"  {row['configuration']}: {describe(row)}")
            shown += 1
    if limit is not None and shown > limit:
        lines.append(f"... and {shown - limit} more configurations like these "
                     "(`reinit-tune report` lists every one)")
    return lines
