"""The report on stores larger than a page can draw or list whole: a figure draws at most the
panel limit (the settings with the most runs), names the rest in its caption and tables every
setting's numbers, each drawn panel one configuration's own mean; the trial table embeds every
trial of a store past the old 5,000-row cap, and the page's script filters, sorts and pages
over all of them in a real browser."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd

from reinit_tune.analysis import explore, plotting, progressive, report
from tests.helpers import SyntheticStore, cli, screenshot_script

L = 6
JITTER = 0.0001  # seed s scores s * JITTER more
# Setting i scores 0.2 + 0.01 * GOLOMB[i] (marks of a Golomb ruler: no pooled mean of two
# settings equals a setting's own mean); lr tells the settings apart, with 4, 3, 3, 2 and 1
# seeds: the three with the most runs are drawn under a limit of three panels.
GOLOMB = (0, 1, 6, 10, 23)
RUNS = {1e-5: 4, 2e-5: 3, 3e-5: 3, 4e-5: 2, 5e-5: 1}


def many_settings(root) -> dict[float, float]:
    """A progressive store of five settings (lr); each setting's own mean score."""
    synth = SyntheticStore(root)
    means = {}
    for mark, (lr, seeds) in zip(GOLOMB, RUNS.items(), strict=True):
        scores = [0.2 + 0.01 * mark + seed * JITTER for seed in range(seeds)]
        for seed, score in enumerate(scores):
            synth.add("progressive", "sst2", score, seed=seed, lr=lr, reinit_layers=range(3, L))
        means[lr] = float(np.mean(scores))
    return means


def test_a_figure_draws_the_panel_limit_and_tables_every_setting(tmp_path, capsys):
    means = many_settings(tmp_path / "results")
    trials = SyntheticStore(tmp_path / "results").load().trials
    with plotting.panel_limit(3), plotting.undrawn_panels() as left_out:
        fig, _, table = progressive.plot_progressive(trials, tmp_path / "figs")
    assert left_out["drawn"] == 3
    assert [label.split(" · ")[1] for label in left_out["undrawn"]] == ["lr 4e-05", "lr 5e-05"]
    drawn = [ax for ax in fig.axes if ax.get_title()]
    assert len(drawn) == 3
    for ax in drawn:  # each panel one configuration's own mean, over its own runs
        lr = float(re.search(r"lr ([\d.e-]+)", ax.get_title()).group(1))
        (line,) = ax.containers
        assert np.allclose(line.lines[0].get_ydata(), means[lr], atol=1e-9), ax.get_title()
    assert sorted(float(re.search(r"lr ([\d.e-]+)", ax.get_title()).group(1))
                  for ax in drawn) == [1e-5, 2e-5, 3e-5]
    # the table holds every setting, drawn or not, each its own mean over its own runs
    assert len(table) == 5
    for lr, runs in RUNS.items():
        (row,) = table[table["task"].str.contains(f"lr {lr:g}", regex=False)].itertuples()
        assert np.isclose(row.mean, means[lr], atol=1e-9) and row.n == runs

    sections, data = report.build(tmp_path / "results", tmp_path / "out", ["progressive"],
                                  max_panels=3)
    (figure,) = sections[0].figures
    caption = figure.table.attrs["caption"]
    assert "2 of the 5 settings (panels) are not drawn" in caption
    assert "lr 4e-05" in caption and "lr 5e-05" in caption
    assert "`reinit-tune report --only progressive --max-panels 5`" in caption
    page = report.render(sections, data, tmp_path / "results")
    assert "2 of the 5 settings (panels) are not drawn" in page
    # under the default limit every setting is drawn and nothing is said
    sections, _ = report.build(tmp_path / "results", tmp_path / "all", ["progressive"])
    assert sections[0].figures[0].drawn == 5 and not sections[0].figures[0].undrawn
    assert "not drawn" not in sections[0].figures[0].table.attrs["caption"]
    code, out = cli(capsys, "report", "--results", str(tmp_path / "results"), "--max-panels",
                    "0")
    assert code == 2 and "--max-panels 0: give 1 or more" in out


