"""The store's runs as groups a verdict may use (claims.md §0.6).

A group is one task at one train size under one protocol: rows that differ in anything but
the seed and the surgery a claim compares are never in one group. The pooling rule is the
figures' own (``reinit_tune.analysis.frames.split``), so a verdict and the figure that
shows its data always read the same runs; identical runs stored under two family names
count once. Inside a group a cell's runs are indexed by seed (permutations: by order), so
cells pair by seed where every cell has the same seeds; the data fingerprint is part of the
protocol, so paired runs trained on the same subset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from reinit_tune.analysis import frames
from reinit_tune.inference import collapse
from reinit_tune.verdicts.conditions import KEY, Condition, Heads, Permuted, surgery_columns

# What a claim compares inside a group: never a reason to keep runs apart.
SURGERY_FIELDS = ("reinit_layers", "reinit_heads", "layer_order", "preserve_layernorm",
                  "reinit_lr_multiplier", "probe_layer", "intermediate_task")
EMPTY = pd.Series([], dtype=np.float64)
# How the group's runs were trained, as the sweep flags that reproduce it (a command that adds
# seeds to a group must train them alike, whatever the defaults are where it runs).
RUN_FLAGS = ("lr", "batch_size", "epochs", "max_seq_length", "precision")
# The columns a verdict reads (``store.load_trials(columns=...)``): what it computes on, and
# every field that makes two runs different experiments (``frames.identity_fields``), so a
# field added to the config keeps its runs apart here as in every figure.
COLUMNS = tuple(dict.fromkeys((
    "trial_id", "status", "experiment", "task", "train_size", "train_fraction",
    "train_examples", "seed", "score", "metric", "model", "num_layers", "data_subset",
    "reused_from", "majority_score", "data_source", *SURGERY_FIELDS,
    *frames.identity_fields())))


@dataclass(frozen=True)
class Group:
    """One task × size × protocol's runs, with what tells it apart from the store's other
    groups (``differs``: the split fields and their values). ``surgeries`` maps each
    surgery key (``conditions.surgery_key``) to its runs' seeds and, per value (``score``
    and the per-trial similarity summaries, ``reinit_tune.verdicts.layers``), their
    values in seed order, one per seed."""

    task: str
    size: str
    examples: float
    setting: str
    model: str
    num_layers: int
    metric: str
    differs: tuple[tuple[str, str], ...]
    surgeries: dict[tuple, tuple[np.ndarray, dict[str, np.ndarray]]] = field(
        compare=False, repr=False)
    # what predicting the dev majority class scores on the group's metric (its runs'
    # ``majority_score``): the chance level of a probe; None where no run recorded it
    chance: float | None = None
    # ``RUN_FLAGS`` and their values in the group's runs
    run: tuple[tuple[str, str], ...] = ()
    # the families whose sweeps wrote the group's runs (the store's ``experiment``)
    experiments: frozenset[str] = frozenset()
    # the local data folder every run of the group read (``--data-dir``); None where they
    # read the hub, or folders that differ
    data_dir: str | None = None
    _cells: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def unseen_collapse(self) -> bool:
        """Whether a collapse mode no run has shown may move its cells
        (``collapse.possible``); never for probes: a linear classifier on frozen features,
        not a finetuning run."""
        return collapse.possible(self.examples, self.chance) and \
            self.experiments != {"probing"}

    @property
    def protocol(self) -> tuple[str, str, int]:
        """What must match for two groups (two sizes, two tasks) to be compared."""
        return (self.setting, self.model, self.num_layers)

    def has(self, condition: Condition) -> bool:
        if isinstance(condition, Permuted):
            return any(Permuted.matches(key) for key in self.surgeries)
        if isinstance(condition, Heads):
            return bool(self._heads(condition))
        return condition.key(self.num_layers) in self.surgeries

    def _heads(self, condition: Heads) -> list[tuple]:
        layers = condition.indices(self.num_layers)
        return [k for k in self.surgeries if k[0] == "head" and k[1] in layers]

    def cell(self, condition: Condition, value: str = "score") -> pd.Series:
        """The cell's ``value`` (its runs' scores, or a per-trial similarity summary), one
        per unit: per seed, or per permutation (its seeds averaged first, indexed by the
        order written out). Runs that did not measure ``value`` are left out (all of them,
        where no run of the store has it)."""
        if (condition, value) not in self._cells:
            self._cells[condition, value] = self._cell(condition, value)
        return self._cells[condition, value]

    def _cell(self, condition: Condition, value: str) -> pd.Series:
        # every surgery of a store holds the same values: one tells whether any run has it
        if not self.surgeries or value not in next(iter(self.surgeries.values()))[1]:
            return EMPTY
        if isinstance(condition, Permuted):
            orders = {",".join(map(str, key[1])): float(np.nanmean(values[value]))
                      for key, (_, values) in self.surgeries.items()
                      if Permuted.matches(key) and np.isfinite(values[value]).any()}
            return pd.Series(orders, dtype=np.float64).sort_index() if orders else EMPTY
        if isinstance(condition, Heads):  # per seed, the mean over the layers' heads
            per_head = []
            for key in self._heads(condition):
                seeds, values = self.surgeries[key]
                keep = np.isfinite(values[value])
                per_head.append(pd.Series(values[value][keep], index=seeds[keep]))
            if not per_head:
                return EMPTY
            # only seeds that ran every head: a seed missing heads would mean other heads
            table = pd.concat(per_head, axis=1).dropna()
            return table.mean(axis=1) if len(table) else EMPTY
        found = self.surgeries.get(condition.key(self.num_layers))
        if found is None:
            return EMPTY
        seeds, values = found
        keep = np.isfinite(values[value])
        return pd.Series(values[value][keep], index=seeds[keep]) if keep.any() else EMPTY

    def __str__(self) -> str:
        return f"{self.size} for {self.task}" + (f" ({self.setting})" if self.setting else "")


def groups(trials: pd.DataFrame, values: tuple[str, ...] = ("score",)) -> list[Group]:
    """Every group of the ok runs of ``trials`` (a frame of ``store.load_trials``, with
    any further per-trial ``values`` as columns), built column-wise: a store of 10^5 mixed
    runs has some 10^4 groups."""
    rows = _prepared(trials)
    if rows is None:
        return []
    fields = rows.attrs["fields"]
    keys = ["task_name", "size", "setting", "model", "num_layers"]
    heads = rows.groupby("_group", sort=True).agg(
        **{k: (k, "first") for k in dict.fromkeys([*keys, "metric", *fields, *RUN_FLAGS])},
        examples=("train_examples", "median"), chance=("majority_score", "median"))
    surgeries = _surgeries(rows, values)
    written = rows.groupby("_group", sort=True)["experiment"].agg(
        lambda e: frozenset(map(str, e.dropna().unique())))
    folders = _data_dirs(rows)
    return [Group(str(h.task_name), str(h.size), float(h.examples), str(h.setting or ""),
                  str(h.model), int(h.num_layers), str(h.metric),
                  tuple((f, _text(getattr(h, f))) for f in fields),
                  surgeries.get(g, {}),
                  None if pd.isna(h.chance) else float(h.chance),
                  tuple((f, _text(getattr(h, f))) for f in RUN_FLAGS
                        if _text(getattr(h, f)) != "default"),
                  written.get(g, frozenset()), folders.get(g))
            for g, h in zip(heads.index, heads.itertuples(index=False), strict=True)]


def _data_dirs(rows: pd.DataFrame) -> dict[int, str]:
    """Per group, the ``--data-dir`` that finds the splits all its runs read, where they
    read one local folder. A run's ``data_source`` is what ``data.source.identity`` writes:
    "ROOT: task/split.parquet, ..." for local files (ROOT the task folder itself for one
    task), "hub: ..." for the hub; the folder is the one above a split file's task folder.
    A group with a run of the hub, a run that recorded none, or two folders has none. Each
    distinct source is parsed once: a store of 10^5 runs holds a handful."""
    def folder(source: str) -> str | None:
        if not source or source.startswith("hub:") or "; hub: " in source:
            return None
        root, _, files = source.rpartition(": ")
        return str((Path(root) / files.split(", ")[0]).parent.parent)

    sources = rows["data_source"]
    parsed = sources.map({s: folder(s) for s in sources.dropna().unique()})
    by_group = parsed.groupby(rows["_group"], sort=True)
    one = by_group.count().eq(by_group.size()) & by_group.nunique().eq(1)
    return {int(g): str(f) for g, f in by_group.first()[one].items()}


def _prepared(trials: pd.DataFrame) -> pd.DataFrame | None:
    """The ok, scored runs of ``trials`` split as the figures split them, each with its
    group (``_group``), its surgery key (``conditions.KEY``) and the split fields
    (``attrs["fields"]``); None where there is none."""
    rows = trials[trials["status"] == "ok"] if "status" in trials else trials
    rows = rows[pd.notna(rows["score"]) & pd.notna(rows["num_layers"])]
    if rows.empty:
        return None
    for column in COLUMNS:
        if column not in rows:
            rows = rows.assign(**{column: None})
    rows = rows.reset_index(drop=True)
    rows["majority_score"] = pd.to_numeric(rows["majority_score"], errors="coerce")
    if "size" not in rows:  # a frame of ``frames.load`` (the report's) is normalized already
        rows = frames.normalize(rows)
    rows = frames.split(rows, series=["task", "train_size"], x=SURGERY_FIELDS)
    fields = [f for f in rows.attrs.get("split", []) if f in rows]
    rows = surgery_columns(rows)
    keys = ["task_name", "size", "setting", "model", "num_layers"]
    rows["_group"] = rows.groupby(keys, sort=True, dropna=False).ngroup()
    rows.attrs["fields"] = fields
    return rows


def _surgeries(rows: pd.DataFrame, values: tuple[str, ...]
               ) -> dict[int, dict[tuple, tuple[np.ndarray, dict[str, np.ndarray]]]]:
    """Per group, per surgery key: the seeds and each value's mean per seed, in one
    groupby."""
    codes: dict[tuple, int] = {}
    key_code = np.array([-1 if k is None else codes.setdefault(k, len(codes))
                         for k in rows[KEY]], dtype=np.int64)
    frame = pd.DataFrame({"g": rows["_group"].to_numpy(), "k": key_code,
                          "seed": rows["seed"].to_numpy(np.int64),
                          **{v: rows[v].to_numpy(np.float64) for v in values}})[key_code >= 0]
    if frame.empty:  # only runs with other surgery (probes, heads): no cell of a claim
        return {}
    means = frame.groupby(["g", "k", "seed"], sort=True)[list(values)].mean().reset_index()
    by_code = list(codes)
    g, k, seeds = means["g"].to_numpy(), means["k"].to_numpy(), means["seed"].to_numpy()
    columns = {v: means[v].to_numpy() for v in values}
    starts = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (k[1:] != k[:-1])])
    ends = np.r_[starts[1:], len(g)]
    found: dict[int, dict] = {}
    for a, b in zip(starts, ends, strict=True):
        found.setdefault(int(g[a]), {})[by_code[k[a]]] = (
            seeds[a:b], {v: c[a:b] for v, c in columns.items()})
    return found


def _text(value) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "default"
    return str(value)
