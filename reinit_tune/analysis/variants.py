"""003 Appendices D, E and F: training variants of the progressive experiment.

- Figures 6 and 7 (App. E, F): progressive curves of a variant (a learning-rate multiplier on
  the reinitialized layers, LayerNorm parameters preserved, or another initializer) against
  the plain progressive runs of the same task and train size.
- App. D: dev score and dev loss after every epoch (up to 10) for k in {0, L/2, L}, from the
  per-epoch rows of the ``variants`` trials that change nothing but the epoch count.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.ticker import MaxNLocator

from reinit_tune.analysis import frames
from reinit_tune.analysis.plotting import mean_line, metric_label, per_setting, save, style
from reinit_tune.analysis.stats import summarize
from reinit_tune.errors import NoResultsError

BASELINE = "progressive (baseline)"


def variant_label(row, baseline_init=None) -> str | None:
    """What a ``variants`` trial changes, in words; None for the plain (epoch-study) runs."""
    parts = []
    if row["reinit_lr_multiplier"] != 1.0:
        parts.append(f"LR x{row['reinit_lr_multiplier']:g} on reinitialized layers")
    if row["preserve_layernorm"]:
        parts.append("LayerNorm preserved")
    if row["init_scheme"] is not None and row["init_scheme"] != baseline_init:
        parts.append(f"init {row['init_scheme']}")
    return ", ".join(parts) or None


def _labelled(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(progressive baseline rows, variants rows) with a ``variant`` label column."""
    df = frames.normalize(trials)
    base = frames.ok(df, "progressive")
    base = base[(base["reinit_lr_multiplier"] == 1.0) & ~base["preserve_layernorm"]].copy()
    inits = base["init_scheme"].dropna().unique()
    baseline_init = inits[0] if len(inits) == 1 else None
    variants = frames.ok(df, "variants")
    variants["variant"] = [variant_label(r, baseline_init) for r in variants.to_dict("records")]
    base["variant"] = BASELINE
    return base, variants


def variants_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Per task, size, variant (or the baseline) and k: n, mean and 95% t-interval."""
    base, variants = _labelled(trials)
    variants = variants[variants["variant"].notna()]
    cols = ["task", "metric", "size", "variant", "k"]
    if variants.empty:
        return pd.DataFrame(columns=[*cols, "n", "mean", "std", "ci_low", "ci_high"])
    settings = set(zip(variants["task"], variants["size"], strict=True))
    base = base[[(t, s) in settings for t, s in zip(base["task"], base["size"], strict=True)]]
    df = pd.concat([base, variants], ignore_index=True)
    df["k"] = df["num_pretrained_layers"].astype(int)
    return summarize(df, cols)


def plot_variants(trials: pd.DataFrame, out_dir: str | Path, name: str = "variants"):
    table = variants_table(trials)
    if table.empty:
        raise NoResultsError("no learning-rate, LayerNorm or initializer variants in the store")
    fig, axes, columns = per_setting(table)
    for col, title, sub in columns:
        ax = axes[0, col]
        for variant, line in sub.groupby("variant", sort=False):
            mean_line(ax, line, "k", label=variant, ls="--" if variant == BASELINE else "-",
                      color="k" if variant == BASELINE else None)
        ax.set_xticks(sorted(sub["k"].unique()))
        style(ax, xlabel="k (pretrained layers kept)", ylabel=metric_label(sub), title=title)
    fig.suptitle("Variants of progressive reinitialization (mean, 95% t-interval)",
                 fontsize=10)
    return fig, save(fig, out_dir, name), table


def epoch_table(trials: pd.DataFrame, epochs: pd.DataFrame) -> pd.DataFrame:
    """App. D: per task, size, k and epoch, the dev score and dev loss of the epoch study."""
    _, variants = _labelled(trials)
    study = variants[variants["variant"].isna()]
    cols = ["task", "metric", "size", "k", "epoch"]
    empty = pd.DataFrame(columns=[*cols, "n", "mean", "std", "ci_low", "ci_high",
                                  "loss_n", "loss_mean", "loss_ci_low", "loss_ci_high"])
    if study.empty:
        return empty
    keep = study[["trial_id", "task", "size", "num_pretrained_layers"]]
    df = epochs[["trial_id", "epoch", "metric", "score", "eval_loss"]].merge(keep, on="trial_id")
    if df.empty:
        return empty
    df["k"] = df["num_pretrained_layers"].astype(int)
    score = summarize(df, cols)
    loss = summarize(df, cols, value="eval_loss")
    loss = loss.rename(columns={"n": "loss_n", "mean": "loss_mean", "std": "loss_std",
                                "ci_low": "loss_ci_low", "ci_high": "loss_ci_high"})
    return score.merge(loss, on=cols)[empty.columns]


def plot_epochs(trials: pd.DataFrame, epochs: pd.DataFrame, out_dir: str | Path,
                name: str = "epochs"):
    table = epoch_table(trials, epochs)
    if table.empty:
        raise NoResultsError("no epoch-study trials (variants without a change) in the store")
    fig, axes, columns = per_setting(table, rows=2)
    for col, title, sub in columns:
        for k, line in sub.groupby("k"):
            mean_line(axes[0, col], line, "epoch", label=f"k={k}")
            loss = pd.DataFrame({"epoch": line["epoch"], "n": line["loss_n"],
                                 "mean": line["loss_mean"], "ci_low": line["loss_ci_low"],
                                 "ci_high": line["loss_ci_high"]})
            mean_line(axes[1, col], loss, "epoch", label=f"k={k}")
        style(axes[0, col], xlabel="epoch", ylabel=metric_label(sub), title=title)
        style(axes[1, col], xlabel="epoch", ylabel="dev loss")
        for ax in axes[:, col]:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle("Dev score and loss per epoch (mean, 95% t-interval)", fontsize=10)
    return fig, save(fig, out_dir, name), table
