"""001 Figures 5–10 (attention-head reinitialization, Exp. 3).

Each trial reinitializes one head; its effect is its score minus the no-reinit baseline's
(paired by seed when the baseline ran with that seed, else the baseline's mean). The
layer × head table of mean differences is drawn as a heatmap (001 Figs 5, 6; green = better
than the baseline, red = worse), and summarised per layer over its heads (Figs 7, 8) and per
head over the layers (Figs 9, 10) with count, mean, std, min, quartiles and max.
Layers and heads are shown 1-based, as in 001.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reinit_tune.analysis import frames
from reinit_tune.analysis.plotting import n_label, per_setting, save, suptitle
from reinit_tune.errors import NoResultsError

SUMMARY = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]
CELL_COLUMNS = ["task", "metric", "size", "layer", "head", "n", "diff", "score", "baseline"]
# Panels per task and size, a cell per reinitialized (layer, head); the baseline reinitializes
# nothing (reinit_layers and reinit_heads empty).
SERIES, X = ("task", "train_size"), ("reinit_heads", "reinit_layers")


def head_rows(trials: pd.DataFrame, experiment: str = "heads") -> pd.DataFrame:
    return frames.split(frames.normalize(frames.ok(trials, experiment)), SERIES, X)


def head_differences(trials: pd.DataFrame, experiment: str = "heads") -> pd.DataFrame:
    """Per task, size, layer and head: n runs, mean score difference from the baseline."""
    df = head_rows(trials, experiment)
    plain = df["reinit_layers"].map(len) == 0
    base = df[plain & (df["reinit_heads"].map(len) == 0)]
    single = df[plain & (df["reinit_heads"].map(len) == 1)].copy()
    if base.empty or single.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    by_seed = base.groupby(["task", "size", "seed"])["score"].mean()
    by_setting = base.groupby(["task", "size"])["score"].mean()
    single["baseline"] = [
        by_seed.get((t, s, seed), by_setting.get((t, s), np.nan))
        for t, s, seed in zip(single["task"], single["size"], single["seed"], strict=True)
    ]
    single["diff"] = single["score"] - single["baseline"]
    single["layer"] = [h[0][0] + 1 for h in single["reinit_heads"]]
    single["head"] = [h[0][1] + 1 for h in single["reinit_heads"]]
    cells = single.groupby(["task", "metric", "size", "layer", "head"]).agg(
        n=("diff", "count"), diff=("diff", "mean"), score=("score", "mean"),
        baseline=("baseline", "mean")).reset_index()
    return cells[CELL_COLUMNS]


def _summary(cells: pd.DataFrame, by: str) -> pd.DataFrame:
    if cells.empty:
        return pd.DataFrame(columns=["task", "size", by, *SUMMARY])
    described = cells.groupby(["task", "size", by])["diff"].describe()
    return described[SUMMARY].reset_index()


def layer_summary(trials: pd.DataFrame, experiment: str = "heads") -> pd.DataFrame:
    """001 Figs 7, 8: per layer, statistics of the differences of its heads."""
    return _summary(head_differences(trials, experiment), "layer")


def head_summary(trials: pd.DataFrame, experiment: str = "heads") -> pd.DataFrame:
    """001 Figs 9, 10: per head index, statistics of its differences over the layers."""
    return _summary(head_differences(trials, experiment), "head")


def plot_heads(trials: pd.DataFrame, out_dir: str | Path, name: str = "heads", *,
               experiment: str = "heads"):
    cells = head_differences(trials, experiment)
    if cells.empty:
        raise NoResultsError("no single-head trials with a no-reinit baseline in the store")
    n_heads = int(cells["head"].max())
    fig, axes, columns = per_setting(cells, width=max(4.5, 0.55 * n_heads + 1.5))
    for col, title, sub in columns:
        ax = axes[0, col]
        grid = sub.pivot(index="layer", columns="head", values="diff")
        grid = grid.reindex(columns=range(1, n_heads + 1))
        limit = float(np.nanmax(np.abs(grid.to_numpy()))) or 1.0
        image = ax.imshow(grid.to_numpy(), cmap="RdYlGn", vmin=-limit, vmax=limit,
                          aspect="auto")
        for (i, j), value in np.ndenumerate(grid.to_numpy()):
            if not np.isnan(value):
                ax.text(j, i, f"{value:.3f}", ha="center", va="center", fontsize=6)
        ax.set_xticks(range(n_heads))
        ax.set_xticklabels(range(1, n_heads + 1))
        ax.set_yticks(range(len(grid.index)))
        ax.set_yticklabels([f"layer {i}" for i in grid.index])
        ax.set_xlabel("reinitialized head")
        baseline = sub["baseline"].mean()
        ax.set_title(f"{title}: {sub['metric'].iloc[0]} − baseline {baseline:.3f}\n"
                     f"({n_label(sub['n'])} runs/cell)", fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.04)
    rows = head_rows(trials, experiment)
    suptitle(fig, "Attention-head reinitialization: difference from no reinitialization", rows,
             10)
    cells.attrs["caption"] = (
        f"Rows read: `{experiment}` rows; each cell is the mean over "
        f"{n_label(cells['n']).removeprefix('n=')} runs of the score minus the no-reinit "
        "baseline's of the same seed (its mean where that seed has none). "
        + frames.split_note(rows.attrs["split"], rows.attrs["per_series"]))
    return fig, save(fig, out_dir, name), cells
