"""The one-command report on a store made by a tiny real sweep (with --similarity, through
Ray Tune), then with every other experiment family added as synthetic rows."""

from __future__ import annotations

import re

import pytest

from reinit_tune import report, spaces, store
from reinit_tune.layer_similarity import SimilarityOptions
from reinit_tune.runner import run_sweep
from tests.helpers import load_script
from tests.synthetic import SyntheticStore
from tests.test_figures import permutation_store

pytestmark = pytest.mark.ray
L = 6


def images(page: str) -> int:
    return len(re.findall(r'src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}"', page))


def add_every_other_family(synth: SyntheticStore) -> None:
    for k in (0, 6):
        synth.add("progressive", "sst2", 0.6 + 0.03 * k, reinit_layers=range(k, L))
        synth.add("variants", "sst2", 0.6 + 0.03 * k, reinit_layers=range(k, L),
                  reinit_lr_multiplier=5.0)
        synth.add("variants", "sst2", 0, reinit_layers=range(k, L), epochs=2,
                  epoch_scores=[0.5, 0.6])
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


def test_report_from_a_real_sweep_then_with_every_family(ray_local, tiny_bert, glue_dir,
                                                         tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    configs = spaces.progressive(tiny_bert, ["rte"], [16], seeds=1, epochs=1, ks=[0, 4],
                                 data_dir=glue_dir, lr=1e-4)
    summary = run_sweep(configs, results_dir=results, data_dir=str(glue_dir), max_failures=0,
                        similarity=SimilarityOptions(examples=12))
    assert (summary.ok, summary.failed) == (2, 0)
    sim = store.load_similarity(results)
    assert len(sim) == 2 * 5 and set(sim["trial_id"]) == {c.trial_id for c in configs}
    assert sim["svcca_distance"].between(0, 1).all() and (sim["examples"] == 12).all()
    again = run_sweep(configs, results_dir=results, data_dir=str(glue_dir),
                      similarity=SimilarityOptions(examples=12))
    assert again.skipped == 2  # similarity rows are there: nothing to redo

    assert report.main(["--results", str(results)]) == 0
    out = capsys.readouterr().out
    page = (results / "report" / "report.html").read_text()
    drawn = {"progressive", "small_data", "similarity_by_size", "similarity_by_task"}
    for name in drawn:
        assert (results / "report" / f"{name}.png").stat().st_size > 5_000
        assert (results / "report" / f"{name}.pdf").exists()
    assert images(page) == 4
    assert "not drawn: no permutation trials in the store" in out
    assert "Not drawn" in page and "the heads sweep" in page and "torch" in page
    assert "not in the store: probing, small_data, localized" in page

    synth = SyntheticStore(results)
    add_every_other_family(synth)
    monkeypatch.setattr(report.frames, "load", lambda root: synth.load())
    full = tmp_path / "full"
    assert report.main(["--results", str(results), "--out", str(full)]) == 0
    page = (full / "report.html").read_text()
    assert images(page) == 11 and "Not drawn" not in page
    for key in ("progressive", "small_data", "localized", "single_layer", "permutations",
                "variants", "epochs", "heads", "sequential", "similarity"):
        assert f"id='{key}'" in page
    assert "Table 1: paired correlations" in page and "Per head, over the layers" in page
    assert "not in the store: small_data<" in page  # drawn from the 16-example runs

    figures = load_script("analysis/figures.py")
    capsys.readouterr()
    assert figures.main(["permutations", "--results", str(results)]) == 0
    printed = capsys.readouterr().out
    assert "Table 1: paired correlations" in printed and "spearman_p" in printed
    assert (results / "figures" / "permutations.png").is_file()
    assert not (results / "figures" / "heads.png").exists()
