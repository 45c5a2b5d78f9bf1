"""One command from a results store to every figure and table the store can support.

    reinit-tune report --results DIR [--out DIR] [--only FIGURE ...] [--max-panels N]

Draws every figure the experiment families declare (``reinit_tune.families``) plus the
store-wide similarity figures, as PNG + PDF, and writes one self-contained ``report.html``:
figures embedded as base64, the numbers behind them with the n of every point, every trial,
the trial configurations, the library versions and devices, and the failed trials. Its cost
grows with the store's rows, not with its settings: a figure draws at most ``--max-panels``
panels (``plotting.capped``; its caption names the rest, its table holds every setting), and
long tables are embedded as compressed data and paged in the browser (``explore``). A
figure whose rows are not in the store is listed with the sweep that fills it; a figure that
fails to draw is reported in the page and makes the exit status 1.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import itertools
import json
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from reinit_tune import families, sanity, store, verdicts
from reinit_tune.analysis import explore, frames, plotting, published, similarity
from reinit_tune.config import TrialConfig
from reinit_tune.errors import NoResultsError
from reinit_tune.families.base import Figure, FigureSpec, plot
from reinit_tune.store.check import bad_scores
from reinit_tune.verdicts.page import claims_html, shown_commands
from reinit_tune.wording import counted

# Tables longer than this are embedded as data and paged in the browser (a static table of
# 10^4 rows is megabytes of HTML and a page that no longer scrolls).
STATIC_ROWS = 500
_table_ids = itertools.count()

# Figures that read every family's rows: any sweep run with --similarity fills them.
SIMILARITY = FigureSpec(
    "similarity", "Similarity of finetuned and pre-finetuning models per layer",
    "000 Fig. 3, §4.5; 002 Figs 1-3, §3-4", "the similarity table of any sweep run with "
    "--similarity",
    lambda store, out: [*plot("similarity_by_size", similarity.plot_similarity_by_size,
                              "trials", "similarity")(store, out),
                        *plot("similarity_by_task", similarity.plot_similarity_by_task,
                              "trials", "similarity")(store, out)],
)


@dataclass
class Section:
    """One figure spec of the report and what drawing it gave."""

    spec: FigureSpec
    needs: str  # what to run to fill it
    figures: list[Figure] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    skipped: str | None = None  # why nothing was drawn
    failed: str | None = None

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def title(self) -> str:
        return self.spec.title

    @property
    def source(self) -> str:
        return self.spec.source


def sections() -> list[Section]:
    """Every figure of the registered families, in the papers' order, then similarity."""
    found = [Section(spec, f"reinit-tune sweep {family.name}")
             for family in families.all_families() for spec in family.figures]
    return [*found, Section(SIMILARITY, "any sweep with --similarity")]


def experiments() -> list[str]:
    return [family.name for family in families.all_families()]


def undrawn_note(key: str, figure: Figure) -> str:
    """The caption's sentence on the panels a figure left out past the panel limit."""
    total = figure.drawn + len(figure.undrawn)
    named = "; ".join(figure.undrawn[:3]) + ("; ..." if len(figure.undrawn) > 3 else "")
    return (f" {len(figure.undrawn)} of the {total} settings (panels) are not drawn, to keep "
            f"the report's cost bounded: the {figure.drawn} with the most runs are (left out: "
            f"{named}). The numbers of every setting are in the table below; "
            f"`reinit-tune report --only {key} --max-panels {total}` draws them all.")


def build(results_dir: str | Path, out_dir: str | Path,
          only: list[str] | None = None, max_panels: int | None = None,
          ) -> tuple[list[Section], frames.Store]:
    """Draw every section the store supports (or the ``only`` ones) into ``out_dir``, each
    figure at most ``max_panels`` panels (default ``plotting.MAX_PANELS``)."""
    data = frames.load(results_dir)
    out = Path(out_dir)
    drawn = []
    for section in sections():
        if only and section.key not in only:
            continue
        try:
            with plotting.panel_limit(max_panels or plotting.MAX_PANELS):
                section.figures = section.spec.draw(data, out)
            for f in section.figures:
                if f.undrawn:
                    f.table.attrs["caption"] = (f.table.attrs.get("caption", "")
                                                + undrawn_note(section.key, f))
            tables = section.spec.tables(data) if section.spec.tables else {}
            section.tables = {k: v for k, v in tables.items() if not v.empty}
        except NoResultsError as e:  # the store has nothing for this figure
            section.skipped = str(e)
        except Exception:  # a bug: report it in the page, keep drawing the rest
            section.failed = traceback.format_exc(limit=4)
            print(f"error drawing {section.key}:\n{section.failed}", file=sys.stderr)
        drawn.append(section)
    return drawn, data


