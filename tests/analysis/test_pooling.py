"""No figure, table or summary ever averages two configurations. Decoy stores hold, for every
figure, a plain configuration and nine decoys that each differ from it in one identity field
(lr, epochs, precision, init scheme, batch size, model, sequence length, length grouping,
schedule), two seeds each, with scores no pooled mean can imitate: every plotted point must be
one configuration's own mean over exactly its two seeds, and every configuration is plotted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reinit_tune import sanity, store
from reinit_tune.analysis import (
    frames,
    heads,
    localized,
    permutations,
    progressive,
    published,
    sequential,
    similarity,
    variants,
)
from tests.helpers import SyntheticStore

L = 6
SEEDS = (0, 1)
JITTER = 0.0001  # seed s scores s * JITTER more: a configuration's mean is JITTER / 2 more

# One identity field changed at a time; every decoy keeps every other field.
DECOYS = {
    "lr": {"lr": 5e-5},
    "epochs": {"epochs": 10},
    "precision": {"precision": "bf16"},
    "init_scheme": {"init_scheme": "authors-code"},
    "batch_size": {"batch_size": 32},
    "model": {"model": "other-org/other-bert"},
    "max_seq_length": {"max_seq_length": 64},
    "length_grouped": {"length_grouped": False},  # the default is True
    "schedule": {"schedule": "slanted-triangular"},
}
LABELS = {"lr": "lr 5e-05", "epochs": "10 epochs", "precision": "bf16",
          "init_scheme": "init authors-code", "batch_size": "batch 32", "model": "other-bert",
          "max_seq_length": "max 64 tokens", "length_grouped": "uniform batches",
          "schedule": "slanted-triangular schedule"}


# Configuration i scores level + 0.01 * GOLOMB[i]: marks of a Golomb ruler, so no two
# configurations' pooled mean equals a configuration's own score, and a pooled point would
# also count more than two runs.
GOLOMB = (0, 1, 6, 10, 23, 26, 34, 41, 53, 55)
CONFIGS = ({}, *DECOYS.values())


def add_all(synth: SyntheticStore, experiment: str, task: str, level: float,
            skip: tuple[str, ...] = (), **fields) -> list[float]:
    """Every configuration (the plain one and each decoy) with ``fields``, two seeds each;
    returns each configuration's mean score."""
    means = []
    for mark, extra in zip(GOLOMB, CONFIGS, strict=False):
        if set(extra) & set(skip):
            continue
        score = level + 0.01 * mark
        for seed in SEEDS:
            synth.add(experiment, task, score + seed * JITTER, seed=seed, **{**fields, **extra})
        means.append(score + JITTER / 2)
    return means


def assert_split(table, means: list[float], columns=("mean",), exact: bool = True) -> None:
    """Every plotted value is one configuration's own mean over its two seeds (never a mean
    across configurations), and (``exact``) every configuration is plotted."""
    values = np.concatenate([table[c].to_numpy(dtype=float) for c in columns])
    values = values[~np.isnan(values)]
    own = np.isclose(values[:, None], np.asarray(means)[None, :], atol=1e-9)
    assert own.any(axis=1).all(), (values[~own.any(axis=1)], table)
    if exact:
        assert own.any(axis=0).all(), (np.asarray(means)[~own.any(axis=0)], table)
    if "n" in table:
        assert (table["n"] == len(SEEDS)).all(), table