def big_store(tmp_path, rows: int) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """``rows`` trials made from a small store's two (every tenth failed, half of them
    RTE), each its own id and score; their epochs; and the small store's folder."""
    synth = SyntheticStore(tmp_path / "results")
    synth.add("progressive", "sst2", 0.7, epoch_scores=[0.5, 0.6, 0.7], reinit_layers=[5])
    synth.add("heads", "rte", 0.6, reinit_heads=((0, 1),))
    data = synth.load()
    # SST-2 first whatever order the store lists its trials in: the failed odd rows are RTE
    base = data.trials.sort_values("task", ascending=False, ignore_index=True)
    trials = base.loc[np.arange(rows) % 2].reset_index(drop=True)
    trials["trial_id"] = [f"t{i:06d}" for i in range(rows)]
    trials["score"] = np.random.default_rng(0).permutation(rows) / rows
    trials["status"] = np.where(np.arange(rows) % 10 == 9, "error", "ok")
    epochs = data.epochs.merge(pd.DataFrame({"old": base["trial_id"].to_numpy()[
        np.arange(rows) % 2], "trial_id": trials["trial_id"]}), left_on="trial_id",
        right_on="old", suffixes=("_x", "")).drop(columns=["old", "trial_id_x"])
    return trials, epochs, str(tmp_path / "results")


def test_the_trial_table_embeds_every_trial_past_the_old_cap(tmp_path):
    trials, epochs, _ = big_store(tmp_path, 6001)
    html = explore.trial_table(trials, epochs)
    doc = explore.tables_in(html)["trials"]
    assert len(doc["rows"]) == 6001  # the old table showed 5,000
    ids = [r[doc["columns"].index("trial id")] for r in doc["rows"]]
    assert sorted(ids) == sorted(trials["trial_id"])
    scores = dict(zip(ids, (r[0] for r in doc["rows"]), strict=True))
    assert all(scores[t] == round(s, 4) for t, s in zip(trials["trial_id"], trials["score"],
                                                        strict=True))
    assert len(html) / 6001 < 120  # bytes of page per trial, its epoch curve included
    assert "<tbody></tbody>" in html  # rows are drawn by the script, a page at a time
    # a page-size bound that 6001 trials pass: the failed ones and the best scores, said so
    cut = explore.trial_table(trials, epochs, limit_bytes=len(html) // 2)
    assert len(cut) < len(html) // 2 + 1000
    doc = explore.tables_in(cut)["trials"]
    kept = int(re.search(r"holds (\d+) of the store's 6001 trials", cut).group(1))
    assert len(doc["rows"]) == kept and 2000 < kept < 3001
    status = doc["columns"].index("status")
    assert sum(r[status] == "error" for r in doc["rows"]) == (trials["status"] == "error").sum()
    shown = sorted(r[0] for r in doc["rows"] if r[status] == "ok")
    best = sorted(trials.loc[trials["status"] == "ok", "score"].round(4))[-len(shown):]
    assert shown == best


def test_filter_sort_and_paging_over_every_trial_in_chromium(tmp_path, capsys):
    report_screenshot = screenshot_script()
    trials, epochs, results = big_store(tmp_path, 280)
    sections, data = report.build(results, tmp_path / "out")
    data = dataclasses.replace(data, trials=trials, epochs=epochs)
    page = tmp_path / "out" / "report.html"
    page.write_text(report.render(sections, data, tmp_path / "results"))
    wanted = trials[(trials["task"] == "rte") & (trials["status"] == "ok")]
    expected = sorted(wanted["score"].round(4), reverse=True)
    assert len(wanted) == 112  # a page of 100, then 12

    def rows_shown(page_number: int) -> tuple[list[float], str]:
        url = report_screenshot.page_url(page, "rte ok", "-score") + f"&page={page_number}"
        dom = report_screenshot.browse(url)
        table = dom[dom.index('<table id="trials">'):]
        body = table[table.index("<tbody>"):table.index("</tbody>")]
        return [float(v) for v in re.findall(r"<tr><td>([\d.]+)</td>", body)], dom

    first, dom = rows_shown(1)
    assert "112 of 280 trials" in dom
    assert first == expected[:100]  # filtered over all rows, sorted, the first page
    second, dom = rows_shown(2)
    assert second == expected[100:]
    assert '<span class="dt-of">2</span>' in dom
