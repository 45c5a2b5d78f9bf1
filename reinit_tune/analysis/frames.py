"""The results store as analysis-ready DataFrames.

Columns of the later experiment families (head reinitialization, permutations, variants,
probing, sequential finetuning) read as null from rows written before those columns existed;
they are filled with their neutral value, so every figure function works on any store. List columns
come back from Parquet as arrays; here they become tuples, which compare and group.

``split`` is the rule every figure and table follows: a point averages replicates (seeds) of
one configuration, never runs that differ in anything else.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reinit_tune import sanity, store
from reinit_tune.analysis.stats import size_label, size_labels
from reinit_tune.config import INTRODUCED_AS, LABEL_FIELDS, REPLICATE_FIELDS, TrialConfig
from reinit_tune.model.fingerprint import short as short_fingerprint
from reinit_tune.wording import counted

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


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


# A TrialConfig field stored in several columns (train_size: a count or a fraction).
_COLUMNS_OF = {"train_size": ("train_size", "train_fraction")}
# Row columns outside TrialConfig that still make two runs different experiments: the data
# a run trained and was scored on, and the weights it started from.
DATA_FIELDS = ("data_fingerprint", "model_fingerprint")
# A null config field reads as what rows written before the field existed ran.
_DEFAULTS = {**{f.name: f.default for f in dataclasses.fields(TrialConfig)}, **INTRODUCED_AS}


def identity_fields() -> list[str]:
    """The fields whose values make two runs different experiments: every ``TrialConfig``
    field but the replicate and label fields, plus the data fingerprint."""
    skip = {*REPLICATE_FIELDS, *LABEL_FIELDS}
    return [f.name for f in dataclasses.fields(TrialConfig) if f.name not in skip] + list(
        DATA_FIELDS)


def _value(row: dict, field: str):
    """A field's value as a hashable key; a null config field reads as its default (rows
    written before the field existed ran the default)."""
    if field in _COLUMNS_OF:
        return tuple(_plain(row.get(c)) for c in _COLUMNS_OF[field])
    value = row.get(field)
    if _missing(value):
        value = _DEFAULTS.get(field)
        if callable(value) or isinstance(value, dataclasses._MISSING_TYPE):
            value = None
    return _plain(value)


def _plain(value):
    """A hashable Python value: None for nulls, tuples for arrays, no numpy scalars."""
    if _missing(value):
        return None
    value = _tuple(value)
    return value.item() if isinstance(value, np.generic) else value


def _short_model(model: str) -> str:
    return str(model).rstrip("/").split("/")[-1]


def model_names(models: Iterable[str]) -> dict[str, str]:
    """Each model's label: its last path part, or as many trailing parts as tell it apart
    from the others (``a/tiny`` and ``b/tiny``, not two "tiny")."""
    parts = {m: str(m).rstrip("/").split("/") for m in models}
    names = {}
    for model, mine in parts.items():
        n = 1
        while n < len(mine) and any(other[-n:] == mine[-n:] for o, other in parts.items()
                                    if o != model):
            n += 1
        names[model] = "/".join(mine[-n:])
    return names


def _fill_model_fingerprints(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows written before models were fingerprinted read as the fingerprint their model's
    newer rows have, where those all have one: an older row is never a different model
    for lack of a record. Where the model's rows hold several fingerprints, they stay
    unrecorded (and apart)."""
    if "model_fingerprint" not in rows or "model" not in rows \
            or not rows["model_fingerprint"].isna().any():
        return rows
    known = rows.dropna(subset=["model_fingerprint"]).groupby("model")["model_fingerprint"]
    single = known.unique()
    single = {m: v[0] for m, v in single.items() if len(v) == 1}
    if not single:
        return rows
    rows = rows.copy()
    fill = rows["model"].map(single)
    rows["model_fingerprint"] = rows["model_fingerprint"].astype(object).where(
        rows["model_fingerprint"].notna(), fill)
    return rows


