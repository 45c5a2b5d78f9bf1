"""003 Appendices D, E and F: training variants of the progressive experiment.

Which rows each figure reads (the ``variants`` sweep holds all three kinds):

- Figures 6 and 7 (App. E, F): the progressive curves of a variant (a learning-rate
  multiplier on the reinitialized layers, LayerNorm parameters preserved, another
  initializer) against the reference curve of the same sweep: its plain rows (no variant)
  with the reference epoch count, i.e. not the epoch study. Only where the sweep has no
  reference rows for a (task, size) does the baseline come from ``progressive`` rows of the
  same model, task, size and epochs, and the legend says so.
- App. D: dev score and loss after every epoch, from the epoch table of the epoch-study rows
  alone: the plain rows whose epoch count is the largest in their (task, size), when that is
  more than the reference curve's (the 10-epoch runs).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.ticker import MaxNLocator

from reinit_tune.analysis import frames
from reinit_tune.analysis.plotting import (
    caption,
    mean_line,
    metric_label,
    per_setting,
    reference_lines,
    save,
    style,
    suptitle,
)
from reinit_tune.analysis.stats import summarize
from reinit_tune.errors import NoResultsError

# Panels per task and size, k on the x axis, a line per variant (what it changes).
VARIANT_SERIES = ("task", "train_size", "reinit_lr_multiplier", "preserve_layernorm",
                  "init_scheme")
X = ("reinit_layers",)
REFERENCE = "reference (same sweep)"
FROM_PROGRESSIVE = "progressive (baseline from that sweep)"


def variant_label(row, reference_init: str | None = None) -> str | None:
    """What a ``variants`` trial changes, in words; None for a plain (reference or epoch
    study) run. An initializer is a change only where it differs from the reference's."""
    parts = []
    if row["reinit_lr_multiplier"] != 1.0:
        parts.append(f"LR x{row['reinit_lr_multiplier']:g} on reinitialized layers")
    if row["preserve_layernorm"]:
        parts.append("LayerNorm preserved")
    if reference_init is not None and row["init_scheme"] not in (None, reference_init):
        parts.append(f"init {row['init_scheme']}")
    return ", ".join(parts) or None


