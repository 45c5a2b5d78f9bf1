"""Per-layer similarity between finetuned models and their pre-finetuning state.

From the ``similarity`` table (trials run with ``--similarity``), joined to the trials:
- by train size (000 Fig. 3): one panel per task and measure, one line per train size;
- by task (002 Figs 1–3): one panel per measure, one line per task (largest train size).
Measures: weight distance of ``output.dense`` (Frobenius, 000 §4.5; spectral), attention
JS divergence (002 Fig. 1), SVCCA distance (002 Fig. 2), linear CKA, and the last-layer SVCCA
distance after restoring one layer (002 Fig. 3). Points average trials (n stated, 95%
t-interval). Lines of reinitialized models (k < L) are labelled with their k.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reinit_tune.analysis import frames
from reinit_tune.analysis.plotting import (
    caption,
    mean_line,
    n_label,
    panel_tasks,
    panel_title,
    panels,
    pyplot,
    save,
    style,
    suptitle,
)
from reinit_tune.analysis.stats import summarize
from reinit_tune.errors import NoResultsError

MEASURES = {
    "w_output_fro": "weight distance ‖ΔW‖_F, output.dense",
    "w_output_spectral": "weight distance ‖ΔW‖₂, output.dense",
    "w_output_spectral_pretrained": "‖W_base − W_FT‖₂ of output.dense (000 §4.5)",
    "attention_js": "attention JS divergence",
    "svcca_distance": "SVCCA distance",
    "cka": "linear CKA",
    "replaced_svcca": "last-layer SVCCA, layer restored",
}
LAYER = "layer (0 = embeddings)"
KEYS = ["task", "size", "k", "num_layers", "measure", "layer"]
# Lines per task, train size and k; anything else that varies (model, lr, ...) is its own line.
SERIES = ("task", "train_size", "reinit_layers")


def similarity_rows(trials: pd.DataFrame, experiment: str | None = None) -> pd.DataFrame:
    ok = frames.normalize(frames.ok(trials, *([experiment] if experiment else [])))
    return frames.split(ok, SERIES)


def similarity_table(trials: pd.DataFrame, similarity: pd.DataFrame,
                     experiment: str | None = None) -> pd.DataFrame:
    """Per task, train size, k, measure and layer: n trials, mean and 95% t-interval."""
    empty = pd.DataFrame(columns=[*KEYS, "train_examples", "n", "mean", "std", "ci_low",
                                  "ci_high"])
    if similarity.empty:  # nothing to join: no need to split every trial
        return empty
    ok = similarity_rows(trials, experiment)
    ok["k"] = ok["num_pretrained_layers"]
    joined = similarity.merge(ok[["trial_id", "task", "size", "k", "num_layers",
                                  "train_examples"]], on="trial_id")
    present = [m for m in MEASURES if m in joined and joined[m].notna().any()]
    if joined.empty or not present:
        return empty
    long = joined.melt(id_vars=["task", "size", "k", "num_layers", "layer", "train_examples"],
                       value_vars=present, var_name="measure").dropna(subset=["value"])
    table = summarize(long, KEYS, value="value")
    examples = long.groupby(["task", "size"])["train_examples"].median()
    table = table.join(examples, on=["task", "size"])
    return table.sort_values(["measure", "task", "train_examples", "k", "layer"]).reset_index(
        drop=True)


def _line_label(size: str, k: int, num_layers: int) -> str:
    return f"{size} ex." if k == num_layers else f"{size} ex., k={k}"


def plot_similarity_by_size(trials: pd.DataFrame, similarity: pd.DataFrame,
                            out_dir: str | Path, name: str = "similarity_by_size", *,
                            experiment: str | None = None, measures: tuple[str, ...] = ()):
    """000 Fig. 3: per layer, one line per train size (``measures``: only those)."""
    table = similarity_table(trials, similarity, experiment)
    if measures:
        table = table[table["measure"].isin(measures)]
    if table.empty:
        raise NoResultsError("no similarity rows in the store (run a sweep with --similarity)")
    plt = pyplot()
    measures = [m for m in MEASURES if m in set(table["measure"])]
    tasks = panel_tasks(table.sort_values("task", kind="stable"))
    fig, axes = panels(len(tasks), rows=len(measures), height=2.8)
    for col, task in enumerate(tasks):
        for row, measure in enumerate(measures):
            ax = axes[row, col]
            sub = table[(table["task"] == task) & (table["measure"] == measure)]
            groups = sub.groupby(["train_examples", "size", "k", "num_layers"], sort=True)
            shades = np.linspace(0.4, 0.95, max(len(groups), 1))
            for shade, ((_, size, k, n_layers), line) in zip(shades, groups, strict=False):
                mean_line(ax, line, "layer", label=_line_label(size, k, n_layers),
                          color=plt.cm.Blues(shade))
            style(ax, xlabel=LAYER, title=panel_title(task) if row == 0 else None, legend=6)
            ax.set_ylabel(MEASURES[measure], fontsize=7)
    rows = similarity_rows(trials, experiment)
    suptitle(fig, "Finetuned vs pre-finetuning model, per layer, by train size", rows, 10)
    table.attrs["caption"] = caption(table, "the similarity rows of "
                                     f"`{experiment or 'every'}` trials, one per layer", rows)
    return fig, save(fig, out_dir, name), table


def plot_similarity_by_task(trials: pd.DataFrame, similarity: pd.DataFrame,
                            out_dir: str | Path, name: str = "similarity_by_task", *,
                            experiment: str | None = None):
    """One line per task at its largest train size, full-model trials where there are any."""
    table = similarity_table(trials, similarity, experiment)
    if table.empty:
        raise NoResultsError("no similarity rows in the store (run a sweep with --similarity)")
    full = table[table["k"] == table["num_layers"]]
    table = full if not full.empty else table
    largest = table.groupby("task")["train_examples"].transform("max")
    table = table[table["train_examples"] == largest]
    table = table[table["k"] == table.groupby("task")["k"].transform("max")]
    measures = [m for m in MEASURES if m in set(table["measure"])]
    fig, axes = panels(len(measures), width=3.6, height=3.2)
    for ax, measure in zip(axes[0], measures, strict=True):
        for task, line in table[table["measure"] == measure].groupby("task"):
            size = line["size"].iloc[0]
            mean_line(ax, line, "layer", label=f"{panel_title(task)} ({size} ex.)")
        style(ax, xlabel=LAYER, legend=6)
        ax.set_title(MEASURES[measure], fontsize=8)
    rows = similarity_rows(trials, experiment)
    suptitle(fig, "Finetuned vs pre-finetuning model, per layer, by task", rows, 10)
    table = table.reset_index(drop=True)
    table.attrs["caption"] = caption(table, "the similarity rows of "
                                     f"`{experiment or 'every'}` trials at each task's largest "
                                     "train size, full-model trials where there are any", rows)
    return fig, save(fig, out_dir, name), table


def plot_pair(rows: pd.DataFrame, out_dir: str | Path, name: str, title: str):
    """Per-layer curves of every measure for one comparison of two models (one value per
    layer: n=1, computed over ``rows['examples']`` dev examples)."""
    measures = [m for m in MEASURES if m in rows and rows[m].notna().any()]
    fig, axes = panels(len(measures), width=3.4, height=3.0)
    for ax, measure in zip(axes[0], measures, strict=True):
        line = rows[["layer", measure]].dropna()
        ax.plot(line["layer"], line[measure], marker="o", ms=4)
        style(ax, xlabel=LAYER)
        ax.set_title(MEASURES[measure], fontsize=8)
    examples = int(rows["examples"].iloc[0])
    fig.suptitle(f"{title} ({n_label([1])} comparison over {examples} dev examples)",
                 fontsize=9)
    return fig, save(fig, out_dir, name), rows



CONSISTENCY_MEASURES = ("attention_js", "svcca_distance")


def consistency_table(trials: pd.DataFrame, pairs: pd.DataFrame,
                      experiment: str | None = None) -> pd.DataFrame:
    """Per kind of pair (seeds, tasks), what was compared (a task, or a pair of tasks),
    measure and layer: n pairs, mean and 95% t-interval."""
    keys = ["kind", "compared", "measure", "layer"]
    if pairs.empty:
        return pd.DataFrame(columns=[*keys, "n", "mean", "std", "ci_low", "ci_high"])
    df = pairs if experiment is None else pairs[pairs["experiment"] == experiment]
    df = df.copy()
    df["compared"] = [a.upper() if kind == "seeds" else f"{a.upper()}-{b.upper()}"
                      for kind, a, b in zip(df["kind"], df["task_a"], df["task_b"], strict=True)]
    long = df.melt(id_vars=["kind", "compared", "layer"], value_vars=list(CONSISTENCY_MEASURES),
                   var_name="measure").dropna(subset=["value"])
    if long.empty:
        return pd.DataFrame(columns=[*keys, "n", "mean", "std", "ci_low", "ci_high"])
    return summarize(long, keys, value="value")


def plot_consistency(trials: pd.DataFrame, pairs: pd.DataFrame, out_dir: str | Path,
                     name: str = "consistency", *, experiment: str | None = None):
    """002 Figs 4-7: per layer, the attention JS divergence and SVCCA distance between two
    seeds' models of one task (top row) and between two tasks' models (bottom row)."""
    table = consistency_table(trials, pairs, experiment)
    if table.empty:
        raise NoResultsError("no pairs of finetuned models in the store (run the sweep with "
                             "--save-model, then reinit-tune consistency)")
    kinds = [k for k in ("seeds", "tasks") if k in set(table["kind"])]
    fig, axes = panels(len(CONSISTENCY_MEASURES), rows=len(kinds), width=4.0, height=3.0)
    for row, kind in enumerate(kinds):
        for col, measure in enumerate(CONSISTENCY_MEASURES):
            ax = axes[row, col]
            sub = table[(table["kind"] == kind) & (table["measure"] == measure)]
            for compared, line in sub.groupby("compared", sort=True):
                mean_line(ax, line, "layer", label=compared)
            style(ax, xlabel=LAYER, legend=6,
                  title=f"{'two seeds' if kind == 'seeds' else 'two tasks'}: "
                        f"{MEASURES[measure]}")
    fig.suptitle("Consistency of finetuning, per layer (002 §5)", fontsize=10)
    table.attrs["caption"] = caption(table, "the pairs table (reinit-tune consistency): two "
                                     "seeds' models of a task, two tasks' models of a seed")
    return fig, save(fig, out_dir, name), table
