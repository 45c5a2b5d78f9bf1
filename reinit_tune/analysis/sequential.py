"""001 Figure 2 (sequential finetuning, Exp. 1): the intermediate × final task matrix.

Rows are final tasks, columns intermediate tasks; a cell is the final task's mean dev score
after finetuning on the intermediate task first. The diagonal holds the baseline: direct
finetuning on the final task (rows with no intermediate task). Cells above their row's
baseline are bold; colours show the difference from the baseline, so rows with different
metrics share one scale.

``best_of`` (001 §7: "running the experiment twice and taking the better score"): a cell is
the better of each ``best_of`` runs (seeds 0..b-1, then b..2b-1, ...), averaged when there
are several such sets; ``mean_of_runs`` keeps the plain mean of every run beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reinit_tune.analysis import frames
from reinit_tune.analysis.plotting import capped, n_label, panels, runs_per, save, suptitle
from reinit_tune.analysis.stats import summarize
from reinit_tune.errors import NoResultsError

COLUMNS = ["size", "setting", "final", "intermediate", "metric", "n", "runs", "mean", "std",
           "ci_low", "ci_high", "mean_of_runs", "baseline", "above_baseline"]
# A matrix per train size; rows final tasks, columns intermediate tasks.
SERIES, X = ("task", "train_size"), ("intermediate_task",)


def sequential_rows(trials: pd.DataFrame, experiment: str = "sequential") -> pd.DataFrame:
    return frames.split(frames.normalize(frames.ok(trials, experiment)), SERIES, X)


def sequential_table(trials: pd.DataFrame, experiment: str = "sequential",
                     best_of: int | None = None) -> pd.DataFrame:
    """One row per (size, setting, final, intermediate) cell; the diagonal cell is the
    baseline. ``best_of``: see the module docstring (``n`` then counts sets of runs)."""
    df = sequential_rows(trials, experiment)
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = df.assign(final=df["task_name"])
    direct = df["intermediate_task"].isna()
    # the diagonal is direct finetuning; an explicit same-task intermediate stage is not
    df = df[direct | (df["intermediate_task"] != df["final"])].copy()
    df["intermediate"] = df["intermediate_task"].where(~direct, df["final"])
    cell = ["size", "setting", "final", "intermediate", "metric"]
    runs = summarize(df, cell).rename(columns={"n": "runs", "mean": "mean_of_runs"})
    if best_of:
        df["set"] = df["seed"] // best_of
        df = df.groupby([*cell, "set"], sort=True, dropna=False)["score"].max().reset_index()
    table = summarize(df, cell).merge(runs[[*cell, "runs", "mean_of_runs"]], on=cell)
    diagonal = table[table["final"] == table["intermediate"]].set_index(
        ["size", "setting", "final"])
    table["baseline"] = [diagonal["mean"].get((s, g, f), np.nan) for s, g, f in zip(
        table["size"], table["setting"], table["final"], strict=True)]
    table["above_baseline"] = (table["mean"] > table["baseline"]) & (
        table["final"] != table["intermediate"])
    return table[COLUMNS]


def plot_sequential(trials: pd.DataFrame, out_dir: str | Path, name: str = "sequential", *,
                    experiment: str = "sequential", best_of: int | None = None):
    table = sequential_table(trials, experiment, best_of)
    if table.empty or (table["final"] == table["intermediate"]).all():
        raise NoResultsError("no sequential (intermediate -> final) trials in the store")
    rows = sequential_rows(trials, experiment)
    matrices = capped(list(dict.fromkeys(zip(table["size"], table["setting"], strict=True))),
                      runs_per(table, ["size", "setting"]))
    fig, axes = panels(len(matrices), width=5.5, height=4.2)
    for ax, (size, setting) in zip(axes[0], matrices, strict=True):
        sub = table[(table["size"] == size) & (table["setting"] == setting)]
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
        what = f"best of {best_of}, " if best_of else ""
        ax.set_title(f"{size} examples{' · ' + setting if setting else ''} ({what}"
                     f"{n_label(sub['n'])}/cell); bold: above baseline", fontsize=9)
    suptitle(fig, "Sequential finetuning: intermediate x final task (diagonal: direct)", rows,
             10)
    cell = (f"the better of each {best_of} runs (001 §7), averaged over "
            f"{n_label(table['n']).removeprefix('n=')} such sets" if best_of else
            f"the mean of {n_label(table['n']).removeprefix('n=')} runs")
    table.attrs["caption"] = (
        f"Rows read: `{experiment}` rows; a cell is {cell} of the final task after the "
        "intermediate one; the diagonal is direct finetuning. "
        + frames.split_note(rows.attrs["split"], rows.attrs["per_series"]))
    return fig, save(fig, out_dir, name), table
