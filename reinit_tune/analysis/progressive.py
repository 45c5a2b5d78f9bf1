"""003 Figure 1 / Figure 4: dev metric against k, the number of pretrained layers kept, one
solid line per train size (darker = more data), mean with 95% t-interval, seeds scattered
when there are many; the probing curve of each layer (003 §3, rows of the ``probing``
experiment, k = probed layer, 0 = embeddings) overlaid dashed. One panel per task.

``plot_small_data`` is 003 Figure 4 on its own: every run of the small-data regime as a dot,
the mean as a dotted line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reinit_tune.analysis import frames
from reinit_tune.analysis.baselines import dev_reference
from reinit_tune.analysis.plotting import (
    caption,
    ci_yerr,
    metric_label,
    n_label,
    panel_tasks,
    panel_title,
    panels,
    per_setting,
    pyplot,
    reference_lines,
    runs_per,
    save,
    style,
    suptitle,
)
from reinit_tune.analysis.stats import size_labels, summarize
from reinit_tune.errors import NoResultsError

SCATTER_MIN_SEEDS = 10
# Probing settings drawn dashed on one panel at most: every probing setting of the panel's
# task and model is its own line, and a store of many settings made legends of dozens.
PROBE_LINES = 6  # scatter individual seeds when a point averages at least this many
SMALL_DATA = 500  # 003 App. B: the 500-example regime (50 runs)
COLUMNS = ["task", "setting", "metric", "size", "train_examples", "k", "n", "mean", "std", "ci_low",
           "ci_high", "ci_clipped", "curve"]
# What the figures lay out (``frames.split``): a panel per task, a line per train size, k on
# the x axis; probing curves by the probed layer. Every other field that varies splits panels.
SERIES, X, PROBE_X = ("task", "train_size"), ("reinit_layers",), ("probe_layer",)


def with_metrics(df: pd.DataFrame, metrics: dict[str, str] | None) -> pd.DataFrame:
    """``df`` with ``score``/``metric`` taken from another stored metric for some tasks
    (001 reports MRPC as the mean of accuracy and F1: ``{"mrpc": "acc_and_f1"}``)."""
    if not metrics or df.empty:
        return df
    df = df.copy()
    for task, metric in metrics.items():
        rows = df["task"] == task
        df.loc[rows, "score"] = df.loc[rows, f"eval_{metric}"]
        df.loc[rows, "metric"] = metric
        # the baselines drawn under the curve are this metric's, never the primary one's
        majority, chance = dev_reference(task, metric) or (float("nan"), float("nan"))
        df.loc[rows, "majority_score"] = majority
        df.loc[rows, "chance_score"] = float("nan") if chance is None else chance
    return df


def _curve_table(df: pd.DataFrame, k_column: str, curve: str) -> pd.DataFrame:
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = df.copy()
    df["size"] = size_labels(df)
    df["k"] = df[k_column].astype(int)
    table = summarize(df, ["task", "setting", "metric", "size", "k"])
    examples = df.groupby(["task", "size"])["train_examples"].median().rename("train_examples")
    table = table.join(examples, on=["task", "size"])
    table["curve"] = curve
    return table.sort_values(["task", "train_examples", "k"]).reset_index(drop=True)[COLUMNS]


def _rows(trials: pd.DataFrame, experiment: str, metrics: dict[str, str] | None = None,
          ) -> pd.DataFrame:
    rows = with_metrics(frames.normalize(frames.ok(trials, experiment)), metrics)
    return frames.split(rows, SERIES, X)


def progressive_table(trials: pd.DataFrame, experiment: str = "progressive",
                      metrics: dict[str, str] | None = None) -> pd.DataFrame:
    """Per task, train size and k: n, mean score, std and 95% CI of the successful trials of
    ``experiment`` (``metrics``: see ``with_metrics``), one task label per setting that
    differs in anything but the seed (``frames.split``)."""
    return _curve_table(_rows(trials, experiment, metrics), "num_pretrained_layers",
                        "finetune")


def _probe_rows(trials: pd.DataFrame, experiment: str) -> pd.DataFrame:
    rows = frames.normalize(frames.ok(trials, experiment))
    return frames.split(rows[rows["probe_layer"].notna()], SERIES, PROBE_X)


def probing_table(trials: pd.DataFrame, experiment: str = "probing") -> pd.DataFrame:
    """Per task, train size and probed layer k (0 = embeddings .. L): the probe's score."""
    return _curve_table(_probe_rows(trials, experiment), "probe_layer", "probe")


def _overlay(probes: pd.DataFrame, panels_of: pd.DataFrame) -> pd.DataFrame:
    """The probing rows drawn on each finetuning panel: those of the panel's task and model
    (probes are their own experiment: their settings are never pooled with each other, and
    each setting is its own dashed line). ``task`` is the panel's label."""
    drawn = []
    for label, panel in panels_of.groupby("task", sort=False):
        mine = probes[(probes["task_name"] == panel["task_name"].iloc[0])
                      & probes["model"].isin(set(panel["model"]))]
        if not mine.empty:
            drawn.append(mine.assign(task=label))
    return pd.concat(drawn, ignore_index=True) if drawn else probes.iloc[:0]