# -- HTML --------------------------------------------------------------------------------
CSS = """
body{font-family:system-ui,sans-serif;max-width:1250px;margin:2em auto;padding:0 1em;
color:#222}
h1{margin-bottom:0}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
.source{color:#666;font-size:.9em}figure{margin:1em 0}img{max-width:100%;
border:1px solid #eee}
.table-wrap{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;font-size:.8em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:right;vertical-align:top}
th{background:#f4f4f4}.text{text-align:left}td.text{overflow-wrap:anywhere;min-width:6em;
max-width:40em}td.key{text-align:left;white-space:nowrap}
.missing li{margin:.2em 0}.failed{color:#a00;white-space:pre-wrap}details{margin:.5em 0}
summary{cursor:pointer}
.warn{background:#fff4e5;border-left:4px solid #f0a030;padding:.4em .8em}
.paper{font-style:italic;color:#444}figcaption{font-size:.85em;color:#333}
.v{font-weight:600;white-space:nowrap}.v-supported{color:#176f2c}.v-contradicted{color:#b00020}
.v-inconclusive{color:#8a5a00}.v-not{color:#666}
#claims td.text{max-width:32em}#claims code{font-size:.95em;overflow-wrap:anywhere}
.sides{display:grid;grid-template-columns:repeat(auto-fit,minmax(18em,1fr));gap:.6em}
.side{border:1px solid #ddd;padding:.4em .6em}
"""


def _cell_text(value) -> str:
    """One table cell as text: nothing for a missing value (see ``explore.missing``)."""
    if explore.missing(value):
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, float | np.floating):
        return f"{value:.4g}"
    if isinstance(value, list | tuple | np.ndarray):
        return ", ".join(_cell_text(v) for v in value)
    return str(value)


def _table_html(df: pd.DataFrame, wrap: bool = False) -> str:
    """``df`` as an HTML table that fits the page: in a container that scrolls sideways when
    the table is wider than the page, its text cells wrapped (with ``wrap``, every cell).
    Past ``STATIC_ROWS`` rows, every row is embedded as data and shown a page at a time by
    the page's script (``explore.data_table``), filterable and sortable."""
    if len(df) > STATIC_ROWS:
        rows = [[explore.cell_value(v, str(c)) for c, v in zip(df.columns, values,
                                                              strict=True)]
                for values in df.itertuples(index=False, name=None)]
        return explore.data_table(f"table-{next(_table_ids)}", [str(c) for c in df.columns],
                                  rows)
    shown = df
    note = ""
    text = [c for c in shown.columns
            if wrap or not (pd.api.types.is_numeric_dtype(shown[c])
                            or pd.api.types.is_bool_dtype(shown[c]))]
    head = "".join(f"<th{' class=text' if c in text else ''}>{html.escape(str(c))}</th>"
                   for c in shown.columns)
    # With ``wrap`` the first column names the row (a field, a library): never broken.
    css = {c: " class=key" if wrap and i == 0 else " class=text" if c in text else ""
           for i, c in enumerate(shown.columns)}
    body = "".join(
        "<tr>" + "".join(f"<td{css[c]}>{html.escape(_cell_text(v))}</td>"
                         for c, v in zip(shown.columns, values, strict=True)) + "</tr>"
        for values in shown.itertuples(index=False, name=None))
    return (f"<div class='table-wrap'><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>{note}")


def _text(df: pd.DataFrame) -> str:
    """A table as printed under ``--only``: counts as whole numbers (a median of example
    counts is a float column), scores to 4 decimals, nothing for a missing value."""
    df = df.infer_objects()
    df = df[[c for c in df.columns if df.empty or not all(v == "" for v in df[c])]]
    for column in df.columns:
        values = df[column]
        if values.dtype.kind == "f" and values.notna().any() and (
                values.dropna() % 1 == 0).all() and column not in ("mean", "std", "ci_low",
                                                                  "ci_high", "score"):
            df[column] = ["" if pd.isna(v) else str(int(v)) for v in values]
    return df.to_string(index=False, float_format=lambda v: f"{v:.4f}", na_rep="")


def _image(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def _fmt(value) -> str:
    if explore.missing(value):
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple | np.ndarray):
        return "[" + ",".join(_fmt(v) for v in value) + "]"
    return str(value)


