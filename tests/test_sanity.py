"""Degenerate results, per configuration (its runs over the seeds): runs at the dev
majority-class rate or, on two-class accuracy tasks, at 1 - it, counted per configuration;
configurations whose runs do not vary; and what the sweep summary prints of them."""

from __future__ import annotations

import pytest

from reinit_tune import sanity
from reinit_tune.sweep.runner import SweepSummary
from tests.helpers import SyntheticStore

L = 6
RTE_MAJORITY = 0.527076  # 146 of 277 RTE dev examples


@pytest.fixture
def synth(tmp_path):
    return SyntheticStore(tmp_path / "results")


def rte_run(synth, k: int, seed: int, score: float, **fields) -> str:
    return synth.add("progressive", "rte", score, seed=seed, train_size=32,
                     reinit_layers=range(k, L), majority=RTE_MAJORITY, chance=0.5, **fields)


def test_a_configuration_with_some_runs_at_the_majority_rate_or_1_minus_it_is_flagged(synth):
    # 12 runs, 9 at one rate or the other, no configuration entirely at the majority rate:
    # the case the all-runs-at-majority check missed
    for k in range(3):
        for seed, score in enumerate((RTE_MAJORITY, 1 - RTE_MAJORITY, 1 - RTE_MAJORITY,
                                      0.55 + 0.01 * k)):
            rte_run(synth, k, seed, score)
    groups = sanity.degenerate_groups(synth.load().trials)
    assert len(groups) == 3 and set(groups["why"]) == {"one class"}
    assert list(groups["runs"]) == [4] * 3
    assert list(groups["majority_runs"]) == [1] * 3
    assert list(groups["minority_runs"]) == [2] * 3
    assert sorted(groups["configuration"]) == [
        "reinit_layers [0,1,2,3,4,5]", "reinit_layers [1,2,3,4,5]", "reinit_layers [2,3,4,5]"]
    assert set(groups["configurations"]) == {3}


def test_every_run_at_1_minus_the_majority_rate(synth):
    for k in (0, 6):
        for seed in range(2):
            rte_run(synth, k, seed, 1 - RTE_MAJORITY)
    trials = synth.load().trials
    groups = sanity.degenerate_groups(trials)
    assert list(groups["minority_runs"]) == [2, 2] and list(groups["majority_runs"]) == [0, 0]
    lines = sanity.warnings(trials)
    assert lines[0].startswith("progressive rte (train size 32, ")
    assert ("2 of 2 configurations, 4 runs at the dev majority-class rate 0.5271 or 1 - it: "
            "models that predict one class") in lines[0]
    assert lines[1:] == [
        f"  reinit_layers {layers}: 2 of 2 runs score exactly 0.4729, 1 - the dev "
        "majority-class rate 0.5271 (the minority class for everything)"
        for layers in ("[0,1,2,3,4,5]", "[]")]


def test_1_minus_the_majority_rate_counts_only_for_two_class_accuracy(synth):
    # CoLA's MCC: the majority rate is 0, and 1 - 0 is a perfect score, not a degenerate one
    for seed in range(2):
        synth.add("progressive", "cola", 1.0 - 0.1 * seed, seed=seed, train_size=32,
                  majority=0.0)
        # MNLI has three classes: 1 - its majority rate is no single-class prediction
        synth.add("progressive", "mnli", 0.65 + 0.01 * seed, seed=seed, train_size=32,
                  majority=0.35)
    assert sanity.degenerate_groups(synth.load().trials).empty


def test_runs_that_look_like_results_are_not_flagged(synth):
    for seed in range(3):
        rte_run(synth, 0, seed, 0.55 + 0.01 * seed)
        rte_run(synth, 3, seed, 0.6)  # zero variance, not at either rate
    synth.add("progressive", "rte", RTE_MAJORITY, seed=9, status="error", train_size=32,
              majority=RTE_MAJORITY)  # failed runs do not count
    trials = synth.load().trials
    groups = sanity.degenerate_groups(trials)
    assert list(zip(groups["configuration"], groups["why"], strict=True)) == [
        ("reinit_layers [3,4,5]", "zero variance")]
    lines = sanity.warnings(trials)
    assert "1 of 2 configurations, 3 runs: the seeds changed nothing" in lines[0]
    assert lines[1] == "  reinit_layers [3,4,5]: all 3 runs score 0.6000"


def test_rows_without_a_majority_score_are_checked_for_variance_only(synth):
    for seed in range(2):
        synth.add("progressive", "sst2", 0.5, seed=seed, train_size=32)
    groups = sanity.degenerate_groups(synth.load().trials)
    assert list(groups["why"]) == ["zero variance"]


def test_the_sweep_summary_lists_configurations_and_caps_them(synth):
    for k in range(L + 1):
        for seed in range(2):
            rte_run(synth, k, seed, 1 - RTE_MAJORITY, lr=1e-5)
            rte_run(synth, k, seed, RTE_MAJORITY, lr=3e-5)
    trials = synth.load().trials
    assert len(sanity.degenerate_groups(trials)) == 14
    lines = sanity.warnings(trials, limit=10)
    assert sum(line.startswith("  ") for line in lines) == 10
    assert lines[-1].startswith("... and 4 more configurations")
    assert "lr 1e-05; reinit_layers [0,1,2,3,4,5]" in "\n".join(lines)
    summary = SweepSummary(name="progressive", results_dir=synth.root, total=28, ok=28,
                           warnings=sanity.warnings(trials))
    text = str(summary)
    assert text.count("\nwarning:   lr ") == 14
    assert "14 of 14 configurations, 28 runs" in text