def _describe(field: str, value, row: dict) -> str:
    """A split value in the words a legend or title uses ("lr 5e-05", "10 epochs")."""
    words = {
        "model": lambda v: _short_model(v),
        "task": lambda v: str(v),
        "train_size": lambda _: f"{size_label(store.stored_size(row))} examples",
        "lr": lambda v: f"lr {v:g}",
        "batch_size": lambda v: f"batch {v}",
        "epochs": lambda v: counted(v, "epoch"),
        "max_seq_length": lambda v: f"max {v} tokens",
        "precision": lambda v: str(v),
        "length_grouped": lambda v: "length-grouped" if v else "uniform batches",
        "init_scheme": lambda v: f"init {v}",
        "schedule": lambda v: f"{v} schedule",
        "warmup_ratio": lambda v: f"warmup {v:g}",
        "dropout": lambda v: f"{v} dropout masks",
        "preserve_layernorm": lambda v: "LayerNorm preserved" if v else "LayerNorm redrawn",
        "reinit_lr_multiplier": lambda v: f"LR x{v:g} on reinit. layers",
        "intermediate_task": lambda v: f"after {v}" if v else "direct",
        "probe_layer": lambda v: "finetuned" if v is None else f"probe of layer {v}",
        "data_fingerprint": lambda v: f"data {str(v)[:8]}" if v else "data unrecorded",
        "model_fingerprint": lambda v: f"weights {short_fingerprint(v)}",
    }
    if field in words:
        return words[field](value)
    return f"{field.replace('_', ' ')} {value}"


def split(rows: pd.DataFrame, series: Iterable[str], x: Iterable[str] = ()) -> pd.DataFrame:
    """The one rule every figure, table and summary follows: a point averages replicates
    only.

    ``series`` are the fields that pick a figure's panels and lines (e.g. task and
    train_size for 003 Fig. 1), ``x`` those that place a point along a line (reinit_layers).
    Every other identity field (``identity_fields``) that takes two values inside one series
    (one line of one panel) would be averaged into a point or joined into a line: it is
    split. Each row gets a ``setting`` label naming its values of the split fields ("lr
    5e-05, 10 epochs"), and ``task`` becomes "task · setting", so every figure, which draws
    one panel per task label, draws each setting apart; the plain task stays in
    ``task_name``. Models are always split when there are several. A field that differs
    only between series (003's 5 epochs at 500 examples, 3 at 5k) splits nothing
    (``line_notes`` names its values for a panel's legend).

    Identical runs stored under two experiment names (reused rows) count once.
    ``attrs["split"]`` lists the split fields, ``attrs["per_series"]`` the others that vary.
    """
    rows = _fill_model_fingerprints(rows.copy())
    series, x = list(series), set(x)
    if len(rows):
        # one run per configuration and seed: a reused row repeats its source's numbers
        key = _run_key(rows)
        reused = (rows["reused_from"].notna().to_numpy() if "reused_from" in rows
                  else np.zeros(len(rows), dtype=bool))
        order = np.argsort(reused, kind="stable")
        first = ~pd.DataFrame(key[order]).duplicated().to_numpy()
        rows = rows.iloc[np.sort(order[first])].reset_index(drop=True)
    group = (_row_ids(np.column_stack([_codes(rows, f) for f in series]))
             if series and len(rows) else np.zeros(len(rows), dtype=np.int64))
    fields, per_series, codes = [], [], {}
    for f in identity_fields():
        if f in series or f in x or not (f in rows or f in _COLUMNS_OF):
            continue
        codes[f] = _codes(rows, f)
        if len(np.unique(codes[f])) < 2:
            continue
        within = pd.DataFrame({"group": group, "value": codes[f]}).groupby("group")["value"]
        mixed = f == "model" or bool((within.nunique() > 1).any())
        (fields if mixed else per_series).append(f)
    if "model" in fields:  # the model first: it is the largest difference
        fields.remove("model")
        fields.insert(0, "model")
    settings = _settings(rows, fields, codes)
    rows["setting"] = pd.Series(settings, index=rows.index, dtype=object)
    rows["task_name"] = rows["task"].astype(object) if "task" in rows else None
    if "task" in rows:
        rows["task"] = pd.Series([f"{t} · {s}" if s else t for t, s in zip(
            rows["task_name"], settings, strict=True)], index=rows.index, dtype=object)
    rows.attrs["split"] = fields
    rows.attrs["per_series"] = per_series
    return rows


def _codes(rows: pd.DataFrame, field: str) -> np.ndarray:
    """One integer per row, equal where ``_value`` of the field is equal: a column at a time
    (a Python loop over rows cost ~0.1 ms per row and figure, seconds at 10^5 trials)."""
    columns = _COLUMNS_OF.get(field, (field,))
    default = _DEFAULTS.get(field) if field not in _COLUMNS_OF else None
    if callable(default) or isinstance(default, dataclasses._MISSING_TYPE):
        default = None
    parts = []
    for column in columns:
        if column not in rows:
            parts.append(np.zeros(len(rows), dtype=np.int64))
            continue
        values = rows[column]
        if default is not None:  # a null config field reads as its default
            values = values.astype(object).where(values.notna(), default)
        try:  # every null is one value (None, NaN, NA), as ``_plain`` reads them
            parts.append(pd.factorize(values, use_na_sentinel=False)[0])
        except TypeError:  # arrays (a frame ``normalize`` did not see): as tuples
            plain = pd.Series([_plain(v) for v in values], index=values.index, dtype=object)
            parts.append(pd.factorize(plain, use_na_sentinel=False)[0])
    return parts[0] if len(parts) == 1 else _row_ids(np.column_stack(parts))


