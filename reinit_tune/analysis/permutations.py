"""003 Figure 3 and Table 1 (layer permutations, §5).

Figure 3: each permutation's finetuning score as a circle, their mean as a solid line with
its 95% t-interval, a kernel density of the outcomes beside them, and dashed lines for the
original layer order and for the model with every layer reinitialized, each within a ±2σ
band (σ: the standard deviation of that baseline's runs).

Table 1: paired correlation between tasks of the scores of the same permutations (003 uses
permutation n for run n of every task): Spearman and Pearson coefficients with two-sided
p-values (scipy.stats), pairing runs by identical layer order and seed.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from reinit_tune.analysis import frames
from reinit_tune.analysis.plotting import (
    caption,
    metric_label,
    per_setting,
    reference_lines,
    save,
    style,
    suptitle,
)
from reinit_tune.analysis.stats import summarize
from reinit_tune.errors import NoResultsError
from reinit_tune.tasks import TASKS

ORIGINAL, SCRATCH, PERMUTED = "original order", "all reinitialized", "permuted"
# Panels per task and size; the role (permuted, original, all reinitialized) comes from the
# layer order and reinitialized layers; permutation n is drawn from seed n (003 §5).
SERIES, X = ("task", "train_size"), ("reinit_layers", "layer_order")


def role(row) -> str | None:
    if row["layer_order"] is not None:
        return PERMUTED
    if not row["reinit_layers"]:
        return ORIGINAL
    if len(row["reinit_layers"]) == row["num_layers"]:
        return SCRATCH
    return None


def permutation_rows(trials: pd.DataFrame, experiment: str = "permutations") -> pd.DataFrame:
    """Successful ``permutations`` trials with a ``role`` column."""
    df = frames.split(frames.normalize(frames.ok(trials, experiment)), SERIES, X)
    df["role"] = [role(r) for r in df.to_dict("records")]
    kept = df[df["role"].notna()].reset_index(drop=True)
    kept.attrs["split"] = df.attrs["split"]
    return kept


def permutation_table(trials: pd.DataFrame, experiment: str = "permutations") -> pd.DataFrame:
    """Per task, size and role: n, mean, std (σ of the ±2σ bands) and 95% t-interval."""
    df = permutation_rows(trials, experiment)
    cols = ["task", "metric", "size", "role"]
    if df.empty:
        return pd.DataFrame(columns=[*cols, "n", "mean", "std", "ci_low", "ci_high"])
    return summarize(df, cols)


def plot_permutations(trials: pd.DataFrame, out_dir: str | Path, name: str = "permutations", *,
                      experiment: str = "permutations"):
    rows = permutation_rows(trials, experiment)
    perms = rows[rows["role"] == PERMUTED]
    if perms.empty:
        raise NoResultsError("no permutation trials in the store")
    table = permutation_table(trials, experiment)
    fig, axes, columns = per_setting(perms, width=5.0)
    for col, title, pts in columns:
        ax = axes[0, col]
        pts = pts.sort_values(["seed", "trial_id"]).reset_index(drop=True)
        task, size = pts["task"].iloc[0], pts["size"].iloc[0]
        summary = table[(table["task"] == task) & (table["size"] == size)].set_index("role")
        xs = np.arange(len(pts))
        ax.scatter(xs, pts["score"], s=22, facecolors="none", edgecolors="tab:blue",
                   label="one permutation")
        s = summary.loc[PERMUTED]
        ax.axhline(s["mean"], color="tab:blue", lw=1.5,
                   label=f"mean of permutations (n={s['n']})")
        if not np.isnan(s["ci_low"]):
            ax.axhspan(s["ci_low"], s["ci_high"], color="tab:blue", alpha=0.15,
                       label="95% t-interval")
        for base, color in ((ORIGINAL, "k"), (SCRATCH, "tab:red")):
            if base not in summary.index:
                continue
            b = summary.loc[base]
            ax.axhline(b["mean"], ls="--", color=color, lw=1, label=f"{base} (n={b['n']})")
            if b["n"] > 1 and not np.isnan(b["std"]):
                ax.axhspan(b["mean"] - 2 * b["std"], b["mean"] + 2 * b["std"], color=color,
                           alpha=0.08)
        if pts["score"].nunique() > 1:
            density = stats.gaussian_kde(pts["score"])
            lo, hi = ax.get_ylim()
            ys = np.linspace(lo, hi, 200)
            kde_ax = ax.inset_axes([1.0, 0.0, 0.2, 1.0], sharey=ax)
            kde_ax.fill_betweenx(ys, 0, density(ys), color="tab:blue", alpha=0.3)
            kde_ax.axis("off")
        ax.set_xticks(xs)
        reference_lines(ax, pts)
        style(ax, xlabel="permutation (run)", ylabel=metric_label(pts), title=title, grid=None,
              legend=6)
    suptitle(fig, "Layer permutations (±2σ bands; right: kernel density)", rows)
    table.attrs["caption"] = caption(table, f"`{experiment}` rows: each circle one "
                                     "permutation's run; the baselines' runs of the same sweep",
                                     rows)
    return fig, save(fig, out_dir, name), table


def permutation_correlations(trials: pd.DataFrame, experiment: str = "permutations"
                             ) -> pd.DataFrame:
    """003 Table 1: for every pair of tasks (and train size), the Spearman and Pearson
    correlation of the scores of runs with the same layer order and seed; two-sided p. Pairs
    of tasks without one such pair of runs are left out (a 10^5-row store of many settings
    would otherwise list thousands of empty rows)."""
    perms = permutation_rows(trials, experiment)
    perms = perms[perms["role"] == PERMUTED]
    cols = ["task_a", "task_b", "size", "n", "spearman", "spearman_p", "pearson", "pearson_p"]
    out = []
    if perms.empty:
        return pd.DataFrame(out, columns=cols)
    # one wide table for every setting at once: a row per (setting, order, seed), a column
    # per task; a loop of pandas calls per setting and pair cost seconds at 10^4 trials
    wide = perms.assign(task=perms["task_name"]).groupby(
        ["size", "setting", "layer_order", "seed", "task"], sort=True)["score"].mean().unstack()
    for (size, setting), group in wide.groupby(level=["size", "setting"], sort=True):
        # tasks paired within one setting; the plain task names, the setting in the size
        size = f"{size}, {setting}" if setting else size
        present = {t for t in group.columns if group[t].notna().any()}
        tasks = [t for t in TASKS if t in present] + sorted(present - set(TASKS))
        seen = group[tasks].notna().to_numpy()
        for (i, a), (j, b) in combinations(enumerate(tasks), 2):
            both = seen[:, i] & seen[:, j]
            if not both.any():  # no run of one task shares its order and seed with the other
                continue
            row = {"task_a": a, "task_b": b, "size": size, "n": int(both.sum())}
            if row["n"] >= 3:
                paired = group.loc[both, [a, b]]
                if paired[a].nunique() > 1 and paired[b].nunique() > 1:
                    rho, p_rho = stats.spearmanr(paired[a], paired[b])
                    r, p_r = stats.pearsonr(paired[a], paired[b])
                    row.update(spearman=float(rho), spearman_p=float(p_rho), pearson=float(r),
                               pearson_p=float(p_r))
            out.append(row)
    return pd.DataFrame(out, columns=cols)
