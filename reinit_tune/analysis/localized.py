"""003 Figure 2 (localized reinitialization, §4) and Figure 5 (single layers, App. C).

Figure 2: for every block of 3 consecutive layers, the score with that block reinitialized
and with only that block preserved (all other layers reinitialized), as bars with 95%
t-intervals; horizontal lines for the full model and the embeddings-only model (every layer
reinitialized). A row's role is read from its ``reinit_layers``; with 6 layers the first
block reinitialized is the same trial as the last block preserved and counts for both.

Figure 5: the score after reinitializing one layer, per layer, against the full model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reinit_tune.analysis import frames
from reinit_tune.analysis.plotting import (
    caption,
    ci_yerr,
    mean_line,
    metric_label,
    n_label,
    per_setting,
    reference_lines,
    save,
    style,
    suptitle,
)
from reinit_tune.analysis.stats import summarize
from reinit_tune.errors import NoResultsError

BLOCK = 3  # 003 §4: blocks of three consecutive layers
SERIES, X = ("task", "train_size"), ("reinit_layers",)  # panels per task and size; bars
FULL, EMBEDDINGS, REINIT, PRESERVED = ("full model", "embeddings only", "block reinitialized",
                                       "block preserved")


def _consecutive(layers: set[int]) -> bool:
    return bool(layers) and max(layers) - min(layers) + 1 == len(layers)


def block_roles(reinit_layers, num_layers: int, block: int = BLOCK) -> list[tuple[str, int]]:
    """The roles a trial plays in Figure 2: (role, first layer of the block, 0-based; -1 for
    the two baselines). A trial that is none of them (e.g. a single layer) has no role."""
    reinit = set(reinit_layers)
    kept = set(range(num_layers)) - reinit
    roles = []
    if not reinit:
        roles.append((FULL, -1))
    if not kept:
        roles.append((EMBEDDINGS, -1))
    if len(reinit) == block and _consecutive(reinit):
        roles.append((REINIT, min(reinit)))
    if len(kept) == block and _consecutive(kept):
        roles.append((PRESERVED, min(kept)))
    return roles


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that only reinitialize whole layers (no heads, no permutation, no variant)."""
    return df[(df["reinit_heads"].map(len) == 0) & df["layer_order"].isna()
              & (df["reinit_lr_multiplier"] == 1.0) & ~df["preserve_layernorm"]]


def localized_rows(trials: pd.DataFrame, experiment: str = "localized") -> pd.DataFrame:
    return frames.split(_plain(frames.normalize(frames.ok(trials, experiment))), SERIES, X)


def localized_table(trials: pd.DataFrame, block: int = BLOCK,
                    experiment: str = "localized") -> pd.DataFrame:
    """Per task, size, role and block: n, mean, std and 95% CI of the score."""
    df = localized_rows(trials, experiment)
    rows = [{**row, "role": role, "block": start}
            for row in df.to_dict("records")
            for role, start in block_roles(row["reinit_layers"], row["num_layers"], block)]
    cols = ["task", "metric", "size", "role", "block"]
    if not rows:
        return pd.DataFrame(columns=[*cols, "n", "mean", "std", "ci_low", "ci_high", "layers"])
    table = summarize(pd.DataFrame(rows), cols)
    table["layers"] = [f"{b + 1}-{b + block}" if b >= 0 else "" for b in table["block"]]
    return table