def plot_progressive(trials: pd.DataFrame, out_dir: str | Path, name: str = "progressive", *,
                     experiment: str = "progressive", probing: str | None = "probing",
                     metrics: dict[str, str] | None = None):
    """Draw the figure of ``experiment``'s rows, with the probing curves of ``probing``'s;
    returns (figure, [png, pdf paths], table plotted: finetuning rows of every setting with
    ``curve`` "finetune" and the probing overlay of the panels drawn with ``curve``
    "probe")."""
    plt = pyplot()
    ok = _rows(trials, experiment, metrics)
    if ok.empty:
        raise NoResultsError(f"no successful {experiment} trials in the store")
    table = _curve_table(ok, "num_pretrained_layers", "finetune")
    tasks = panel_tasks(table)
    probe_rows = _probe_rows(trials, probing) if probing else ok.iloc[:0]
    # the overlay of the panels drawn: a copy of the probing rows per panel, for thousands
    # of panels, was millions of rows
    probe_rows = (_overlay(probe_rows, ok[ok["task"].isin(tasks)]) if not probe_rows.empty
                  else probe_rows)
    probes = _curve_table(probe_rows, "probe_layer", "probe")
    fig, axes = panels(len(tasks))
    hidden = 0  # probing lines left out past PROBE_LINES in a panel
    for ax, task in zip(axes[0], tasks, strict=True):
        sub = table[table["task"] == task]
        panel = ok[ok["task"] == task]
        panel.attrs = ok.attrs
        notes = frames.line_notes(panel).reindex(ok.index, fill_value="")
        sizes = sub.sort_values("train_examples")["size"].unique().tolist()
        shades = np.linspace(0.35, 0.95, len(sizes)) if len(sizes) > 1 else [0.8]
        colors = {size: plt.cm.Blues(shade) for size, shade in zip(sizes, shades, strict=True)}
        for size in sizes:
            line = sub[sub["size"] == size].sort_values("k")
            note = notes[(ok["task"] == task) & (ok["size"] == size)]
            note = f", {note.iloc[0]}" if len(note) and note.iloc[0] else ""
            ax.errorbar(line["k"], line["mean"], yerr=ci_yerr(line), color=colors[size],
                        marker="o", ms=4, capsize=3,
                        label=f"{size} examples{note} ({n_label(line['n'])}/pt)")
            if line["n"].max() >= SCATTER_MIN_SEEDS:
                pts = ok[(ok["task"] == task) & (size_labels(ok) == size)]
                jitter = np.random.default_rng(0).uniform(-0.12, 0.12, len(pts))
                ax.scatter(pts["num_pretrained_layers"] + jitter, pts["score"], s=6,
                           color=colors[size], alpha=0.35, linewidths=0)
        overlay = probes[probes["task"] == task]
        runs = runs_per(overlay, ["size", "setting"])
        lines = sorted(runs, key=lambda key: -runs[key])  # stable: the table's order on ties
        hidden += max(len(lines) - PROBE_LINES, 0)
        for (size, setting), line in overlay.groupby(["size", "setting"], sort=False):
            if (size, setting) not in lines[:PROBE_LINES]:
                continue
            line = line.sort_values("k")
            ax.errorbar(line["k"], line["mean"], yerr=ci_yerr(line), ls="--", marker="s", ms=3,
                        capsize=2, color=colors.get(size, "0.35"),
                        label=f"probe, {size} examples{', ' + setting if setting else ''} "
                              f"({n_label(line['n'])}/pt)")
        n_layers = int(ok.loc[ok["task"] == task, "num_layers"].max())
        reference_lines(ax, ok[ok["task"] == task])
        ax.set_xticks(range(0, n_layers + 1))
        style(ax, xlabel="k (pretrained layers kept; k+1..L reinitialized)",
              ylabel=metric_label(sub), title=panel_title(task))
    suptitle(fig, "Progressive reinit. (mean, 95% t-CI)"
             + ("; dashed: probing" if not probes.empty else ""), ok)
    # concatenating an empty frame would make every column an object column
    plotted = pd.concat([table, probes], ignore_index=True) if not probes.empty else table
    plotted.attrs["caption"] = caption(plotted, f"`{experiment}` rows" + (
        f"; dashed: `{probing}` rows of the same model and task" if not probes.empty else ""),
        ok)
    if hidden:
        plotted.attrs["caption"] += (
            f" A panel draws at most {PROBE_LINES} probing settings (those with the most runs): "
            f"{hidden} dashed lines are left out; their numbers are in the table (curve "
            "\"probe\").")
    return fig, save(fig, out_dir, name), plotted