def _run_key(rows: pd.DataFrame) -> np.ndarray:
    return np.column_stack([_codes(rows, f) for f in (*identity_fields(), *REPLICATE_FIELDS)])


def run_ids(rows: pd.DataFrame) -> np.ndarray:
    """One integer per row of ``rows`` (trials), equal where two rows are one run: the same
    identity fields and seed, whatever experiment name they were stored under (what
    ``split`` keeps one row of)."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    return _row_ids(_run_key(_fill_model_fingerprints(rows.copy())))


def _row_ids(codes: np.ndarray) -> np.ndarray:
    """One integer per row of a 2-D array of codes, equal where the rows are equal."""
    return np.unique(codes, axis=0, return_inverse=True)[1].reshape(-1)


def _settings(rows: pd.DataFrame, fields: list[str], codes: dict) -> list[str]:
    """Each row's ``setting`` label: its values of the split ``fields``, described once per
    distinct combination."""
    if not fields or not len(rows):
        return [""] * len(rows)
    combination = _row_ids(np.column_stack([codes[f] for f in fields]))
    firsts = pd.Series(np.arange(len(rows))).groupby(combination).first()
    read = [c for f in fields for c in (*_COLUMNS_OF.get(f, (f,)), "train_fraction",
                                        "train_size") if c in rows]
    records = rows[list(dict.fromkeys(read))].iloc[firsts.to_numpy()].to_dict("records")
    labels = dict(zip(firsts.index, _labels(records, fields), strict=True))
    return [labels[c] for c in combination]


def _labels(records: list[dict], fields: list[str]) -> list[str]:
    names = model_names({r["model"] for r in records if not _missing(r.get("model"))}) \
        if "model" in fields else {}
    return [", ".join(names.get(r.get("model"), "") if f == "model" and names
                      else _describe(f, _value(r, f), r) for f in fields) for r in records]


def line_notes(rows: pd.DataFrame) -> pd.Series:
    """For the rows of one panel: each row's values of the fields that differ between the
    panel's lines (``split``'s ``per_series``, e.g. 5 epochs at 500 examples, 3 at 5k), for
    its legend entry; empty where nothing differs inside the panel."""
    records = rows.to_dict("records")
    fields = [f for f in rows.attrs.get("per_series", [])
              if len({_value(r, f) for r in records}) > 1]
    return pd.Series(_labels(records, fields), index=rows.index, dtype=object)


def split_note(fields: Iterable[str], per_series: Iterable[str] = ()) -> str:
    """The caption's sentence on what was kept apart (``split``'s two lists)."""
    fields, per_series = list(fields), list(per_series)
    if fields:
        text = ("Runs that differ in " + ", ".join(f.replace("_", " ") for f in fields)
                + " are never averaged together: each value has its own panel, labelled by it; "
                "a point averages runs that differ only in their seed.")
    elif per_series:
        text = "A point averages runs that differ only in their seed."
    else:
        return ("Every point averages runs that differ only in their seed (nothing else "
                "varies among these rows).")
    if per_series:
        names = ", ".join(f.replace("_", " ") for f in per_series)
        text += (f" {names[0].upper()}{names[1:]} differ only from one line or panel to "
                 "another (each holds one value), as the grid prescribes.")
    return text


def models_of(rows: pd.DataFrame) -> str:
    """'model: NAME' (or 'models: A, B') for a figure's title."""
    models = sorted(model_names(set(rows["model"].dropna())).values()) if "model" in rows \
        else []
    if not models:
        return ""
    return ("model: " if len(models) == 1 else "models: ") + ", ".join(models)


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

    @functools.cached_property
    def degenerate(self) -> pd.DataFrame:
        """``sanity.degenerate_groups`` of the trials, computed once (the page and the
        printed warnings both read it)."""
        return sanity.degenerate_groups(self.trials)


def load(results_dir: str | os.PathLike) -> Store:
    return Store(normalize(store.load_trials(results_dir)), store.load_epochs(results_dir),
                 store.load_similarity(results_dir), store.load_steps(results_dir),
                 store.load_pairs(results_dir))
