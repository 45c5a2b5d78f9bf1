"""The report's explorable tables: the trial table (one row per trial, every trial of the
store, its score and experiment axes first, then its per-epoch dev scores as a small inline
chart where some trial was scored after more than one epoch, runtimes and device) and any
long table of numbers (``data_table``). Every row is embedded compactly in the page and
shown a page at a time, sortable by any column and filterable as you type over all rows, in
the browser, with no network access (a few lines of JavaScript in the page: ``SCRIPT``, once
per page, and ``CSS``).

Also the page's one rule for empty cells: a value that is missing (None, NaN, pandas' NA,
whatever dtype the store's reader gave the column) is shown as nothing, never as a word."""

from __future__ import annotations

import base64
import gzip
import html
import json
import re

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

# Rows travel as one JSON document ({"columns", "kinds", "rows"}: the column names once, a
# row an array of values), gzip-compressed and base64-encoded, and the page's script unpacks
# it with the browser's own DecompressionStream: about 60 bytes of page per trial instead of
# ~0.8 kB of HTML, so every trial fits. The script renders one page of rows at a time from
# the filtered, sorted list of all rows (a DOM of 10^5 rows would not stay usable).
PAGE_ROWS = 100
# The trial table's share of the page at most: with ~76 bytes a trial, 2.6 * 10^5 trials; the
# figures add ~1.3 MB each (12 panels at most), so a page stays near 30 MB.
MAX_TABLE_BYTES = 20_000_000

SCRIPT = """
<script>
(function () {
  function esc(s) {
    return String(s).replace(/[&<>'"]/g, c => '&#' + c.charCodeAt(0) + ';');
  }
  function number(v) {  // 4 significant digits, as the page's static tables print
    return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
  }
  function spark(points) {  // (epoch, score) pairs: an inline SVG line, one value as text
    if (!points || !points.length) return '';
    if (points.length === 1) {
      return "<span title='scored after the last epoch only'>epoch " + points[0][0] + ': ' +
        points[0][1].toFixed(4) + '</span>';
    }
    const w = 90, h = 22, ys = points.map(p => p[1]);
    const low = Math.min(...ys), span = (Math.max(...ys) - low) || 1, last = points.length - 1;
    const xy = points.map((p, i) => (2 + i * (w - 4) / last).toFixed(1) + ',' +
      (h - 2 - (p[1] - low) / span * (h - 4)).toFixed(1)).join(' ');
    const title = points.map(p => 'epoch ' + p[0] + ': ' + p[1].toFixed(4)).join(', ');
    return "<svg width='" + w + "' height='" + h + "' role='img'><title>" + title +
      "</title><polyline points='" + xy + "' fill='none' stroke='#1f77b4' " +
      "stroke-width='1.5'/></svg>";
  }
  function shown(v, kind) {
    if (v === null || v === undefined) return '';
    if (kind === 'curve') return spark(v);
    if (typeof v === 'number') return kind === 'score' ? v.toFixed(4) : number(v);
    return esc(v);
  }
  function order(v, kind) {  // the sort key: numbers before text, nothing last
    if (kind === 'curve') v = v && v.length ? v[v.length - 1][1] : null;
    return v;
  }
  async function unpack(text) {
    const bytes = Uint8Array.from(atob(text), c => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return JSON.parse(await new Response(stream).text());
  }
  async function start(box) {
    const data = await unpack(box.querySelector('.dt-data').textContent);
    const table = box.querySelector('table'), body = table.tBodies[0];
    const filter = box.querySelector('.dt-filter'), count = box.querySelector('.dt-count');
    const pageBox = box.querySelector('.dt-page'), pages = box.querySelector('.dt-pages');
    const what = box.dataset.what, size = Number(box.dataset.pageRows);
    const kinds = data.kinds, css = data.css || [];
    const text = data.rows.map(r => r.map((v, i) => kinds[i] === 'curve' ? '' :
      (v === null ? '' : typeof v === 'number' ? (kinds[i] === 'score' ? v.toFixed(4) :
        number(v)) : String(v))).join(' ').toLowerCase());
    let rows = data.rows.map((_, i) => i), page = 0;
    function draw() {
      const last = Math.max(0, Math.ceil(rows.length / size) - 1);
      page = Math.min(Math.max(page, 0), last);
      const html = [];
      for (const i of rows.slice(page * size, (page + 1) * size)) {
        html.push('<tr>' + data.rows[i].map((v, c) => '<td' + (css[c] ? " class='" +
          css[c] + "'" : '') + '>' + shown(v, kinds[c]) + '</td>').join('') + '</tr>');
      }
      body.innerHTML = html.join('');
      count.textContent = rows.length + ' of ' + data.rows.length + ' ' + what;
      pageBox.value = page + 1;
      pageBox.max = last + 1;
      box.querySelector('.dt-of').textContent = last + 1;
      pages.style.display = last ? '' : 'none';
    }
    let sorted = null;  // [column, up]
    function apply() {
      const words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
      rows = data.rows.map((_, i) => i).filter(i => words.every(w => text[i].includes(w)));
      if (sorted) {
        const [c, up] = sorted, kind = kinds[c];
        const keys = data.rows.map(r => order(r[c], kind));
        rows.sort((a, b) => {
          const x = keys[a], y = keys[b];
          if (x === null || y === null) return (x === null) - (y === null);
          const nx = typeof x === 'number', ny = typeof y === 'number';
          const d = nx && ny ? x - y : nx !== ny ? (nx ? -1 : 1) : x < y ? -1 : x > y ? 1 : 0;
          return up ? d : -d;
        });
      }
      draw();
    }
    const headers = Array.from(table.tHead.querySelectorAll('th'));
    function sortBy(column, up) {
      headers.forEach(h => delete h.dataset.order);
      headers[column].dataset.order = up ? 'up' : 'down';
      sorted = [column, up];
      page = 0;
      apply();
    }
    headers.forEach((th, column) => {
      th.addEventListener('click', () => sortBy(column, th.dataset.order !== 'up'));
    });
    filter.addEventListener('input', () => { page = 0; apply(); });
    box.querySelector('.dt-prev').addEventListener('click', () => { page -= 1; draw(); });
    box.querySelector('.dt-next').addEventListener('click', () => { page += 1; draw(); });
    pageBox.addEventListener('change', () => { page = Number(pageBox.value) - 1; draw(); });
    // A link can open the trial table filtered, sorted and paged:
    // report.html#filter=sst2&sort=-score&page=2; with &view=trials the page shows only its
    // title and this table (what scripts/report_screenshot.py captures); &view=page keeps
    // the page as it is, scrolled to its top.
    const wanted = new URLSearchParams(location.hash.slice(1));
    if (table.id !== 'trials') { apply(); return; }
    if (wanted.has('filter')) filter.value = wanted.get('filter');
    if (wanted.has('page')) page = Number(wanted.get('page')) - 1;
    const key = wanted.get('sort') || '';
    const column = headers.findIndex(h => h.textContent === key.replace(/^-/, ''));
    if (column >= 0) {
      headers[column].dataset.order = key.startsWith('-') ? 'down' : 'up';
      sorted = [column, !key.startsWith('-')];
    }
    apply();
    const section = document.getElementById('trials-section');
    if (wanted.get('view') === 'trials') {
      for (const el of document.body.children) {
        const keep = el === section || el.tagName === 'H1' || el.id === 'about';
        if (!keep && el.tagName !== 'SCRIPT') el.style.display = 'none';
      }
      table.parentElement.style.maxHeight = 'none';
      document.body.style.maxWidth = 'none';  // the columns, not the prose, set the width
    } else if (!wanted.has('view') && (wanted.has('filter') || wanted.has('sort'))) {
      section.scrollIntoView();  // not with &view=page: headless Chromium shoots a blank page
    }
  }
  function all() { document.querySelectorAll('.data-table').forEach(box => start(box)); }
  // run once the whole page is parsed: the tables' data may come after this script
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', all);
  else all();
})();
</script>
"""

