"""The report page as a reader sees it, on synthetic stores (no Ray): no missing value shown as
a word whatever dtype pandas gives a column, the epoch column only where there are curves,
figures before what was not drawn, tables that fit the page, section titles that claim only
what was drawn, one report folder for every entry point, the degenerate configurations, and
the screenshot script showing the filtered table."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reinit_tune.analysis import explore, frames, report
from tests.helpers import REPO, SyntheticStore, cli, screenshot_script

L = 6
# A missing value printed as text, in any of the spellings pandas and Python give it.
MISSING_WORDS = re.compile(r"\b(?:nan|NaN|None|NaT)\b|<NA>|&lt;NA&gt;")


def visible(page: str) -> str:
    """The page without its embedded images and script: what a reader can read."""
    page = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    return re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)


def trial_cells(page: str) -> list[str]:
    """Every cell of the trial table as the page's script shows it (text; a missing value is
    null, shown as nothing), from the rows embedded in the page."""
    doc = explore.tables_in(page)["trials"]
    return ["" if v is None else str(v) for row in doc["rows"] for v, kind in
            zip(row, doc["kinds"], strict=True) if kind != "curve"]


def section_of(page: str, marker: str, end: str = "</table>") -> str:
    start = page.index(marker)
    return page[start:page.index(end, start)]


def mixed_store(root: Path) -> SyntheticStore:
    """Trials of several families: most without an intermediate task, layer order, probe
    layer or error, so those columns hold missing values."""
    synth = SyntheticStore(root)
    for seed in range(2):
        synth.add("progressive", "sst2", 0.7 + 0.01 * seed, seed=seed, reinit_layers=[5])
        synth.add("sequential", "rte", 0.6 + 0.01 * seed, seed=seed, train_size=None,
                  intermediate_task="mrpc")
        synth.add("sequential", "rte", 0.58 + 0.01 * seed, seed=seed, train_size=None)
    synth.add("permutations", "sst2", 0.66, layer_order=(1, 0, 2, 3, 4, 5))
    synth.add("heads", "stsb", 0.8, reinit_heads=((0, 1),))
    synth.add("progressive", "sst2", 0.5, seed=5, status="error")
    return synth


def as_object_none(column: pd.Series) -> pd.Series:
    """pandas 2's reading of a string column: object dtype, None where missing."""
    return column.astype(object).where(column.notna(), None)


STRING_DTYPES = {
    "object-None": as_object_none,
    "string-NA": lambda c: pd.Series(pd.array(as_object_none(c).tolist(), dtype="string"),
                                     index=c.index),
    "string-nan": lambda c: as_object_none(c).astype(pd.StringDtype(na_value=np.nan)),
}


def with_string_dtype(data: frames.Store, convert) -> frames.Store:
    def convert_all(df: pd.DataFrame) -> pd.DataFrame:
        df = df.copy()
        for name in df.columns:
            if pd.api.types.is_string_dtype(df[name]) and not df[name].map(
                    lambda v: isinstance(v, list | tuple | np.ndarray)).any():
                df[name] = convert(df[name])
        return df
    return dataclasses.replace(data, trials=convert_all(data.trials),
                               epochs=convert_all(data.epochs))


@pytest.mark.parametrize("dtype", list(STRING_DTYPES))
def test_no_missing_value_is_printed_as_a_word(tmp_path, dtype):
    mixed_store(tmp_path / "results")
    sections, data = report.build(tmp_path / "results", tmp_path / "out")
    data = with_string_dtype(data, STRING_DTYPES[dtype])
    missing = data.trials["intermediate_task"].isna()
    assert missing.sum() > 0 and (~missing).sum() == 2
    page = report.render(sections, data, tmp_path / "results")
    assert any(s.figures for s in sections)
    found = sorted(set(MISSING_WORDS.findall(visible(page))))
    assert not found, found
    shown = trial_cells(page)
    assert not sorted({w for c in shown for w in MISSING_WORDS.findall(c)})
    # only the runs that had an intermediate task
    assert [cell for cell in shown if "after" in cell] == ["after mrpc"] * 2
    assert "order 1,0,2,3,4,5" in shown and "heads 0.1" in shown


