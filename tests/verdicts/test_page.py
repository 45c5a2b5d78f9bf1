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


def test_a_large_store_lists_what_was_decided_and_counts_the_rest():
    from reinit_tune.verdicts.engine import VerdictRow
    from reinit_tune.verdicts.page import MAX_ROWS, claims_html

    short = [VerdictRow("003-C1", "not enough data", "sst2", str(n), "m", reason="missing")
             for n in range(MAX_ROWS + 10)]
    decided = [VerdictRow("003-C1", "supported", "qnli", "500", "m", estimate=0.1,
                          ci_low=0.05, ci_high=0.15, n_min=3)]
    page = claims_html(decided + short, {})
    assert page.count("<tr><td") == 1 and "v-supported" in page
    assert f"{MAX_ROWS + 10} rows are not listed here" in page