def _distinct(values: pd.Series) -> list:
    """The distinct values of a column (all of them where arrays make that impossible)."""
    try:
        return values.drop_duplicates().tolist()
    except TypeError:  # unhashable cells: arrays
        return values.tolist()


def _config_summary(trials: pd.DataFrame) -> pd.DataFrame:
    """Per config field, a row: its distinct values in each experiment (a column each), so
    the table grows down with the fields, not across the page."""
    columns = {}
    fields = [f.name for f in dataclasses.fields(TrialConfig) if f.name != "experiment"]
    fields += [c for c in frames.NEUTRAL if c not in fields]
    for experiment, group in trials.groupby("experiment", sort=True):
        column = {"trials ok": str(int((group["status"] == "ok").sum())),
                  "trials failed": str(int((group["status"] == "error").sum()))}
        for name in fields:
            if name not in group:
                continue
            values = sorted({_fmt(v) for v in _distinct(group[name])},
                            key=lambda v: (len(v), v))
            column[name] = ", ".join(values[:12]) + (f" (+{len(values) - 12})"
                                                      if len(values) > 12 else "")
        columns[experiment] = column
    table = pd.DataFrame(columns)
    return table.rename_axis("field").reset_index()


def _versions(trials: pd.DataFrame) -> pd.DataFrame:
    seen: dict[str, set[str]] = {}
    for blob in trials["versions"].dropna().unique():
        for package, version in json.loads(blob).items():
            seen.setdefault(package, set()).add(str(version))
    for column in ("device", "precision_used"):
        seen[column] = {str(v) for v in trials[column].dropna().unique()}
    return pd.DataFrame([{"library / setting": k, "values": ", ".join(sorted(v))}
                         for k, v in sorted(seen.items())])


def _figure_html(f: Figure) -> str:
    png = next(p for p in f.paths if p.suffix == ".png")
    links = ", ".join(f"<a href='{p.name}'>{p.name}</a>" for p in f.paths)
    caption = html.escape(f.table.attrs.get("caption", ""))
    return (f"<figure>{_image(png)}<figcaption>{caption} Files: {links}</figcaption></figure>"
            f"<details><summary>numbers plotted ({len(f.table)} rows, n per point)</summary>"
            f"{_table_html(f.table)}</details>")


def _overlaid(section: Section) -> bool:
    """Whether a figure of ``section`` drew the probing curves over the finetuning ones."""
    return any("curve" in f.table and (f.table["curve"] == "probe").any()
               for f in section.figures)


def section_title(section: Section) -> str:
    """The heading of a section: its spec's title, which claims the probing overlay only
    where the figure drew one (a store without probing rows has no dashed curves)."""
    return section.title + (", with probing overlaid" if _overlaid(section) else "")


DEGENERATE_COLUMNS = {"experiment": "experiment", "task": "task", "train_size": "size",
                      "model": "model", "configuration": "configuration", "runs": "runs",
                      "majority_runs": "at majority rate",
                      "minority_runs": "at 1 - majority rate", "scores": "scores",
                      "majority_score": "majority rate", "why": "why"}


def _degenerate_html(data: frames.Store) -> str:
    groups = data.degenerate
    if groups.empty:
        return ""
    heads = [line for line in sanity.warnings(data.trials, limit=0, groups=groups)
             if not line.startswith(" ")
             and not line.startswith("...")]
    table = _table_html(groups[list(DEGENERATE_COLUMNS)].rename(columns=DEGENERATE_COLUMNS))
    many = len(groups) > 12  # a long list would push the figures off the first screen
    return ("<div class='warn' id='degenerate'><b>Results that are not results</b><ul>"
            + "".join(f"<li>{html.escape(line)}</li>" for line in heads) + "</ul>"
            + f"<details{'' if many else ' open'}><summary>the {len(groups)} configurations, "
            "one row each (seeds together)</summary>" + table + "</details></div>")


def _unreadable_text(path: Path) -> str:
    """"N trials unreadable in FILE" for a trial file that cannot be read (a file of another
    table: its name alone)."""
    if path.parent.name != store.TRIALS:
        return f"unreadable results file {path}"
    held = store.key_count(path)
    count = ("trials (how many: unknown)" if held is None
             else counted(held, "trial"))
    return f"{count} unreadable in {path}"


