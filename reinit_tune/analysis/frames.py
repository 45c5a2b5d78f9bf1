"""The results store as analysis-ready DataFrames.

Columns of the later experiment families (head reinitialization, permutations, variants,
probing, sequential finetuning) read as null from rows written before those columns existed;
they are filled with their neutral value, so every figure function works on any store. List columns
come back from Parquet as arrays; here they become tuples, which compare and group.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reinit_tune import store
from reinit_tune.analysis.stats import size_labels

# column -> value meaning "this trial does not use the feature"
NEUTRAL = {
    "reinit_heads": (),
    "layer_order": None,
    "preserve_layernorm": False,
    "reinit_lr_multiplier": 1.0,
    "init_scheme": None,
    "probe_layer": None,
    "intermediate_task": None,
}


def _tuple(value):
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return tuple(_tuple(v) for v in value)
    return value


def normalize(trials: pd.DataFrame) -> pd.DataFrame:
    """Neutral values for null later-family columns; lists → tuples; a ``size`` label
    column ('500', '10%', 'full')."""
    df = trials.copy()
    for column, neutral in NEUTRAL.items():
        if column not in df:
            df[column] = [neutral] * len(df)
    for column in ("reinit_layers", "reinit_heads", "layer_order"):
        df[column] = [_tuple(v) for v in df[column]]
    df["reinit_layers"] = [v or () for v in df["reinit_layers"]]
    df["reinit_heads"] = [v or () for v in df["reinit_heads"]]
    df["reinit_lr_multiplier"] = df["reinit_lr_multiplier"].fillna(1.0).astype(float)
    df["preserve_layernorm"] = df["preserve_layernorm"].fillna(False).astype(bool)
    df["size"] = size_labels(df)
    return df


def by_model(rows: pd.DataFrame, models: set[str] | None = None) -> pd.DataFrame:
    """``rows`` with the model in the ``task`` label when the figure draws more than one
    model (``models``, default those of ``rows``), so that no figure pools two models' runs
    into one point ("sst2 · bert-base-cased")."""
    models = set(rows["model"]) if models is None else models
    if rows.empty or len(models) < 2:
        return rows
    rows = rows.copy()
    rows["task"] = [f"{t} · {str(m).rstrip('/').split('/')[-1]}"
                    for t, m in zip(rows["task"], rows["model"], strict=True)]
    return rows


def ok(trials: pd.DataFrame, *experiments: str) -> pd.DataFrame:
    """Successful trials of the given experiments (all experiments when none given)."""
    mask = trials["status"] == "ok"
    if experiments:
        mask &= trials["experiment"].isin(experiments)
    return trials[mask].reset_index(drop=True)


@dataclass
class Store:
    """Everything the figures read from one results folder."""

    trials: pd.DataFrame
    epochs: pd.DataFrame
    similarity: pd.DataFrame
    steps: pd.DataFrame
    pairs: pd.DataFrame

    @property
    def experiments(self) -> list[str]:
        return sorted(set(ok(self.trials)["experiment"]))


def load(results_dir: str | os.PathLike) -> Store:
    return Store(normalize(store.load_trials(results_dir)), store.load_epochs(results_dir),
                 store.load_similarity(results_dir), store.load_steps(results_dir),
                 store.load_pairs(results_dir))