def plot_localized(trials: pd.DataFrame, out_dir: str | Path, name: str = "localized", *,
                   experiment: str = "localized"):
    table = localized_table(trials, experiment=experiment)
    rows = localized_rows(trials, experiment)
    blocks = table[table["role"].isin([REINIT, PRESERVED])]
    if blocks.empty:
        raise NoResultsError("no block reinitialized/preserved trials in the store")
    fig, axes, columns = per_setting(table, present=blocks, width=5.0)
    width = 0.38
    for col, title, sub in columns:
        ax = axes[0, col]
        starts = sorted(sub.loc[sub["block"] >= 0, "block"].unique())
        x_of = {b: i for i, b in enumerate(starts)}
        for offset, role, color in ((-width / 2, REINIT, "tab:red"),
                                    (width / 2, PRESERVED, "tab:green")):
            bars = sub[sub["role"] == role].sort_values("block")
            if bars.empty:
                continue
            xs = np.array([x_of[b] for b in bars["block"]]) + offset
            ax.bar(xs, bars["mean"], width, yerr=ci_yerr(bars), capsize=3, color=color,
                   alpha=0.75, label=f"{role} ({n_label(bars['n'])}/bar)")
            for x, m, n in zip(xs, bars["mean"], bars["n"], strict=True):
                ax.annotate(f"n={n}", (x, m), ha="center", va="bottom", fontsize=6,
                            xytext=(0, 2), textcoords="offset points")
        for role, line_style in ((FULL, "-"), (EMBEDDINGS, "--")):
            base = sub[sub["role"] == role]
            if not base.empty:
                ax.axhline(base["mean"].iloc[0], ls=line_style, color="k", lw=1,
                           label=f"{role} (n={base['n'].iloc[0]})")
        ax.set_xticks(range(len(starts)))
        ax.set_xticklabels([f"{b + 1}-{b + BLOCK}" for b in starts])
        reference_lines(ax, rows[rows["task"] == sub["task"].iloc[0]])
        style(ax, xlabel="layers of the block", ylabel=metric_label(sub), title=title, grid="y")
    suptitle(fig, "Localized reinitialization (mean, 95% t-interval)", rows, 10)
    table.attrs["caption"] = caption(table, f"`{experiment}` rows, each counted in every role "
                                     "its reinit_layers plays", rows)
    return fig, save(fig, out_dir, name), table


def single_layer_rows(trials: pd.DataFrame, experiment: str = "single_layer"
                      ) -> pd.DataFrame:
    df = _plain(frames.normalize(frames.ok(trials, experiment)))
    return frames.split(df[df["reinit_layers"].map(len) <= 1], SERIES, X)


def single_layer_table(trials: pd.DataFrame, experiment: str = "single_layer") -> pd.DataFrame:
    """Per task, size and reinitialized layer (1-based; 0 = none, the full model)."""
    df = single_layer_rows(trials, experiment)
    cols = ["task", "metric", "size", "layer"]
    if df.empty:
        return pd.DataFrame(columns=[*cols, "n", "mean", "std", "ci_low", "ci_high"])
    df["layer"] = [layers[0] + 1 if layers else 0 for layers in df["reinit_layers"]]
    return summarize(df, cols)


def plot_single_layer(trials: pd.DataFrame, out_dir: str | Path, name: str = "single_layer",
                      *, experiment: str = "single_layer"):
    table = single_layer_table(trials, experiment)
    rows = single_layer_rows(trials, experiment)
    layers = table[table["layer"] > 0]
    if layers.empty:
        raise NoResultsError("no single-layer reinitialization trials in the store")
    fig, axes, columns = per_setting(table, present=layers)
    for col, title, sub in columns:
        ax = axes[0, col]
        mean_line(ax, sub[sub["layer"] > 0], "layer", label="one layer reinitialized",
                  color="tab:purple")
        base = sub[sub["layer"] == 0]
        if not base.empty:
            ax.axhline(base["mean"].iloc[0], ls="--", color="k", lw=1,
                       label=f"full model (n={base['n'].iloc[0]})")
        ax.set_xticks(sorted(sub.loc[sub["layer"] > 0, "layer"]))
        reference_lines(ax, rows[rows["task"] == sub["task"].iloc[0]])
        style(ax, xlabel="reinitialized layer", ylabel=metric_label(sub), title=title)
    suptitle(fig, "Single-layer reinitialization (mean, 95% t-interval)", rows, 10)
    table.attrs["caption"] = caption(table, f"`{experiment}` rows", rows)
    return fig, save(fig, out_dir, name), table