@pytest.mark.parametrize("dtype", list(STRING_DTYPES))
def test_surgery_of_a_row_with_missing_fields_is_none(dtype):
    column = STRING_DTYPES[dtype](pd.Series(["mrpc", None], dtype=object))
    row = {"reinit_layers": np.array([], dtype=np.int64), "reinit_heads": None,
           "layer_order": float("nan"), "probe_layer": pd.NA, "intermediate_task": column[1],
           "reinit_lr_multiplier": np.float64("nan"), "preserve_layernorm": pd.NA}
    assert explore.surgery(row) == "none"
    assert explore.surgery({**row, "intermediate_task": column[0]}) == "after mrpc"
    assert all(explore.missing(v) for v in (None, np.nan, pd.NA, pd.NaT, column[1]))
    assert not any(explore.missing(v) for v in ("", 0, [], np.array([]), "x"))


def test_the_epoch_column_only_where_a_trial_was_scored_after_several_epochs(tmp_path, capsys):
    final_only = [float("nan"), float("nan"), 0.7]  # --eval final: the last epoch scored
    synth = SyntheticStore(tmp_path / "final")
    synth.add("progressive", "sst2", 0.7, epoch_scores=final_only)
    synth.add("progressive", "sst2", 0.72, seed=1, epoch_scores=final_only[:2] + [0.72])
    assert cli(capsys, "report", "--results", str(tmp_path / "final"))[0] == 0
    page = (tmp_path / "final" / "report" / "report.html").read_text()
    doc = explore.tables_in(page)["trials"]
    assert "dev score per epoch" not in doc["columns"] and "curve" not in doc["kinds"]
    assert not MISSING_WORDS.findall(visible(page))

    synth = SyntheticStore(tmp_path / "mixed")
    synth.add("progressive", "sst2", 0.7, epoch_scores=final_only)
    synth.add("variants", "sst2", 0.7, epoch_scores=[0.5, 0.6, 0.7])
    assert cli(capsys, "report", "--results", str(tmp_path / "mixed"))[0] == 0
    page = (tmp_path / "mixed" / "report" / "report.html").read_text()
    doc = explore.tables_in(page)["trials"]
    curves = [r[doc["columns"].index("dev score per epoch")] for r in doc["rows"]]
    assert sorted(curves) == [[[1, 0.5], [2, 0.6], [3, 0.7]], [[3, 0.7]]]  # one a line
    # the final-only trial: its one value, which the script shows as text, not a line
    assert "scored after the last epoch only" in page
    headers = re.findall(r"<th[^>]*>([^<]+)</th>", section_of(page, "<table id='trials'>"))
    assert headers == doc["columns"]
    assert all(len(r) == len(headers) for r in doc["rows"])


def test_figures_come_first_and_what_was_not_drawn_is_folded_at_the_end(tmp_path, capsys):
    mixed_store(tmp_path / "results")
    assert cli(capsys, "report", "--results", str(tmp_path / "results"))[0] == 0
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    first_figure = page.index("<figure>")
    assert page.index("<details id='missing'>") > max(
        first_figure, page.index("id='trials-section'"), page.index("id='configs'"))
    assert "<h2 id='missing'>" not in page
    summary = section_of(page, "<details id='missing'>", "</summary>")
    assert re.search(r"Not drawn: \d+ figures", summary)
    assert page.index("href='#missing'") < first_figure  # the contents still point to it


def test_tables_fit_the_page(tmp_path, capsys):
    synth = mixed_store(tmp_path / "results")
    synth.add("variants", "sst2", 0.7, reinit_layers=range(L), reinit_lr_multiplier=5.0,
              model="some-org/" + "a-very-long-model-name-" * 4)
    assert cli(capsys, "report", "--results", str(tmp_path / "results"))[0] == 0
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    configs = page[page.index("id='configs'"):page.index("id='versions'")]
    assert "<div class='table-wrap'>" in configs
    headers = re.findall(r"<th[^>]*>([^<]+)</th>", configs)
    assert headers[0] == "field"  # a row per field, a column per experiment: grows down
    assert set(headers[1:]) == {"heads", "permutations", "progressive", "sequential",
                                "variants"}
    assert "<td class=text>" in configs and "overflow-wrap:anywhere" in page
    assert ".table-wrap{max-width:100%;overflow-x:auto}" in page
    # every table of the page scrolls within its own box, none widens the page
    tables = page.count("<table")
    wrapped = page.count("<div class='table-wrap'><table") + page.count(
        "<div class='scroll'><table")
    assert tables == wrapped