def _split(trials: pd.DataFrame, experiment: str = "variants"
           ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(reference rows, epoch-study rows, variant rows) of ``experiment``, labelled."""
    # the epoch count tells the study from the reference curve, so it is laid out here;
    # anything else that varies (model, lr, ...) splits
    df = frames.split(frames.normalize(frames.ok(trials, experiment)),
                      (*VARIANT_SERIES, "epochs"), X)
    if df.empty:
        return df, df, df
    schemes = df["init_scheme"].dropna()
    reference_init = schemes.mode().iloc[0] if not schemes.empty else None
    df["variant"] = [variant_label(r, reference_init) for r in df.to_dict("records")]
    plain = df[df["variant"].isna()]
    longest = plain.groupby(["task", "size"])["epochs"].transform("max")
    shortest = plain.groupby(["task", "size"])["epochs"].transform("min")
    varied = set(zip(df.loc[df["variant"].notna(), "task"],
                     df.loc[df["variant"].notna(), "size"], strict=True))
    alone = pd.Series([(t, s) not in varied for t, s in zip(plain["task"], plain["size"],
                                                              strict=True)], index=plain.index)
    # The study: a setting's longest plain runs, when they are longer than its reference
    # curve's or the setting has no variant (and so no reference curve) at all.
    study = plain[(plain["epochs"] == longest) & ((longest > shortest) | alone)]
    reference = plain.drop(study.index)
    return reference, study, df[df["variant"].notna()]


def variants_table(trials: pd.DataFrame, experiment: str = "variants") -> pd.DataFrame:
    """Per task, size, curve (a variant, or its baseline) and k: n, mean and 95% t-interval.
    The baseline is the sweep's own reference curve, else progressive rows (see module)."""
    reference, _, variants = _split(trials, experiment)
    cols = ["task", "metric", "size", "variant", "k"]
    if variants.empty:
        return pd.DataFrame(columns=[*cols, "n", "mean", "std", "ci_low", "ci_high"])
    reference = reference.assign(variant=REFERENCE)
    missing = {(t, s, e) for t, s, e in zip(variants["task"], variants["size"],
                                            variants["epochs"], strict=True)
               } - set(zip(reference["task"], reference["size"], reference["epochs"],
                           strict=True))
    progressive = frames.split(frames.normalize(frames.ok(trials, "progressive")),
                               (*VARIANT_SERIES, "epochs"), X)
    if missing and not progressive.empty:
        plain = progressive[(progressive["reinit_lr_multiplier"] == 1.0)
                            & ~progressive["preserve_layernorm"]]
        keep = [(t, s, e) in missing for t, s, e in zip(plain["task"], plain["size"],
                                                        plain["epochs"], strict=True)]
        reference = pd.concat([reference, plain[keep].assign(variant=FROM_PROGRESSIVE)])
    df = pd.concat([reference, variants], ignore_index=True)
    # a curve and its baseline must agree in everything but what the variant changes
    df = frames.split(df.assign(task=df["task_name"]), VARIANT_SERIES, X)
    df["k"] = df["num_pretrained_layers"].astype(int)
    table = summarize(df, cols)
    table.attrs["rows"] = df
    return table


def plot_variants(trials: pd.DataFrame, out_dir: str | Path, name: str = "variants", *,
                  experiment: str = "variants"):
    table = variants_table(trials, experiment)
    if table.empty:
        raise NoResultsError("no learning-rate, LayerNorm or initializer variants in the store")
    rows = table.attrs.pop("rows")
    fig, axes, columns = per_setting(table)
    for col, title, sub in columns:
        ax = axes[0, col]
        for variant, line in sub.groupby("variant", sort=False):
            baseline = variant in (REFERENCE, FROM_PROGRESSIVE)
            mean_line(ax, line, "k", label=variant, ls="--" if baseline else "-",
                      color="k" if baseline else None)
        reference_lines(ax, rows[(rows["task"] == sub["task"].iloc[0])])
        ax.set_xticks(sorted(sub["k"].unique()))
        style(ax, xlabel="k (pretrained layers kept)", ylabel=metric_label(sub), title=title)
    suptitle(fig, "Variants of progressive reinitialization (mean, 95% t-interval)", rows, 10)
    table.attrs["caption"] = caption(
        table, f"`{experiment}` rows with a learning-rate multiplier, preserved LayerNorm or "
        "another initializer, against the same sweep's reference curve (dashed; "
        f"'{FROM_PROGRESSIVE}' where the sweep has none)", rows)
    return fig, save(fig, out_dir, name), table


def epoch_table(trials: pd.DataFrame, epochs: pd.DataFrame,
                experiment: str = "variants") -> pd.DataFrame:
    """App. D: per task, size, k and epoch, the dev score and dev loss of the epoch study."""
    _, study, _ = _split(trials, experiment)
    study = frames.split(study.assign(task=study["task_name"]), ("task", "train_size",
                                                                  "reinit_layers"))
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
    table = score.merge(loss, on=cols)[empty.columns]
    table.attrs["rows"] = study
    return table


def plot_epochs(trials: pd.DataFrame, epochs: pd.DataFrame, out_dir: str | Path,
                name: str = "epochs", *, experiment: str = "variants"):
    table = epoch_table(trials, epochs, experiment)
    if table.empty:
        raise NoResultsError(f"no epoch-study trials in the store (the {experiment} sweep's "
                             "runs with the most epochs, no variant)")
    rows = table.attrs.pop("rows")
    fig, axes, columns = per_setting(table, rows=2)
    for col, title, sub in columns:
        for k, line in sub.groupby("k"):
            mean_line(axes[0, col], line, "epoch", label=f"k={k}")
            loss = pd.DataFrame({"epoch": line["epoch"], "n": line["loss_n"],
                                 "mean": line["loss_mean"], "ci_low": line["loss_ci_low"],
                                 "ci_high": line["loss_ci_high"]})
            mean_line(axes[1, col], loss, "epoch", label=f"k={k}")
        reference_lines(axes[0, col], rows[rows["task"] == sub["task"].iloc[0]])
        style(axes[0, col], xlabel="epoch", ylabel=metric_label(sub), title=title)
        style(axes[1, col], xlabel="epoch", ylabel="dev loss")
        for ax in axes[:, col]:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    suptitle(fig, "Dev score and loss per epoch (mean, 95% t-interval)", rows, 10)
    table.attrs["caption"] = caption(
        table, f"the epoch-study rows of `{experiment}` (its runs with the most epochs and no "
        "variant); the epoch table of those trials", rows)
    return fig, save(fig, out_dir, name), table
