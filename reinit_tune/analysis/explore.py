"""The report's explorable trial table: one row per trial, its score and experiment axes
first, then its per-epoch dev scores as a small inline chart, runtimes and device; sortable
by any column and filterable as you type, in the browser, with no network access (plain
HTML, inline SVG and a few lines of JavaScript in the page)."""

from __future__ import annotations

import html
import math

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
  // A link can open the table filtered and sorted: report.html#filter=sst2&sort=-score
  const wanted = new URLSearchParams(location.hash.slice(1));
  if (wanted.has('filter')) filter.value = wanted.get('filter');
  if (wanted.has('sort')) {
    const key = wanted.get('sort'), up = !key.startsWith('-');
    const column = headers.findIndex(h => h.textContent === key.replace(/^-/, ''));
    if (column >= 0) sort(headers[column], column, up);
  }
  show();
  if (wanted.has('filter') || wanted.has('sort')) table.scrollIntoView();
})();
</script>
"""

CSS = """
#trials th{cursor:pointer;position:sticky;top:0}
#trials th[data-order=up]::after{content:' \\25B2'}
#trials th[data-order=down]::after{content:' \\25BC'}
#trials td{white-space:nowrap}#trials td.error{white-space:normal;max-width:28em;color:#a00}
.scroll{max-height:40em;overflow:auto;border:1px solid #ddd}
#trial-filter{width:30em;padding:3px}
"""


def surgery(row: dict) -> str:
    """A trial's surgery and mode in a few words."""
    parts = []
    layers = row.get("reinit_layers") or ()
    if len(layers):
        parts.append("reinit " + ",".join(str(int(i)) for i in layers))
    heads = row.get("reinit_heads") or ()
    if len(heads):
        parts.append("heads " + " ".join(f"{int(a)}.{int(b)}" for a, b in heads))
    if row.get("layer_order") is not None:
        parts.append("order " + ",".join(str(int(i)) for i in row["layer_order"]))
    if row.get("probe_layer") is not None and not _missing(row["probe_layer"]):
        parts.append(f"probe layer {int(row['probe_layer'])}")
    if row.get("intermediate_task"):
        parts.append(f"after {row['intermediate_task']}")
    if row.get("reinit_lr_multiplier") not in (None, 1.0):
        parts.append(f"lr x{row['reinit_lr_multiplier']:g}")
    if row.get("preserve_layernorm"):
        parts.append("LayerNorm kept")
    return "; ".join(parts) or "none"


def sparkline(points: list[tuple[int, float]], width: int = 90, height: int = 22) -> str:
    """An inline SVG polyline of (epoch, score), its values in the tooltip."""
    points = [(e, s) for e, s in points if not _missing(s)]
    if not points:
        return ""
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


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _cell(key: str, row: dict, curve: str) -> tuple[str, str]:
    """(shown html, sort key) of one cell."""
    if key == "curve":
        return curve, str(row.get("score", ""))
    value = row.get(key)
    if _missing(value):
        return "", ""
    if isinstance(value, float):
        shown = f"{value:.4g}" if key != "score" else f"{value:.4f}"
        return shown, repr(value)
    return html.escape(str(value)), html.escape(str(value))


def trial_table(trials: pd.DataFrame, epochs: pd.DataFrame) -> str:
    """The explorable table of every trial (see the module docstring)."""
    if trials.empty:
        return "<p>No trials in the store yet.</p>"
    curves = {tid: list(zip(group["epoch"], group["score"], strict=True))
              for tid, group in epochs.sort_values("epoch").groupby("trial_id")}
    rows = []
    for row in trials.to_dict("records"):
        row["size"] = size_label(store.stored_size(row))
        row["k"] = row.get("num_pretrained_layers")
        row["surgery"] = surgery(row)
        cells = []
        for key, _ in COLUMNS:
            shown, order = _cell(key, row, sparkline(curves.get(row["trial_id"], [])))
            css = " class='error'" if key == "error" else ""
            cells.append(f"<td data-sort='{order}'{css}>{shown}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th title='sort by {label}'>{html.escape(label)}</th>"
                   for _, label in COLUMNS)
    return (f"<style>{CSS}</style><p><input id='trial-filter' placeholder='filter: words "
            "that must all appear in a row, e.g. sst2 progressive ok'> "
            "<span id='trial-count'></span> (click a column to sort)</p>"
            f"<div class='scroll'><table id='trials'><thead><tr>{head}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>" + SCRIPT)