def render(sections_: list[Section], data: frames.Store, results_dir: Path,
           unreadable: list[Path] | None = None, only: list[str] | None = None,
           malformed: list[tuple[Path, str, str]] | None = None,
           verdict_rows: list[verdicts.VerdictRow] | None = None) -> str:
    global _table_ids
    _table_ids = itertools.count()  # the same store gives the same page
    trials = data.trials
    ok = int((trials["status"] == "ok").sum())
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>reinit-tune report"
             f"</title><style>{CSS}{explore.CSS}</style></head><body>",
             "<h1>reinit-tune report</h1>",
             f"<p class='source' id='about'>results: {html.escape(str(results_dir))}; generated "
             f"{pd.Timestamp.now(tz='UTC'):%Y-%m-%d %H:%M UTC}; {len(trials)} trials "
             f"({ok} ok, {len(trials) - ok} failed), {len(data.similarity)} similarity rows. "
             "Error bars and shaded intervals are 95% t-intervals (003 App. B); every caption, "
             "legend and table states n, the runs behind each point.</p>"]
    if only:
        parts.append(f"<p class='warn'>Only {html.escape(', '.join(only))}: "
                     "<code>reinit-tune report --results "
                     f"{html.escape(str(results_dir))}</code> draws every figure.</p>")
    lost = [p for p in unreadable or [] if p.parent.name == store.TRIALS]
    if trials.empty and lost:
        parts.append("<p class='warn'><b>No trial of this store can be read:</b> "
                     + "; ".join(html.escape(_unreadable_text(p)) for p in lost) + "</p>")
    elif trials.empty:
        parts.append("<p class='warn'><b>The store holds no trials yet.</b> Run a sweep into "
                     f"this folder (<code>reinit-tune sweep progressive --results "
                     f"{html.escape(str(results_dir))}</code>) and make the report again.</p>")
    if unreadable:
        parts.append("<p class='warn'><b>Skipped files that cannot be read</b> (a disk fault "
                     "or a foreign file; restore them from a backup, or a sweep with "
                     "<code>--rerun-damaged</code> moves them aside and trains their trials "
                     "again): " + "; ".join(html.escape(_unreadable_text(p))
                                           for p in unreadable) + "</p>")
    if malformed:
        shown = "".join(f"<li>{html.escape(key or '(no id)')} in {html.escape(str(path))}: "
                        f"{html.escape(why)}</li>" for path, key, why in malformed[:20])
        more = f"<li>and {len(malformed) - 20} more</li>" if len(malformed) > 20 else ""
        rows = counted(len(malformed), "malformed trial row")
        parts.append(f"<div class='warn'><b>Skipped {rows}</b> (no reader uses them; "
                     "<code>reinit-tune store check</code> lists them all):"
                     f"<ul>{shown}{more}</ul></div>")
    if verdict_rows:  # the report leads with what the runs say of the papers' claims
        drawn = {s.key for s in sections_ if s.figures}
        links = {f.name: next((s.key for s in f.figures if s.key in drawn), None)
                 for f in families.all_families()}
        parts.append(claims_html(verdict_rows, links))
    parts.append(_degenerate_html(data))
    present = data.experiments
    absent = [e for e in experiments() if e not in present]
    parts.append(f"<p>experiments in the store: <b>{html.escape(', '.join(present) or 'none')}"
                 f"</b>; not in the store: {html.escape(', '.join(absent) or 'none')}</p>")
    drawn = [s for s in sections_ if s.figures]
    missing = [s for s in sections_ if not s.figures]
    broken = [s.key for s in missing if s.failed]
    if broken:  # a bug, unlike a figure the store has no rows for: said before the figures
        parts.append(f"<p class='warn'><b>Failed to draw</b>: {html.escape(', '.join(broken))}"
                     " (the error is under <a href='#missing'>Not drawn</a>)</p>")
    parts.append("<h2>Contents</h2><ul>"
                 + ("<li><a href='#claims'>Claims</a></li>" if verdict_rows else "")
                 + "".join(
        f"<li><a href='#{s.key}'>{html.escape(section_title(s))}</a> "
        f"({', '.join(f.name for f in s.figures)})</li>" for s in drawn)
        + "<li><a href='#trials-section'>Every trial</a></li>"
        + ("<li><a href='#configs'>Configurations</a></li>" if not trials.empty else "")
        + (f"<li><a href='#missing'>Not drawn ({len(missing)})</a></li>" if missing else "")
        + "</ul>")
    for s in drawn:
        parts.append(f"<h2 id='{s.key}'>{html.escape(section_title(s))}</h2>"
                     f"<p class='source'>Reproduces {html.escape(s.source)}. Reads "
                     f"{html.escape(s.spec.reads)}.</p>")
        trend = published.TRENDS.get(s.key)
        if trend:
            parts.append(f"<p class='paper'>The paper: {html.escape(trend)}</p>")
        for f in s.figures:
            parts.append(_figure_html(f))
        for caption, table in s.tables.items():
            parts.append(f"<h3>{html.escape(caption)}</h3>{_table_html(table)}")
        for caption, table in published.beside(s.key, data, s.spec.best_of).items():
            parts.append(f"<h3>{html.escape(caption)}</h3>{_table_html(table)}")
    parts.append("<section id='trials-section'><h2>Every trial</h2>"
                 + explore.trial_table(trials, data.epochs) + "</section>")
    if not trials.empty:
        parts.append("<h2 id='configs'>Configurations</h2>"
                     + _table_html(_config_summary(trials), wrap=True))
        parts.append("<h2 id='versions'>Library versions and devices</h2>"
                     + _table_html(_versions(trials), wrap=True))
    failed = trials[trials["status"] == "error"]
    if not failed.empty:
        parts.append("<h2 id='failed'>Failed trials</h2>" + _table_html(
            failed[["trial_id", "experiment", "task", "attempts", "error"]]))
    if missing:
        # Last and folded: what the store cannot draw matters less than what it drew.
        parts.append(
            f"<details id='missing'><summary><b>Not drawn: "
            f"{len(missing)} figures</b>" + (f", {len(broken)} of them failed" if broken else "")
            + " (the sweep that fills each)</summary><ul class='missing'>" + "".join(
                f"<li><b>{html.escape(s.title)}</b> ({html.escape(s.source)}): "
                + (f"<span class='failed'>failed:\n{html.escape(s.failed)}</span>" if s.failed
                   else f"{html.escape(s.skipped or '')}; run {html.escape(s.needs)}")
                + "</li>" for s in missing) + "</ul></details>")
    parts.append(explore.SCRIPT + "</body></html>")
    return "\n".join(p for p in parts if p)