def test_progressive_probing_and_small_data(synth, tmp_path):
    means = {k: add_all(synth, "progressive", "sst2", 0.2 + 0.001 * k, train_size=500,
                        reinit_layers=range(k, L)) for k in (0, L)}
    probe_means = add_all(synth, "probing", "sst2", 0.1, probe_layer=2, train_size=None)
    trials = synth.load().trials
    _, _, table = progressive.plot_progressive(trials, tmp_path)
    finetune = table[table["curve"] == "finetune"]
    assert_split(finetune, means[0] + means[L])
    assert len(set(finetune["task"])) == len(CONFIGS)  # a panel per configuration
    for label in LABELS.values():
        assert any(label in t for t in finetune["task"]), (label, set(finetune["task"]))
    caption = table.attrs["caption"]
    assert "never averaged together" in caption
    assert all(field.replace("_", " ") in caption for field in DECOYS), caption
    # each panel's probing overlay: the probes of its task and model only, never pooled
    assert_split(table[table["curve"] == "probe"], probe_means)
    _, _, probes = progressive.plot_probing(trials, tmp_path)
    assert_split(probes, probe_means)
    _, _, small = progressive.plot_small_data(trials, tmp_path)
    assert_split(small, means[0] + means[L])


def test_localized_and_single_layer(synth, tmp_path):
    means = []
    for experiment, layers, level in (("localized", range(3), 0.1),
                                      ("single_layer", [2], 0.2)):
        means += add_all(synth, experiment, "qnli", level, reinit_layers=())
        means += add_all(synth, experiment, "qnli", level + 0.001, reinit_layers=layers)
    trials = synth.load().trials
    for plot in (localized.plot_localized, localized.plot_single_layer):
        _, _, table = plot(trials, tmp_path)
        assert_split(table, means, exact=False)
        assert len(table) >= 2 * len(CONFIGS)


def test_permutations_and_table_1(synth, tmp_path):
    rng = np.random.RandomState(0)
    orders = [tuple(rng.permutation(L).tolist()) for _ in range(4)]
    for i, (mark, extra) in enumerate(zip(GOLOMB, CONFIGS, strict=False)):
        for n, order in enumerate(orders):
            for task in ("rte", "sst2"):
                synth.add("permutations", task, 0.1 + 0.01 * mark + 0.001 * n, seed=n,
                          layer_order=order, **extra)
        assert i < len(GOLOMB)
    trials = synth.load().trials
    _, _, table = permutations.plot_permutations(trials, tmp_path)
    assert set(table["n"]) == {len(orders)}  # four permutations, never eight or more
    assert sorted(table["mean"].round(6)) == sorted(
        round(0.1 + 0.01 * m + 0.0015, 6) for m in GOLOMB for _ in (0, 1))
    correlations = permutations.permutation_correlations(trials)
    # rte and sst2 paired within each configuration, never across two
    assert (correlations["n"] == len(orders)).all() and len(correlations) == len(CONFIGS)


def test_heads(synth, tmp_path):
    bases = add_all(synth, "heads", "stsb", 0.2)
    heads_ = add_all(synth, "heads", "stsb", 0.1, reinit_heads=((0, 1),))
    _, _, cells = heads.plot_heads(synth.load().trials, tmp_path)
    assert_split(cells, bases, columns=("baseline",))
    assert_split(cells, heads_, columns=("score",))
    assert np.allclose(cells["diff"], -0.1)  # each head against its own configuration


def test_sequential_and_its_published_comparison(synth, tmp_path):
    direct = add_all(synth, "sequential", "rte", 0.1, train_size=None)
    after = add_all(synth, "sequential", "rte", 0.15, train_size=None,
                    intermediate_task="mrpc")
    trials = synth.load().trials
    _, _, matrix = sequential.plot_sequential(trials, tmp_path)
    assert_split(matrix, direct + after)
    beside = published._sequential(frames.Store(trials, *[trials.iloc[:0]] * 4),
                                   "sequential", None)
    ours = beside.loc[beside["intermediate"] == "mrpc"]
    ours = ours.loc[ours["final"] == "rte", "ours"].to_numpy(dtype=float)
    assert np.isclose(ours[:, None], np.asarray(after)[None, :]).any(axis=1).all()