def plot_probing(trials: pd.DataFrame, out_dir: str | Path, name: str = "probing", *,
                 experiment: str = "probing"):
    """Probe score against the hidden state probed (0 = embeddings .. L), a line per train
    size, one panel per task (000 Fig. 2: probing after dropping the top layers)."""
    table = probing_table(trials, experiment)
    if table.empty:
        raise NoResultsError(f"no successful {experiment} trials in the store")
    rows = _probe_rows(trials, experiment)
    tasks = panel_tasks(table)
    fig, axes = panels(len(tasks))
    for ax, task in zip(axes[0], tasks, strict=True):
        sub = table[table["task"] == task]
        for size, line in sub.groupby("size", sort=False):
            line = line.sort_values("k")
            ax.errorbar(line["k"], line["mean"], yerr=ci_yerr(line), marker="s", ms=3,
                        capsize=2, label=f"{size} examples ({n_label(line['n'])}/pt)")
        reference_lines(ax, rows[rows["task"] == task])
        style(ax, xlabel="layers kept (probe on hidden state k; 0 = embeddings)",
              ylabel=metric_label(sub), title=panel_title(task))
    suptitle(fig, "Linear probe on the frozen encoder's layer k (mean, 95% t-CI)", rows)
    table.attrs["caption"] = caption(table, f"`{experiment}` rows", rows)
    return fig, save(fig, out_dir, name), table


def plot_step_losses(trials: pd.DataFrame, steps: pd.DataFrame, out_dir: str | Path,
                     name: str = "training_loss", *, experiment: str,
                     line: str = "num_pretrained_layers"):
    """Training loss against iteration (001 Figs 1, 4), one panel per task, one line per
    value of ``line`` (k, or the intermediate task), averaged over runs at each step."""
    # a line per task and k (or intermediate task); other sizes or settings are split
    ok = frames.split(frames.normalize(frames.ok(trials, experiment)),
                      ("task", "reinit_layers", "intermediate_task"))
    df = steps.merge(ok[["trial_id", "task", line]], on="trial_id")
    if df.empty:
        raise NoResultsError(f"no per-step losses of {experiment} trials in the store (run it "
                             "with --log-every)")
    df[line] = df[line].fillna("none")
    table = summarize(df, ["task", line, "step"], value="train_loss")
    tasks = panel_tasks(table)
    fig, axes = panels(len(tasks))
    for ax, task in zip(axes[0], tasks, strict=True):
        sub = table[table["task"] == task]
        for value, curve in sub.groupby(line, sort=True):
            curve = curve.sort_values("step")
            ax.plot(curve["step"], curve["mean"], lw=1,
                    label=f"{line.replace('_', ' ')} {value} ({n_label(curve['n'])}/pt)")
        style(ax, xlabel="iteration (optimizer step)", ylabel="training loss",
              title=panel_title(task), legend=6)
    suptitle(fig, "Training loss per iteration", ok)
    table.attrs["caption"] = (f"Rows read: the per-step losses of `{experiment}` trials. Each "
                              "point is the loss of one step's batch, averaged over the runs "
                              f"that logged it ({n_label(table['n'])}). "
                              + frames.split_note(ok.attrs["split"], ok.attrs["per_series"]))
    return fig, save(fig, out_dir, name), table


def small_data_rows(trials: pd.DataFrame) -> pd.DataFrame:
    """Runs of the small-data regime: the ``small_data`` experiment when the store has it,
    else progressive runs with at most 500 training examples (``source`` says which)."""
    rows = frames.ok(trials, "small_data")
    source = "small_data"
    if rows.empty:
        rows = frames.ok(trials, "progressive")
        rows = rows[rows["train_examples"] <= SMALL_DATA]
        source = "progressive (<= 500 examples)"
    rows = frames.split(rows, SERIES, X)
    rows["source"] = source
    rows["size"] = size_labels(rows)
    rows["k"] = rows["num_pretrained_layers"].astype(int)
    return rows.reset_index(drop=True)


def plot_small_data(trials: pd.DataFrame, out_dir: str | Path, name: str = "small_data"):
    """003 Figure 4: every run as a dot at its k, the mean as a dotted line, per task and
    small train size. Returns (figure, paths, per-k table of n and mean)."""
    rows = small_data_rows(trials)
    if rows.empty:
        raise NoResultsError("no small-data runs (<= 500 examples) in the store")
    table = summarize(rows, ["task", "metric", "size", "k"])
    fig, axes, columns = per_setting(rows)
    rng = np.random.default_rng(0)
    for col, title, pts in columns:
        ax = axes[0, col]
        task, size = pts["task"].iloc[0], pts["size"].iloc[0]
        line = table[(table["task"] == task) & (table["size"] == size)].sort_values("k")
        ax.scatter(pts["k"] + rng.uniform(-0.15, 0.15, len(pts)), pts["score"], s=8,
                   alpha=0.45, linewidths=0, color="tab:blue", label="one run")
        ax.plot(line["k"], line["mean"], ls="--", color="k", marker="_",
                label=f"mean ({n_label(line['n'])} runs/pt)")
        reference_lines(ax, pts)
        ax.set_xticks(sorted(pts["k"].unique()))
        style(ax, xlabel="k (pretrained layers kept)", ylabel=metric_label(line), title=title)
    suptitle(fig, "Small-data runs: each dot one run (seed = train subset)", rows, 10)
    table.attrs["caption"] = caption(table, f"`{rows['source'].iloc[0]}` rows", rows)
    return fig, save(fig, out_dir, name), table
