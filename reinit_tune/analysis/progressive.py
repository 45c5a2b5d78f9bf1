"""003 Figure 1 / Figure 4 style: dev metric against k, the number of pretrained layers kept,
one line per train size (darker = more data), mean with 95% t-interval, seeds scattered when
there are many; one panel per task."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reinit_tune.analysis.stats import size_label, summarize

SCATTER_MIN_SEEDS = 10  # scatter individual seeds when a point averages at least this many


def progressive_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Per task, train size and k: n, mean score, std and 95% CI of the successful trials."""
    df = trials[(trials["experiment"] == "progressive") & (trials["status"] == "ok")].copy()
    if df.empty:
        return pd.DataFrame(columns=["task", "metric", "size", "train_examples", "k", "n", "mean",
                                     "std", "ci_low", "ci_high"])
    df["size"] = df["train_size"].map(size_label)
    df["k"] = df["num_pretrained_layers"]
    table = summarize(df, ["task", "metric", "size", "k"])
    examples = df.groupby(["task", "size"])["train_examples"].median().rename("train_examples")
    table = table.join(examples, on=["task", "size"])
    return table.sort_values(["task", "train_examples", "k"]).reset_index(drop=True)


def plot_progressive(trials: pd.DataFrame, out_dir: str | Path, name: str = "progressive"):
    """Draw the figure; returns (figure, [png, pdf paths], table plotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = progressive_table(trials)
    if table.empty:
        raise ValueError("no successful progressive trials in the store")
    ok = trials[(trials["experiment"] == "progressive") & (trials["status"] == "ok")]
    tasks = list(dict.fromkeys(table["task"]))
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        sub = table[table["task"] == task]
        sizes = sub.sort_values("train_examples")["size"].unique().tolist()
        shades = np.linspace(0.35, 0.95, len(sizes)) if len(sizes) > 1 else [0.8]
        for size, shade in zip(sizes, shades, strict=True):
            line = sub[sub["size"] == size].sort_values("k")
            color = plt.cm.Blues(shade)
            yerr = np.vstack([line["mean"] - line["ci_low"], line["ci_high"] - line["mean"]])
            n_label = "/".join(str(n) for n in sorted(line["n"].unique()))
            ax.errorbar(line["k"], line["mean"], yerr=np.nan_to_num(yerr), color=color,
                        marker="o", ms=4, capsize=3, label=f"{size} examples (n={n_label}/pt)")
            if line["n"].max() >= SCATTER_MIN_SEEDS:
                pts = ok[(ok["task"] == task) & (ok["train_size"].map(size_label) == size)]
                jitter = np.random.default_rng(0).uniform(-0.12, 0.12, len(pts))
                ax.scatter(pts["num_pretrained_layers"] + jitter, pts["score"], s=6,
                           color=color, alpha=0.35, linewidths=0)
        n_layers = int(ok.loc[ok["task"] == task, "num_layers"].max())
        ax.set_xticks(range(0, n_layers + 1))
        ax.set_xlabel("k (pretrained layers kept; k+1..L reinitialized)")
        ax.set_ylabel(f"dev {sub['metric'].iloc[0]}")
        ax.set_title(task.upper())
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Progressive reinitialization (mean, 95% t-interval)", fontsize=10)
    fig.tight_layout()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    for p in paths:
        fig.savefig(p, dpi=150)
    plt.close(fig)
    return fig, paths, table


def format_table(table: pd.DataFrame) -> str:
    shown = table[["task", "metric", "size", "k", "n", "mean", "ci_low", "ci_high"]]
    return shown.to_string(index=False, float_format=lambda v: f"{v:.4f}")