def run(results: Path, out: Path | None = None, only: list[str] | None = None,
        max_panels: int | None = None,
        priced: Callable[[list[verdicts.VerdictRow], list[str]],
                         list[verdicts.VerdictRow]] | None = None) -> int:
    """Write the report of ``results`` into ``out`` (default ``RESULTS/report``) and print
    what was drawn (with ``only``: the numbers of those figures too); the exit status.
    ``max_panels``: panels per figure at most (``build``); ``priced(rows, commands)``: the
    verdict rows with the cost of those commands (the ones the page shows first) filled in."""
    if (problem := store.not_a_store(results)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    out = out or results / "report"
    built, data = build(results, out, only, max_panels)
    page = out / "report.html"
    out.mkdir(parents=True, exist_ok=True)
    unreadable = store.unreadable_files(results)
    malformed = store.malformed_rows(results)
    rows = [] if only else verdicts.evaluate(data.trials, results_dir=str(results),
                                             similarity=data.similarity, epochs=data.epochs,
                                             pairs=data.pairs)
    if priced is not None and rows:
        rows = priced(rows, shown_commands(rows))
    page.write_text(render(built, data, results.resolve(), unreadable, only, malformed, rows))
    for path in unreadable:
        print(f"warning: {_unreadable_text(path)}", file=sys.stderr)
    for path, why in store.damaged_files(results).items():
        held = store.trials_in(path)
        print(f"warning: {'some' if held is None else len(held)} trials in damaged results "
              f"file {path} may read wrong ({why}); `reinit-tune store check` lists it",
              file=sys.stderr)
    if malformed:
        print(f"warning: skipped {len(malformed)} malformed trial rows (reinit-tune store "
              "check lists them)", file=sys.stderr)
    for line in sanity.warnings(data.trials, groups=data.degenerate):
        print(f"warning: {line}", file=sys.stderr)
    if (scores := bad_scores(data.trials)) is not None:  # drawn as NaN, or off the axis
        print(f"warning: {scores}", file=sys.stderr)
    for s in built:
        if only:  # a figure or two from the command line: show their numbers too
            for f in s.figures:
                print(_text(f.table))
            for caption, table in s.tables.items():
                print(f"{caption}\n{_text(table)}")
        if s.figures:
            print(f"{s.key:<13} " + ", ".join(str(p) for f in s.figures for p in f.paths))
        else:
            print(f"{s.key:<13} not drawn: {'FAILED' if s.failed else s.skipped}")
    print(f"report: {page}")
    return 1 if any(s.failed for s in built) else 0
