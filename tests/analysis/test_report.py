"""The one-command report on a store made by a tiny real sweep (with --similarity, through
Ray Tune), then with every other experiment family added as synthetic rows."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from reinit_tune import families, store
from reinit_tune.analysis import explore
from reinit_tune.families import Grid
from reinit_tune.sweep.options import RunOptions, SimilarityOptions
from reinit_tune.sweep.runner import run_sweep
from tests.helpers import SyntheticStore, cli, permutation_store, screenshot_script

L = 6


def images(page: str) -> int:
    return len(re.findall(r'src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}"', page))


def add_every_other_family(synth: SyntheticStore) -> None:
    for k in (0, 6):
        synth.add("progressive", "sst2", 0.6 + 0.03 * k, reinit_layers=range(k, L))
        synth.add("variants", "sst2", 0.6 + 0.03 * k, reinit_layers=range(k, L),
                  reinit_lr_multiplier=5.0)
        synth.add("variants", "sst2", 0, reinit_layers=range(k, L), epochs=2,
                  train_size=500, epoch_scores=[0.5, 0.6])
    for layer in range(L + 1):
        synth.add("probing", "sst2", 0.5 + 0.03 * layer, train_size=None, probe_layer=layer)
    synth.add("localized", "qnli", 0.8)
    synth.add("localized", "qnli", 0.6, reinit_layers=range(L))
    synth.add("localized", "qnli", 0.7, reinit_layers=range(3))
    synth.add("localized", "qnli", 0.65, reinit_layers=range(1, 4))
    synth.add("single_layer", "cola", 0.5, reinit_layers=[2])
    permutation_store(synth)
    synth.add("heads", "stsb", 0.8)
    synth.add("heads", "stsb", 0.79, reinit_heads=((0, 3),))
    synth.add("sequential", "rte", 0.6, train_size=None)
    synth.add("sequential", "rte", 0.62, train_size=None, intermediate_task="mrpc")


@pytest.mark.ray
def test_report_from_a_real_sweep_then_with_every_family(ray_local, tiny_bert, glue_dir,
                                                         tmp_path, capsys):
    results = tmp_path / "results"
    configs = families.get("progressive").configs(
        Grid(tiny_bert, tasks=("rte",), sizes=(16,), seeds=1, epochs=1, lr=1e-4,
             data_dir=str(glue_dir)), k=[0, 4])
    options = RunOptions(results_dir=results, data_dir=str(glue_dir), max_failures=0,
                         similarity=SimilarityOptions(examples=12))
    summary = run_sweep(configs, options)
    assert (summary.ok, summary.failed) == (2, 0)
    sim = store.load_similarity(results)
    assert len(sim) == 2 * 5 and set(sim["trial_id"]) == {c.trial_id for c in configs}
    assert sim["svcca_distance"].between(0, 1).all() and (sim["examples"] == 12).all()
    again = run_sweep(configs, options)
    assert again.skipped == 2  # similarity rows are there: nothing to redo

    code, out = cli(capsys, "report", "--results", str(results))
    assert code == 0, out
    page = (results / "report" / "report.html").read_text()
    drawn = {"progressive", "small_data", "similarity_by_size", "similarity_by_task"}
    for name in drawn:
        assert (results / "report" / f"{name}.png").stat().st_size > 5_000
        assert (results / "report" / f"{name}.pdf").exists()
    assert images(page) == 4
    assert "not drawn: no permutation trials in the store" in out
    assert "Not drawn" in page and "reinit-tune sweep heads" in page and "torch" in page
    assert "not in the store: probing, small_data, localized" in page

    synth = SyntheticStore(results)
    add_every_other_family(synth)
    full = tmp_path / "full"
    code, out = cli(capsys, "report", "--results", str(results), "--out", str(full))
    assert code == 0, out
    page = (full / "report.html").read_text()
    assert images(page) == 11
    not_drawn = page[page.index("id='missing'"):page.index("</ul>", page.index("id='missing'"))]
    assert "reinit-tune sweep 0" in not_drawn  # only the other papers' presets are missing
    for family in ("progressive", "localized", "single_layer", "permutations", "variants",
                   "heads", "sequential"):
        assert f"reinit-tune sweep {family}<" not in not_drawn
    for key in ("progressive", "small_data", "localized", "single_layer", "permutations",
                "variants", "epochs", "heads", "sequential", "similarity"):
        assert f"id='{key}'" in page
    assert "Table 1: paired correlations" in page and "Per head, over the layers" in page
    assert "not in the store: small_data, 003-permutations-authors, 000-" in page  # drawn anyway

    # what `python analysis/figures.py permutations` runs (tests/analysis/test_report_page.py
    # runs that script)
    code, printed = cli(capsys, "report", "--results", str(results), "--only", "permutations")
    assert code == 0, printed[-3000:]
    assert "Table 1: paired correlations" in printed and "spearman_p" in printed
    assert (results / "report" / "permutations.png").is_file()  # the one report folder
    assert not (results / "report" / "heads.png").exists()
    assert not (results / "figures").exists()


# -- a report is never a traceback --------------------------------------------------------
def test_report_of_an_empty_store_says_so(tmp_path, capsys):
    (tmp_path / "results" / "trials").mkdir(parents=True)  # a sweep started, nothing stored
    code, out = cli(capsys, "report", "--results", str(tmp_path / "results"))
    assert code == 0, out
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    assert "The store holds no trials yet" in page and "No trials in the store yet" in page
    assert "not drawn: no successful progressive trials" in out


def test_report_of_a_store_whose_trials_all_failed_lists_them(tmp_path, capsys):
    synth = SyntheticStore(tmp_path / "results")
    for seed in range(2):
        synth.add("progressive", "sst2", 0.5, seed=seed, status="error")
    code, out = cli(capsys, "report", "--results", str(tmp_path / "results"))
    assert code == 0, out
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    assert "id='failed'" in page and "RuntimeError: boom" in page
    assert "2 trials (0 ok, 2 failed)" in page


def test_an_unreadable_file_is_skipped_with_a_warning_that_names_it(tmp_path, capsys, caplog):
    from reinit_tune import store

    synth = SyntheticStore(tmp_path / "results")
    good = synth.add("progressive", "sst2", 0.7)
    garbage = tmp_path / "results" / "trials" / "0123456789abcdef.parquet"
    garbage.write_bytes(b"this is not parquet")
    with caplog.at_level("WARNING", logger="reinit_tune"):
        trials = store.load_trials(tmp_path / "results")
    assert list(trials["trial_id"]) == [good]
    assert str(garbage) in caplog.text
    code, out = cli(capsys, "report", "--results", str(tmp_path / "results"))
    assert code == 0, out
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    assert "Skipped files that cannot be read" in page and str(garbage) in page
    assert "id='progressive'" in page  # the good row is still drawn


def test_malformed_rows_are_skipped_and_named_and_the_report_renders(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    synth = SyntheticStore(tmp_path / "results")
    good = [synth.add("progressive", "sst2", 0.7, seed=s) for s in range(2)]
    bad_versions = synth.add("progressive", "sst2", 0.6, seed=5)
    bad_heads = synth.add("heads", "sst2", 0.6, reinit_heads=((0, 3),))
    for trial_id, column, value in ((bad_versions, "versions", "not json {"),
                                    (bad_heads, "reinit_heads", [[0, 3, 7]])):
        path = tmp_path / "results" / "trials" / f"{trial_id}.parquet"
        table = pq.read_table(path)
        index = table.schema.get_field_index(column)
        pq.write_table(table.set_column(index, table.schema.field(column),
                                        pa.array([value], table.schema.field(column).type)),
                       path)
    assert sorted(store.load_trials(tmp_path / "results")["trial_id"]) == sorted(good)
    code, out = cli(capsys, "report", "--results", str(tmp_path / "results"))
    assert code == 0, out
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    assert "Skipped 2 malformed trial rows" in page
    assert bad_versions in page and "versions is not a JSON object" in page
    assert bad_heads in page and "not a (layer, head) pair" in page
    assert "id='progressive'" in page  # the good rows are drawn


def test_the_report_warns_about_results_at_the_majority_rate(tmp_path, capsys):
    synth = SyntheticStore(tmp_path / "results")
    for k in (0, 6):
        synth.add("progressive", "sst2", 0.509174, train_size=200, reinit_layers=range(k, 6),
                  majority=0.509174, chance=0.5)
    code, out = cli(capsys, "report", "--results", str(tmp_path / "results"))
    assert code == 0
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    assert "Results that are not results" in page and "majority-class rate 0.5092" in page
    assert "warning: progressive sst2" in out
    assert "majority class (0.509)" not in page  # legends are in the PNG, not the page
    assert "Dotted: the dev majority-class score" in page


def test_the_trial_table_is_sortable_filterable_and_shows_epoch_curves(tmp_path, capsys):
    synth = SyntheticStore(tmp_path / "results")
    synth.add("progressive", "sst2", 0.7, epoch_scores=[0.5, 0.6, 0.7], reinit_layers=[5])
    synth.add("heads", "stsb", 0.8, reinit_heads=((0, 1),))
    code, _ = cli(capsys, "report", "--results", str(tmp_path / "results"))
    page = (tmp_path / "results" / "report" / "report.html").read_text()
    doc = explore.tables_in(page)["trials"]
    assert doc["columns"][:5] == ["score", "metric", "experiment", "task", "size"]
    curves = [r[doc["columns"].index("dev score per epoch")] for r in doc["rows"]]
    assert [[1, 0.5], [2, 0.6], [3, 0.7]] in curves  # the sparkline's points
    surgeries = [r[doc["columns"].index("surgery")] for r in doc["rows"]]
    assert "reinit 5" in surgeries and "heads 0.1" in surgeries
    assert "id='trial-filter'" in page and "addEventListener('click'" in page


def test_the_report_works_in_headless_chromium(tmp_path, capsys):
    """The page's JavaScript, run by a real browser: filtered and sorted through the link."""
    report_screenshot = screenshot_script()
    synth = SyntheticStore(tmp_path / "results")
    for seed, score in enumerate((0.61, 0.74, 0.68)):
        synth.add("heads", "stsb", score, seed=seed, reinit_heads=((0, seed),))
    synth.add("progressive", "sst2", 0.9)
    assert cli(capsys, "report", "--results", str(tmp_path / "results"))[0] == 0
    page = tmp_path / "results" / "report" / "report.html"
    shot = tmp_path / "shot.png"
    dom = report_screenshot.browse(report_screenshot.page_url(page, "heads", "-score"),
                                   screenshot=shot)
    table = dom[dom.index('<table id="trials">'):]
    body = table[table.index("<tbody>"):table.index("</tbody>")]
    shown = re.findall(r"<tr>(.*?)</tr>", body)
    assert len(shown) == 3  # the progressive row is filtered out
    scores = [float(re.match(r"<td>([\d.]+)</td>", c).group(1)) for c in shown]
    assert scores == sorted(scores, reverse=True) == [0.74, 0.68, 0.61]
    assert "3 of 4 trials" in dom
    assert shot.stat().st_size > 10_000


def test_printed_numbers_read_as_numbers():
    """``--only`` prints the plotted numbers: counts as counts, no empty setting column, no
    missing value as a word (an empty probing overlay once made every column text)."""
    from reinit_tune.analysis.report import _text

    table = pd.DataFrame({"task": ["sst2", "sst2"], "setting": ["", ""],
                          "train_examples": [400.0, np.nan], "k": [0, 1],
                          "mean": [0.5, 0.75]}).astype(object)
    printed = _text(table)
    assert "400 " in printed and "400.0" not in printed and "setting" not in printed
    assert "0.7500" in printed and "nan" not in printed.lower() and "<NA>" not in printed
