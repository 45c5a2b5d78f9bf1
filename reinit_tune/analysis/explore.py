"""The report's explorable trial table: one row per trial, its score and experiment axes
first, then its per-epoch dev scores as a small inline chart (only where some trial was
scored after more than one epoch), runtimes and device; sortable by any column and
filterable as you type, in the browser, with no network access (plain HTML, inline SVG and a
few lines of JavaScript in the page).

Also the page's one rule for empty cells: a value that is missing (None, NaN, pandas' NA,
whatever dtype the store's reader gave the column) is shown as nothing, never as a word."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from reinit_tune import store
from reinit_tune.analysis.stats import size_label

# Shown first: what identifies a trial in the papers' terms, then what it cost.
COLUMNS = [
    ("score", "score"), ("metric", "metric"), ("experiment", "experiment"), ("task", "task"),
    ("size", "size"), ("seed", "seed"), ("k", "k kept"), ("surgery", "surgery"),
    ("epochs", "epochs"), ("curve", "dev score per epoch"), ("model", "model"),
    ("lr", "lr"), ("batch_size", "batch"), ("status", "status"),
    ("total_time_s", "time s"), ("train_examples_per_s", "train ex/s"), ("device", "device"),
    ("precision_used", "precision"), ("trial_id", "trial id"), ("error", "error"),
]

SCRIPT = """
<script>
(function () {
  const table = document.getElementById('trials');
  const body = table.tBodies[0];
  const filter = document.getElementById('trial-filter');
  const count = document.getElementById('trial-count');
  function show() {
    const words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
    let shown = 0;
    for (const row of body.rows) {
      const text = row.textContent.toLowerCase();
      const keep = words.every(w => text.includes(w));
      row.style.display = keep ? '' : 'none';
      shown += keep;
    }
    count.textContent = shown + ' of ' + body.rows.length + ' trials';
  }
  filter.addEventListener('input', show);
  function sort(th, column, up) {
      table.tHead.querySelectorAll('th').forEach(h => delete h.dataset.order);
      th.dataset.order = up ? 'up' : 'down';
      const rows = Array.from(body.rows);
      rows.sort((a, b) => {
        const x = a.cells[column].dataset.sort, y = b.cells[column].dataset.sort;
        const nx = parseFloat(x), ny = parseFloat(y);
        const c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return up ? c : -c;
      });
      rows.forEach(r => body.appendChild(r));
  }
  const headers = Array.from(table.tHead.querySelectorAll('th'));
  headers.forEach((th, column) => {
    th.addEventListener('click', () => sort(th, column, th.dataset.order !== 'up'));
  });
  // A link can open the table filtered and sorted: report.html#filter=sst2&sort=-score;
  // with &view=trials the page shows only its title and this table, every row that passes
  // the filter (what scripts/report_screenshot.py captures); &view=page keeps the page as it
  // is, scrolled to its top.
  const wanted = new URLSearchParams(location.hash.slice(1));
  if (wanted.has('filter')) filter.value = wanted.get('filter');
  if (wanted.has('sort')) {
    const key = wanted.get('sort'), up = !key.startsWith('-');
    const column = headers.findIndex(h => h.textContent === key.replace(/^-/, ''));
    if (column >= 0) sort(headers[column], column, up);
  }
  show();
  const section = document.getElementById('trials-section');
  function focus() {  // once the whole page is parsed: this script runs in its middle
    for (const el of document.body.children) {
      const keep = el === section || el.tagName === 'H1' || el.id === 'about';
      if (!keep && el.tagName !== 'SCRIPT') el.style.display = 'none';
    }
    table.parentElement.style.maxHeight = 'none';
    document.body.style.maxWidth = 'none';  // the table's columns, not the prose, set the width
  }
  if (wanted.get('view') === 'trials') {
    if (document.readyState === 'loading') {
      document.addEventListener('DOMContentLoaded', focus);
    } else {
      focus();
    }
  } else if (!wanted.has('view') && (wanted.has('filter') || wanted.has('sort'))) {
    section.scrollIntoView();  // not with &view=page: headless Chromium shoots a blank page
  }
})();
</script>
"""

CSS = """
#trials th{cursor:pointer;position:sticky;top:0}
#trials th[data-order=up]::after{content:' \\25B2'}
#trials th[data-order=down]::after{content:' \\25BC'}
#trials td{white-space:nowrap}#trials td.error{white-space:normal;max-width:28em;color:#a00}
#trials td.surgery{white-space:normal;min-width:10em;max-width:22em;text-align:left}
.scroll{max-height:40em;overflow:auto;border:1px solid #ddd}
#trial-filter{width:30em;max-width:90%;padding:3px}
"""


def missing(value) -> bool:
    """Whether a cell holds no value: None, NaN, pandas' NA or NaT. Which of them a missing
    string comes back as depends on the pandas version and the column's dtype (object
    columns give None, pandas 3's string columns NaN), so every check goes through here."""
    if value is None:
        return True
    if np.ndim(value) != 0:  # a list or array cell (layers, heads): a value, even if empty
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _items(value) -> list:
    """A list-valued cell (reinit_layers, reinit_heads, layer_order) as a list, [] if
    missing."""
    return [] if missing(value) else list(value)


def surgery(row: dict) -> str:
    """A trial's surgery and mode in a few words."""
    parts = []
    layers = _items(row.get("reinit_layers"))
    if layers:
        parts.append("reinit " + ",".join(str(int(i)) for i in layers))
    heads = _items(row.get("reinit_heads"))
    if heads:
        parts.append("heads " + " ".join(f"{int(a)}.{int(b)}" for a, b in heads))
    order = _items(row.get("layer_order"))
    if order:
        parts.append("order " + ",".join(str(int(i)) for i in order))
    if not missing(row.get("probe_layer")):
        parts.append(f"probe layer {int(row['probe_layer'])}")
    if not missing(row.get("intermediate_task")) and str(row["intermediate_task"]):
        parts.append(f"after {row['intermediate_task']}")
    multiplier = row.get("reinit_lr_multiplier")
    if not missing(multiplier) and float(multiplier) != 1.0:
        parts.append(f"lr x{float(multiplier):g}")
    if not missing(row.get("preserve_layernorm")) and bool(row["preserve_layernorm"]):
        parts.append("LayerNorm kept")
    return "; ".join(parts) or "none"


def sparkline(points: list[tuple[int, float]], width: int = 90, height: int = 22) -> str:
    """An inline SVG polyline of (epoch, score), its values in the tooltip; a trial scored
    once (``--eval final``) gets its one value as text, since a line needs two points."""
    points = [(e, s) for e, s in points if not missing(s)]
    if not points:
        return ""
    if len(points) == 1:
        epoch, score = points[0]
        return f"<span title='scored after the last epoch only'>epoch {epoch}: {score:.4f}</span>"
    scores = [s for _, s in points]
    low, high = min(scores), max(scores)
    span = (high - low) or 1.0
    last = max(len(points) - 1, 1)
    xy = " ".join(f"{2 + i * (width - 4) / last:.1f},"
                  f"{height - 2 - (s - low) / span * (height - 4):.1f}"
                  for i, (_, s) in enumerate(points))
    title = html.escape(", ".join(f"epoch {e}: {s:.4f}" for e, s in points))
    return (f"<svg width='{width}' height='{height}' role='img'><title>{title}</title>"
            f"<polyline points='{xy}' fill='none' stroke='#1f77b4' stroke-width='1.5'/></svg>")


def _cell(key: str, row: dict, curve: str) -> tuple[str, str]:
    """(shown html, sort key) of one cell."""
    if key == "curve":
        score = row.get("score")
        return curve, "" if missing(score) else repr(float(score))
    value = row.get(key)
    if missing(value):
        return "", ""
    if isinstance(value, float | np.floating):
        shown = f"{value:.4g}" if key != "score" else f"{value:.4f}"
        return shown, repr(float(value))
    return html.escape(str(value)), html.escape(str(value))


# About 1 kB of page per trial: past this many the page would take long to open and the
# filter to answer, so the failed trials and the best-scoring rest are shown.
MAX_ROWS = 5000


def _shown(trials: pd.DataFrame, limit: int) -> pd.DataFrame:
    if len(trials) <= limit:
        return trials
    failed = trials["status"] != "ok"
    rest = trials[~failed].sort_values("score", ascending=False)
    return pd.concat([trials[failed], rest]).head(limit)


def trial_table(trials: pd.DataFrame, epochs: pd.DataFrame, limit: int = MAX_ROWS) -> str:
    """The explorable table of every trial (see the module docstring), at most ``limit``
    rows."""
    if trials.empty:
        return "<p>No trials in the store yet.</p>"
    total = len(trials)
    trials = _shown(trials, limit)
    note = (f"<p>The table shows {len(trials)} of the store's {total} trials: the failed "
            "ones, then the best scores. Every trial is in the store "
            "(<code>reinit_tune.store.load_trials</code>).</p>" if len(trials) < total else "")
    # Epochs that were not evaluated (--eval final) have no score: no point of the curve.
    curves = {tid: [(e, s) for e, s in zip(group["epoch"], group["score"], strict=True)
                    if not missing(s)]
              for tid, group in epochs.sort_values("epoch").groupby("trial_id")}
    # Under the default --eval final every trial has one dev score, the one in the score
    # column already: a column of single values would only repeat it.
    columns = [(key, label) for key, label in COLUMNS
               if key != "curve" or any(len(c) > 1 for c in curves.values())]
    rows = []
    for row in trials.to_dict("records"):
        row["size"] = size_label(store.stored_size(row))
        row["k"] = row.get("num_pretrained_layers")
        row["surgery"] = surgery(row)
        cells = []
        for key, _ in columns:
            shown, order = _cell(key, row, sparkline(curves.get(row["trial_id"], []))
                                 if key == "curve" else "")
            css = f" class='{key}'" if key in ("error", "surgery") else ""
            cells.append(f"<td data-sort='{order}'{css}>{shown}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th title='sort by {label}'>{html.escape(label)}</th>"
                   for _, label in columns)
    return (f"<style>{CSS}</style>{note}<p><input id='trial-filter' placeholder='filter: words "
            "that must all appear in a row, e.g. sst2 progressive ok'> "
            "<span id='trial-count'></span> (click a column to sort)</p>"
            f"<div class='scroll'><table id='trials'><thead><tr>{head}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>" + SCRIPT)