CSS = """
.data-table th{cursor:pointer;position:sticky;top:0}
.data-table th[data-order=up]::after{content:' \\25B2'}
.data-table th[data-order=down]::after{content:' \\25BC'}
.data-table td{white-space:nowrap}#trials td.error{white-space:normal;max-width:28em;color:#a00}
#trials td.surgery{white-space:normal;min-width:10em;max-width:22em;text-align:left}
.scroll{max-height:40em;overflow:auto;border:1px solid #ddd}
.dt-filter{width:30em;max-width:90%;padding:3px}.dt-page{width:5em}
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


def cell_value(value, key: str = ""):
    """A cell as a JSON value: None where missing, a number rounded as the page shows it
    (a score to 4 decimals, other floats to 4 significant digits), else text."""
    if missing(value):
        return None
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return round(float(value), 4) if key == "score" else float(f"{value:.4g}")
    if isinstance(value, list | tuple | np.ndarray):
        return ", ".join(str(v) for v in value)
    return str(value)


def pack(document: dict) -> str:
    """``document`` as the page embeds it: JSON, gzip, base64 (``unpack`` reverses it)."""
    raw = json.dumps(document, separators=(",", ":"), allow_nan=False).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode()


def unpack(text: str) -> dict:
    """The JSON document of a data table's embedded rows (what the page's script reads)."""
    return json.loads(gzip.decompress(base64.b64decode(text)))


def tables_in(page: str) -> dict[str, dict]:
    """Every data table of a page, by its id: its embedded document (columns, kinds, rows)."""
    found = re.findall(r"<table id='([^']+)'>.*?<script type='application/gzip' "
                       r"class='dt-data'>([^<]*)</script>", page, flags=re.S)
    return {table_id: unpack(text) for table_id, text in found}


def data_table(table_id: str, columns: list[str], rows: list[list], *,
               kinds: list[str] | None = None, css: list[str] | None = None,
               what: str = "rows", placeholder: str = "filter: words that must all appear "
               "in a row", filter_id: str = "", count_id: str = "") -> str:
    """A table of any length that stays usable: every row embedded (``pack``), shown a page
    of ``PAGE_ROWS`` at a time, filtered as you type and sorted by a click on a column, over
    all rows, by the page's ``SCRIPT``. ``kinds``: per column "score" (4 decimals), "curve"
    (a list of (epoch, score): a sparkline) or "" (numbers to 4 significant digits)."""
    kinds = kinds or [""] * len(columns)
    document = {"columns": columns, "kinds": kinds, "css": css or [""] * len(columns),
                "rows": rows}
    head = "".join(f"<th title='sort by {html.escape(c)}'>{html.escape(c)}</th>"
                   for c in columns)
    filter_id = f" id='{filter_id}'" if filter_id else ""
    count_id = f" id='{count_id}'" if count_id else ""
    return (f"<div class='data-table' data-what='{html.escape(what)}' "
            f"data-page-rows='{PAGE_ROWS}'><p><input class='dt-filter'{filter_id} "
            f"placeholder='{html.escape(placeholder)}'> <span class='dt-count'{count_id}>"
            f"{len(rows)} {html.escape(what)} (the page's script shows them)</span> (click a "
            "column to sort) <span class='dt-pages'><button class='dt-prev'>&lsaquo; previous"
            "</button> page <input class='dt-page' type='number' min='1' value='1'> of "
            "<span class='dt-of'></span> <button class='dt-next'>next &rsaquo;</button>"
            f"</span></p><div class='scroll'><table id='{table_id}'><thead><tr>{head}</tr>"
            "</thead><tbody></tbody></table></div><script type='application/gzip' "
            f"class='dt-data'>{pack(document)}</script></div>")


# What the trial table reads of a trial: its shown columns and what its surgery, size and
# k are made from (a record of every stored column would cost memory per trial).
_READ = ["reinit_layers", "reinit_heads", "layer_order", "probe_layer", "intermediate_task",
         "reinit_lr_multiplier", "preserve_layernorm", "train_fraction", "train_size",
         "num_pretrained_layers"]


def _curves(epochs: pd.DataFrame) -> dict[str, list[list]]:
    """Per trial, its (epoch, score) points in epoch order; epochs that were not evaluated
    (--eval final) have no score: no point."""
    if epochs.empty:
        return {}
    scored = epochs.loc[epochs["score"].notna(), ["trial_id", "epoch", "score"]]
    scored = scored.sort_values(["trial_id", "epoch"], kind="stable")
    curves: dict[str, list[list]] = {}
    for tid, epoch, score in zip(scored["trial_id"], scored["epoch"].astype(int),
                                 scored["score"].round(4), strict=True):
        curves.setdefault(tid, []).append([int(epoch), float(score)])
    return curves


def trial_table(trials: pd.DataFrame, epochs: pd.DataFrame,
                limit_bytes: int = MAX_TABLE_BYTES) -> str:
    """The explorable table of every trial (see the module docstring), at most
    ``limit_bytes`` of page: past that, the failed trials and the best scores, said so."""
    if trials.empty:
        return "<p>No trials in the store yet.</p>"
    curves = _curves(epochs)
    # Under the default --eval final every trial has one dev score, the one in the score
    # column already: a column of single values would only repeat it.
    columns = [(key, label) for key, label in COLUMNS
               if key != "curve" or any(len(c) > 1 for c in curves.values())]
    read = [c for c in dict.fromkeys([k for k, _ in COLUMNS] + _READ) if c in trials]
    rows = []
    for row in trials[read].to_dict("records"):
        row["size"] = size_label(store.stored_size(row))
        row["k"] = row.get("num_pretrained_layers")
        row["surgery"] = surgery(row)
        rows.append([curves.get(row["trial_id"], []) if key == "curve"
                     else cell_value(row.get(key), key) for key, _ in columns])
    kinds = ["score" if key == "score" else "curve" if key == "curve" else ""
             for key, _ in columns]
    css = [key if key in ("error", "surgery") else "" for key, _ in columns]

    def table(shown: list[list]) -> str:
        return data_table(
            "trials", [label for _, label in columns], shown, kinds=kinds, css=css,
            what="trials", filter_id="trial-filter", count_id="trial-count",
            placeholder="filter: words that must all appear in a row, e.g. sst2 progressive ok")

    page = table(rows)
    if len(page) <= limit_bytes:
        return page
    # Past the bound (some 2.5 * 10^5 trials), the failed trials and the best scores are kept.
    keep = int(len(rows) * limit_bytes / len(page) * 0.95)
    failed = (trials["status"] != "ok").to_numpy()
    order = np.lexsort((-trials["score"].fillna(-np.inf).to_numpy(), ~failed))[:keep]
    return (f"<p class='warn'>The table holds {keep} of the store's {len(rows)} trials, the "
            f"failed ones, then the best scores: all of them would make the page larger than "
            f"{limit_bytes / 1e6:.0f} MB. Every trial is in the store "
            "(<code>reinit_tune.store.load_trials</code>).</p>" + table(
                [rows[i] for i in sorted(order)]))