def test_variants_and_the_epoch_study(synth, tmp_path):
    reference, variant, study = [], [], []
    for k in (0, L):
        reference += add_all(synth, "variants", "sst2", 0.1 + 0.001 * k, skip=("epochs",),
                             reinit_layers=range(k, L))
        variant += add_all(synth, "variants", "sst2", 0.2 + 0.001 * k, skip=("epochs",),
                           reinit_layers=range(k, L), reinit_lr_multiplier=5.0)
        study += add_all(synth, "variants", "sst2", 0.3 + 0.001 * k, skip=("epochs",),
                         reinit_layers=range(k, L), epochs=10)
    data = synth.load()
    _, _, table = variants.plot_variants(data.trials, tmp_path)
    # another initializer is itself one of 003 Figs 6-7's variants: its 10-epoch runs are
    # drawn as that variant, not as the epoch study
    assert_split(table, reference + variant + study, exact=False)
    assert_split(table[table["variant"] == variants.REFERENCE], reference, exact=False)
    _, _, epochs = variants.plot_epochs(data.trials, data.epochs, tmp_path)
    assert_split(epochs, study, exact=False)
    assert len(set(epochs["task"])) == len(CONFIGS) - 2  # no epochs decoy, no init decoy


def test_similarity(synth, tmp_path):
    values = {}
    for mark, extra in zip(GOLOMB, CONFIGS, strict=False):
        for seed in SEEDS:
            values[synth.add("progressive", "sst2", 0.5, seed=seed, **extra)] = 1 + mark
    for trial_id, value in values.items():
        store.write_similarity(synth.root, trial_id, [
            {"layer": layer, "examples": 10, "samples": 100, "w_output_fro": value}
            for layer in range(1, 3)])
    data = synth.load()
    means = [1.0 + m for m in GOLOMB]
    _, _, table = similarity.plot_similarity_by_size(data.trials, data.similarity, tmp_path)
    assert_split(table, means)
    _, _, by_task = similarity.plot_similarity_by_task(data.trials, data.similarity, tmp_path)
    assert_split(by_task, means)


def test_degenerate_summary_keeps_configurations_apart(synth):
    # the plain configuration sits at the majority rate on every seed; its decoys do not
    for seed in SEEDS:
        synth.add("progressive", "rte", 0.527, seed=seed, majority=0.527)
    for extra in DECOYS.values():
        for seed in SEEDS:
            synth.add("progressive", "rte", 0.6 + 0.01 * seed, seed=seed, majority=0.527,
                      **extra)
    groups = sanity.degenerate_groups(synth.load().trials)
    assert len(groups) == 1 and groups["runs"].iloc[0] == 2, groups


def test_identical_runs_under_two_experiments_count_once(synth):
    """A configuration reused by another family (``reused_from``) is one run, not two."""
    for seed in SEEDS:
        synth.add("progressive", "sst2", 0.7 + seed * JITTER, seed=seed)
    rows = frames.ok(synth.load().trials)
    split = frames.split(pd.concat([rows, rows.assign(experiment="single_layer")]),
                         ("task", "train_size"), ("reinit_layers",))
    assert len(split) == len(SEEDS) and split.attrs["split"] == []


def test_a_field_that_differs_only_between_lines_splits_nothing(synth, tmp_path):
    """003's per-size rule (5 epochs at 500 examples, 3 at 5k) is one figure, not two."""
    for k in (0, L):
        for seed in SEEDS:
            synth.add("progressive", "sst2", 0.7, seed=seed, train_size=500, epochs=5,
                      reinit_layers=range(k, L))
            synth.add("progressive", "sst2", 0.9, seed=seed, train_size=5000, epochs=3,
                      reinit_layers=range(k, L))
    _, _, table = progressive.plot_progressive(synth.load().trials, tmp_path)
    assert set(table["task"]) == {"sst2"} and set(table["size"]) == {"500", "5000"}
    assert "Epochs differ only from one line or panel to another" in table.attrs["caption"]


@pytest.fixture
def synth(tmp_path):
    return SyntheticStore(tmp_path / "results")


