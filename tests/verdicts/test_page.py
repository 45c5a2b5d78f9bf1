"""The report leads with the claims: the verdict table, each verdict linked to the figure
that draws its runs, and the papers' contradictions beside what the store says."""

from __future__ import annotations

import re

from reinit_tune.analysis import report
from tests.helpers import SyntheticStore, plant_progressive


def test_report_opens_with_the_claims(tmp_path):
    synth = SyntheticStore(tmp_path / "r")
    for task in ("sst2", "qnli"):
        plant_progressive(synth, task, 500, {0: 0.5, 2: 0.52, 6: 0.8})
        plant_progressive(synth, task, 50_000, {0: 0.5, 2: 0.8, 6: 0.9})
    assert report.run(tmp_path / "r", tmp_path / "out", max_panels=4) == 0
    page = (tmp_path / "out" / "report.html").read_text()
    claims, contents = page.index("id='claims'"), page.index("<h2>Contents</h2>")
    figure = page.index("<h2 id='progressive'>")
    assert claims < contents < figure
    section = page[claims:contents]
    assert "<a href='#progressive'>003-C1</a>" in section
    assert "v-supported" in section and "first 3 of 12 -&gt; first 2 of 6" in section
    # 000-C1 and 004-C1 (X2) both decided here, side by side
    x2 = section[section.index("X2: Does more data"):]
    assert x2.index("000-C1") < x2.index("004-C1") < x2.index("Decided by")
    assert "not evaluated by reinit-tune yet" in section  # 001-C8 of X1
    assert not re.search(r"\bnan\b", section, re.IGNORECASE)


def test_a_report_of_one_figure_skips_the_claims(tmp_path):
    synth = SyntheticStore(tmp_path / "r")
    plant_progressive(synth, "sst2", 500, {0: 0.5, 2: 0.52, 6: 0.8})
    assert report.run(tmp_path / "r", tmp_path / "out", only=["progressive"]) == 0
    assert "id='claims'" not in (tmp_path / "out" / "report.html").read_text()


def test_decided_verdicts_come_first_and_short_groups_fold_per_family():
    from reinit_tune.verdicts.engine import VerdictRow
    from reinit_tune.verdicts.page import MAX_ROWS, claims_html

    fill = "reinit-tune sweep progressive --tasks sst2 --sizes 50000 --seeds 3 --results r"
    short = [VerdictRow("003-C1", "not enough data", "sst2", str(n), "m", reason="missing",
                        command=fill if n % 3 else fill.replace("sst2", "qnli"))
             for n in range(MAX_ROWS + 10)]
    short.append(VerdictRow("003-C9", "not enough data", None, None, None, reason="missing",
                            command="reinit-tune sweep localized --tasks rte --results r"))
    open_ = VerdictRow("003-C2", "inconclusive", "rte", "500", "m", estimate=0.0,
                       ci_low=-0.1, ci_high=0.1, n_min=3)
    decided = VerdictRow("003-C1", "supported", "qnli", "500", "m", estimate=0.1,
                         ci_low=0.05, ci_high=0.15, n_min=3)
    page = claims_html([*short[:3], open_, *short[3:], decided], {})
    table = page[page.index("claims-table"):page.index("<details")]
    assert table.count("<tr><td") == 2  # the decided and the inconclusive verdict, only
    assert table.index("v-supported") < table.index("v-inconclusive")
    folds = re.findall(r"<summary>(.*?)</summary>", page)
    assert len(folds) == 2 and folds[0].startswith(
        f"not enough data, progressive: {MAX_ROWS + 10} verdicts of 1 claims (003-C1).")
    assert f"Most of them: <code>{fill}</code> (1 other commands inside)" in folds[0]
    assert folds[1].startswith("not enough data, localized: 1 verdicts of 1 claims (003-C9)")
    assert f"the first {MAX_ROWS} of {MAX_ROWS + 10} shown" in page
