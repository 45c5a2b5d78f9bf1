"""001 Figure 2 (sequential finetuning, Exp. 1): the intermediate × final task matrix.

Rows are final tasks, columns intermediate tasks; a cell is the final task's mean dev score
after finetuning on the intermediate task first. The diagonal holds the baseline: direct
finetuning on the final task (rows with no intermediate task). Cells above their row's
baseline are bold; colours show the difference from the baseline, so rows with different
metrics share one scale.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reinit_tune.analysis import frames
from reinit_tune.analysis.plotting import n_label, panels, save
from reinit_tune.analysis.stats import summarize
from reinit_tune.errors import NoResultsError

COLUMNS = ["size", "final", "intermediate", "metric", "n", "mean", "std", "ci_low", "ci_high",
           "baseline", "above_baseline"]


def sequential_table(trials: pd.DataFrame, experiment: str = "sequential") -> pd.DataFrame:
    """One row per (size, final, intermediate) cell; the diagonal cell is the baseline."""
    df = frames.by_model(frames.ok(frames.normalize(trials), experiment))
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = df.rename(columns={"task": "final"})
    direct = df["intermediate_task"].isna()
    # the diagonal is direct finetuning; an explicit same-task intermediate stage is not
    df = df[direct | (df["intermediate_task"] != df["final"])].copy()
    df["intermediate"] = df["intermediate_task"].where(~direct, df["final"])
    table = summarize(df, ["size", "final", "intermediate", "metric"])
    diagonal = table[table["final"] == table["intermediate"]].set_index(["size", "final"])
    table["baseline"] = [diagonal["mean"].get((s, f), np.nan)
                         for s, f in zip(table["size"], table["final"], strict=True)]
    table["above_baseline"] = (table["mean"] > table["baseline"]) & (
        table["final"] != table["intermediate"])
    return table[COLUMNS]


def plot_sequential(trials: pd.DataFrame, out_dir: str | Path, name: str = "sequential", *,
                    experiment: str = "sequential"):
    table = sequential_table(trials, experiment)
    if table.empty or (table["final"] == table["intermediate"]).all():
        raise NoResultsError("no sequential (intermediate -> final) trials in the store")
    sizes = list(dict.fromkeys(table["size"]))
    fig, axes = panels(len(sizes), width=5.5, height=4.2)
    for ax, size in zip(axes[0], sizes, strict=True):
        sub = table[table["size"] == size]
        finals = sorted(sub["final"].unique())
        inters = sorted(set(sub["intermediate"]) | set(finals))
        cell = sub.set_index(["final", "intermediate"])
        diff = np.full((len(finals), len(inters)), np.nan)
        for i, f in enumerate(finals):
            for j, t in enumerate(inters):
                if (f, t) in cell.index:
                    c = cell.loc[(f, t)]
                    diff[i, j] = c["mean"] - c["baseline"]
                    weight = "bold" if c["above_baseline"] else "normal"
                    edge = " (base)" if f == t else ""
                    ax.text(j, i, f"{c['mean']:.3f}{edge}\nn={c['n']}", ha="center",
                            va="center", fontsize=7, fontweight=weight)
        limit = float(np.nanmax(np.abs(diff))) if np.isfinite(diff).any() else 1.0
        ax.imshow(diff, cmap="RdYlGn", vmin=-(limit or 1.0), vmax=limit or 1.0, aspect="auto")
        ax.set_xticks(range(len(inters)))
        ax.set_xticklabels([t.upper() for t in inters])
        ax.set_yticks(range(len(finals)))
        ax.set_yticklabels([f"{f.upper()} ({sub.loc[sub['final'] == f, 'metric'].iloc[0]})"
                            for f in finals])
        ax.set_xlabel("intermediate task")
        ax.set_ylabel("final task")
        ax.set_title(f"{size} examples ({n_label(sub['n'])}/cell); bold: above baseline",
                     fontsize=9)
    fig.suptitle("Sequential finetuning: intermediate x final task (diagonal: direct)",
                 fontsize=10)
    table.attrs["caption"] = (
        f"Rows read: `{experiment}` rows; a cell is the mean of "
        f"{n_label(table['n']).removeprefix('n=')} runs of the final task after the "
        "intermediate one; the diagonal is direct finetuning.")
    return fig, save(fig, out_dir, name), table