def test_best_of_two_takes_the_better_run_of_each_pair(synth, tmp_path):
    """001 §7: each sequential experiment run twice, the better score kept (``best_of``)."""
    for seed, (direct, after) in enumerate(((0.60, 0.70), (0.64, 0.66), (0.50, 0.90),
                                            (0.58, 0.52))):
        synth.add("001-sequential", "rte", direct, seed=seed, train_size=None)
        synth.add("001-sequential", "rte", after, seed=seed, train_size=None,
                  intermediate_task="mrpc")
    trials = synth.load().trials
    _, _, table = sequential.plot_sequential(trials, tmp_path, experiment="001-sequential",
                                             best_of=2)
    cell = table[table["intermediate"] == "mrpc"].iloc[0]
    # seeds 0, 1 → max 0.70; seeds 2, 3 → max 0.90; the two sets averaged
    assert cell["mean"] == pytest.approx(0.80) and cell["n"] == 2 and cell["runs"] == 4
    assert cell["mean_of_runs"] == pytest.approx(np.mean([0.70, 0.66, 0.90, 0.52]))
    base = table[table["intermediate"] == "rte"].iloc[0]
    assert base["mean"] == pytest.approx((0.64 + 0.58) / 2)
    assert "better of each 2 runs" in table.attrs["caption"]
    comparison = published.beside("001-sequential", frames.Store(trials, *[trials.iloc[:0]] * 4),
                                  best_of=2)
    [beside] = comparison.values()
    assert beside.loc[(beside["final"] == "rte") & (beside["intermediate"] == "mrpc"),
                      "ours"].iloc[0] == pytest.approx(0.80)
    _, _, plain = sequential.plot_sequential(trials, tmp_path, experiment="001-sequential")
    assert plain[plain["intermediate"] == "mrpc"]["mean"].iloc[0] == pytest.approx(0.695)


def test_runs_on_a_local_subset_are_labelled_as_such(synth, tmp_path):
    """--allow-subset rows: the size label and the caption say what they trained on."""
    from reinit_tune import store as results

    for seed in SEEDS:
        synth.add("progressive", "qnli", 0.6 + seed * JITTER, seed=seed, train_size=0.1)
    for path in (synth.root / "trials").glob("*.parquet"):  # as a subset run stores them
        table = pq.read_table(path).to_pylist()
        table[0].update(data_subset=True, train_examples=9999)
        pq.write_table(pa.Table.from_pylist(table, schema=results.TRIAL_SCHEMA), path)
    _, _, table = progressive.plot_progressive(synth.load().trials, tmp_path)
    assert set(table["size"]) == {"10% (subset: 9999)"}
    assert "local subset of the official train split" in table.attrs["caption"]


def test_runs_of_another_dropout_definition_are_never_pooled(synth, tmp_path):
    """Rows of reinit-tune 0.2 and earlier drew their dropout masks from a generator
    ("stream", what a stored row without the column reads as); this version's draw
    stateless ones: other numbers, so another configuration in every figure and table."""
    import pyarrow.parquet as pq

    for seed in SEEDS:
        synth.add("progressive", "sst2", 0.7 + seed * JITTER, seed=seed)
        old = synth.add("progressive", "sst2", 0.6 + seed * JITTER, seed=seed,
                        dropout="stream")
        path = synth.root / "trials" / f"{old}.parquet"  # as 0.2 wrote it: no such column
        table = pq.read_table(path)
        pq.write_table(table.drop_columns(["dropout"]), path)
    rows = frames.ok(synth.load().trials)
    assert set(rows["dropout"].fillna("stream")) == {"stream", "counter-v1"}
    split = frames.split(rows, ("task", "train_size"), ("reinit_layers",))
    assert split.attrs["split"] == ["dropout"]
    assert set(split["task"]) == {"sst2 · stream dropout masks",
                                  "sst2 · counter-v1 dropout masks"}
    means = split.groupby("task")["score"].mean()
    assert means["sst2 · stream dropout masks"] == pytest.approx(0.6 + JITTER / 2)
    assert means["sst2 · counter-v1 dropout masks"] == pytest.approx(0.7 + JITTER / 2)