def test_the_progressive_title_claims_probing_only_when_drawn(tmp_path, capsys):
    synth = SyntheticStore(tmp_path / "results")
    for k in (0, 6):
        synth.add("progressive", "sst2", 0.6 + 0.03 * k, reinit_layers=range(k, L))
    assert cli(capsys, "report", "--results", str(tmp_path / "results"))[0] == 0
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    assert "id='progressive'" in page and "probing overlaid" not in page
    for layer in range(L + 1):
        synth.add("probing", "sst2", 0.5 + 0.03 * layer, probe_layer=layer)
    assert cli(capsys, "report", "--results", str(tmp_path / "results"))[0] == 0
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    assert "<h2 id='progressive'>Progressive reinitialization, with probing overlaid</h2>" in page


def test_every_entry_point_writes_the_one_report_folder(tmp_path, capsys):
    results = tmp_path / "results"
    SyntheticStore(results).add("progressive", "sst2", 0.7)
    for script in ("analysis/progressive.py", "analysis/figures.py"):
        done = subprocess.run([sys.executable, script, "--results", str(results)], cwd=REPO,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"report: {results / 'report' / 'report.html'}" in done.stdout
        assert (results / "report" / "progressive.png").is_file()
        assert not (results / "figures").exists()
    page = (results / "report" / "report.html").read_text()
    assert "draws every figure" not in page  # figures.py without names: every figure
    done = subprocess.run([sys.executable, "analysis/progressive.py", "--results",
                           str(results)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (results / "report" / "report.html").read_text()
    assert "Only progressive" in page  # a partial page says so
    code, out = cli(capsys, "report", "--results", str(results))
    assert code == 0 and f"report: {results / 'report' / 'report.html'}" in out
    readme = (REPO / "README.md").read_text()
    assert "DIR/figures" not in readme and "results/figures" not in readme
    done = subprocess.run([sys.executable, "analysis/figures.py", "nosuchfig", "--results",
                           str(results)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "--only nosuchfig: no such figure" in done.stderr, done
    assert "Traceback" not in done.stderr


def test_degenerate_configurations_are_listed_one_by_one(tmp_path, capsys):
    synth = SyntheticStore(tmp_path / "results")
    majority = 0.527076
    for k in range(3):  # the 12-run RTE case: 9 runs at the majority rate or 1 - it
        for seed in range(4):
            score = (majority, 1 - majority, 1 - majority, 0.55 + 0.01 * seed)[seed]
            synth.add("progressive", "rte", score, seed=seed, train_size=32,
                      reinit_layers=range(k, L), majority=majority, chance=0.5)
    code, out = cli(capsys, "report", "--results", str(tmp_path / "results"))
    assert code == 0
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    box = page[page.index("id='degenerate'"):page.index("</div></details></div>")]
    assert "3 of 3 configurations, 9 runs" in box
    rows = re.findall(r"<tr><td.*?</tr>", box)
    assert len(rows) == 3
    for layers in ("[0,1,2,3,4,5]", "[1,2,3,4,5]", "[2,3,4,5]"):
        assert any(f"reinit_layers {layers}" in r for r in rows), rows
    assert all(re.search(r"<td>4</td><td>1</td><td>2</td>", r) for r in rows), rows
    assert page.index("id='degenerate'") < page.index("<figure>")
    assert out.count("warning:   reinit_layers") == 3
    assert "1 of 4 runs score exactly the dev majority-class rate 0.5271" in out
    assert "2 of 4 runs score exactly 0.4729" in out


def test_the_screenshot_shows_the_filtered_table(tmp_path, capsys):
    report_screenshot = screenshot_script()
    from PIL import Image

    synth = SyntheticStore(tmp_path / "results")
    for k in range(L + 1):  # figures above the table: a scrolled window would miss it
        synth.add("progressive", "sst2", 0.6 + 0.03 * k, reinit_layers=range(k, L))
    synth.add("heads", "stsb", 0.8, reinit_heads=((0, 1),))
    shot = tmp_path / "shot.png"
    assert report_screenshot.main(["--results", str(tmp_path / "results"), "--filter",
                                   "sst2 ok", "--sort=-score", "--out", str(shot)]) == 0
    page = tmp_path / "results" / "report" / "report.html"
    dom = report_screenshot.browse(report_screenshot.page_url(page, "sst2 ok", "-score",
                                                              "trials"))
    assert "7 of 8 trials" in dom
    figures = re.findall(r"<figure([^>]*)>", dom)
    assert figures and all("display: none" in f for f in figures)  # only the table shows
    assert re.search(r"<h2 id=\"configs\" style=\"display: none;\">", dom)
    with Image.open(shot) as image:
        rgb = np.asarray(image.convert("L"))
    assert rgb.shape[0] < 2200  # cut below the table
    ink = (rgb < 200).mean(axis=1)  # share of dark pixels per row
    assert (ink > 0.01).mean() > 0.3, "the screenshot is mostly blank"


def test_the_page_stays_small_and_holds_every_trial(tmp_path):
    synth = SyntheticStore(tmp_path / "results")
    for seed in range(40):
        for k in (0, 3, 6):
            synth.add("variants", "sst2", 0.6 + 0.001 * seed + 0.01 * k, seed=seed,
                      reinit_layers=range(k, L), epoch_scores=[0.5, 0.55, 0.6 + 0.001 * seed])
    synth.add("variants", "sst2", 0.5, seed=99, status="error")
    sections, data = report.build(tmp_path / "results", tmp_path / "out")
    page = report.render(sections, data, tmp_path / "results")
    doc = explore.tables_in(page)["trials"]
    assert len(doc["rows"]) == 121
    table = page[page.index("<div class='data-table' data-what='trials'"):]
    table = table[:table.index("</script></div>")]
    assert len(table) / 121 < 200  # bytes per trial, its epoch curve included
    assert len(visible(page)) < 400_000
    assert "RuntimeError: boom" in trial_cells(page)  # the failed trial too


def test_a_figure_that_failed_is_named_before_the_figures(tmp_path):
    mixed_store(tmp_path / "results")
    sections, data = report.build(tmp_path / "results", tmp_path / "out")
    broken = next(s for s in sections if s.key == "heads")
    broken.figures, broken.failed = [], "Traceback ...\nValueError: a bug"
    page = report.render(sections, data, tmp_path / "results")
    assert page.index("Failed to draw</b>: heads") < page.index("<figure>")
    summary = section_of(page, "<details id='missing'>", "</summary>")
    assert "1 of them failed" in summary
    assert "ValueError: a bug" in page[page.index("<details id='missing'>"):]


def test_the_claims_commands_show_their_cost_as_the_verdicts_command_prints_it(
        tmp_path, capsys, glue_dir):
    """A suggested command on the page carries what its dry run plans (the same words as
    `reinit-tune verdicts`): in a listed row and in a folded family's summary."""
    from tests.helpers import plant_progressive

    root = tmp_path / "results"
    plant_progressive(SyntheticStore(root), "sst2", 50_000, {0: 0.5, 2: 0.72, 6: 0.9},
                      noise=0.05, seeds=4)
    assert cli(capsys, "report", "--results", str(root))[0] == 0
    page = (root / "report" / "report.html").read_text()
    code, out = cli(capsys, "verdicts", "--results", str(root), "--claims", "003-C1")
    printed = re.search(r"\n {14}(adds up to \d+ trials[^\n]*)", out).group(1)
    assert f"<small class=cost>{printed}</small>" in page
    folded = re.findall(r"Most of them: <code>[^<]+</code> \((adds \d+ trials, about [^)]+)\)",
                        page)
    assert folded, section_of(page, "<details class=folded>", "</summary>")
