"""The store's SQL views against the loaders, on a compacted store with reruns, a failed
rerun and a rerun compacted again; and every SQL query the README and the docs print, run
against that store, gives the loaders' numbers."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from reinit_tune import store
from reinit_tune.store import sql
from tests.helpers import REPO, SyntheticStore


@pytest.fixture(scope="module")
def rerun_store(tmp_path_factory):
    """Progressive SST-2 runs, k = 0..2 x 3 seeds at 0.5 + 0.1 k, compacted; then seed 0 of
    k = 0 rerun ok at 0.9, seed 1 of k = 1 rerun and failed, both after compaction; and
    seed 2 of k = 2 rerun at 0.1 and compacted again."""
    root = tmp_path_factory.mktemp("sql") / "results"
    synth = SyntheticStore(root)

    def add(k: int, seed: int, score: float, status: str = "ok") -> str:
        return synth.add("progressive", "sst2", score, seed=seed, train_size=500,
                         reinit_layers=range(k, 6), status=status)

    for k in range(3):
        for seed in range(3):
            add(k, seed, 0.5 + 0.1 * k)
    store.compact(root)
    add(2, 2, 0.1)
    store.compact(root)
    add(0, 0, 0.9)
    add(1, 1, 0.0, status="error")
    return root


def test_views_hold_what_the_loaders_read(rerun_store):
    con = sql.connect(rerun_store)
    trials = con.sql("SELECT * FROM trials").df()
    loaded = store.load_trials(rerun_store)
    assert len(trials) == len(loaded) == 9
    merged = trials.merge(loaded, on="trial_id", suffixes=("", "_loaded"))
    assert (merged["status"] == merged["status_loaded"]).all()
    assert merged["score"].equals(merged["score_loaded"])
    assert set(con.sql("SELECT DISTINCT trial_id FROM epochs").df()["trial_id"]) == \
        set(loaded["trial_id"])
    epochs = con.sql("SELECT count(*) AS n FROM epochs").df()["n"][0]
    assert epochs == len(store.load_epochs(rerun_store))
    assert "filename" not in trials.columns and "__file" not in trials.columns
    # the statements, for a DuckDB shell
    text = sql.views(rerun_store)
    assert text.count("CREATE OR REPLACE VIEW") == 2 and "trials" in text and "epochs" in text


def expected_per_k(root) -> dict[int, tuple[float, int]]:
    ok = store.load_trials(root, status="ok")
    grouped = ok.groupby("num_pretrained_layers")["score"].agg(["mean", "count"])
    return {int(k): (float(r["mean"]), int(r["count"])) for k, r in grouped.iterrows()}


def documented_queries() -> list[str]:
    """Every SQL query README and docs print: ```sql blocks, and the query strings handed to
    ``.sql(...)`` in their commands."""
    found = []
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text()
        found += re.findall(r"```sql\n(.*?)```", text, re.S)
        found += re.findall(r'\.sql\(\\?"(SELECT.*?)\\?"\)', text)
    return found


def test_every_documented_query_reads_each_trial_once(rerun_store):
    queries = documented_queries()
    assert len(queries) >= 2
    truth = expected_per_k(rerun_store)
    assert truth == {0: (pytest.approx((0.9 + 0.5 + 0.5) / 3), 3), 1: (pytest.approx(0.6), 2),
                     2: (pytest.approx((0.7 + 0.7 + 0.1) / 3), 3)}
    for query in queries:
        body = "\n".join(ln for ln in query.splitlines() if not ln.strip().startswith("--"))
        result = sql.connect(rerun_store).sql(body.strip().rstrip(";")).df()
        result.columns = ["task", "k", "mean", "count"]
        got = {int(r.k): (float(r.mean), int(r.count)) for r in result.itertuples()}
        assert got == truth, query


def test_plain_sql_over_the_files_would_count_reruns_twice(rerun_store):
    import duckdb

    files = f"'{rerun_store}/trials/*.parquet'"
    raw = duckdb.sql(f"SELECT count(*) FROM {files} WHERE status = 'ok'").fetchall()[0][0]
    assert raw > 8  # the compacted rows of the reruns are still there; the views hide them
    assert isinstance(sql.connect(rerun_store).sql("SELECT * FROM trials").df(), pd.DataFrame)


@pytest.mark.parametrize("name", ["runs[1]", "runs*", "runs?", "my runs [a-z] o'clock"])
def test_a_store_whose_path_looks_like_a_pattern_reads_its_own_rows(tmp_path, capsys, name):
    """DuckDB expands ``[ ] * ?`` in every path it reads: a store at ``runs[1]`` beside a
    ``runs1`` read runs1's scores, before and after compaction, in the loaders, the SQL
    views and the report's command. Each store reads only its own rows."""
    from tests.helpers import cli

    mine, other = tmp_path / name, tmp_path / "runs1"
    for root, score in ((mine, 0.25), (other, 0.75)):
        synth = SyntheticStore(root)
        for seed in range(3):
            synth.add("progressive", "sst2", score, seed=seed, train_size=500,
                      reinit_layers=range(2, 6))
    for compacted in (False, True):
        if compacted:
            store.compact(mine)
            store.compact(other)
        trials = store.load_trials(mine)
        assert len(trials) == 3 and set(trials["score"]) == {0.25}, compacted
        con = sql.connect(mine)
        assert con.sql("SELECT count(*), avg(score) FROM trials").fetchall() == [(3, 0.25)]
        assert con.sql("SELECT count(*) FROM epochs").fetchall()[0][0] == \
            len(store.load_epochs(mine))
    code, out = cli(capsys, "store", "check", "--results", str(mine))
    assert code == 0 and "store is clean" in out, out


def test_connect_names_a_path_that_is_no_store_and_reads_an_empty_store_as_empty(tmp_path):
    """README's one-liner on a misspelled path names it (no CatalogException); on a store
    whose sweep stored no trial yet, every table reads 0 rows."""
    from reinit_tune.errors import InputError

    with pytest.raises(InputError, match=f"results_dir {tmp_path / 'typo'} does not exist"):
        sql.connect(tmp_path / "typo")
    (tmp_path / "empty" / "trials").mkdir(parents=True)
    con = sql.connect(tmp_path / "empty")
    assert con.sql("SELECT count(*) FROM trials").fetchall() == [(0,)]
    assert con.sql("SELECT avg(score) FROM trials WHERE status = 'ok'").fetchall() == [(None,)]
    assert con.sql("SELECT count(*) FROM epochs").fetchall() == [(0,)]
