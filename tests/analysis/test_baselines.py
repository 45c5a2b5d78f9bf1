"""Baselines per plotted metric: majority class and chance for every classification task and
metric against sklearn on the real dev labels, the 001 MRPC panel's lines for the metric it
plots (accuracy-and-F1), and the published MRPC values marked as a trivial predictor's."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from reinit_tune.analysis import published
from reinit_tune.analysis.baselines import dev_reference, trivial_predictor
from reinit_tune.analysis.progressive import plot_progressive
from reinit_tune.tasks import TASKS
from tests.helpers import SyntheticStore

SKLEARN = {"accuracy": accuracy_score, "f1": f1_score, "mcc": matthews_corrcoef}


@pytest.mark.parametrize("task", sorted(t for t, spec in TASKS.items()
                                        if not spec.is_qa and not spec.is_regression))
def test_every_metric_of_every_task_has_its_own_baselines(glue_dir, task):
    spec = TASKS[task]
    dev = glue_dir / task / f"{spec.dev_splits[0]}.parquet"
    if not dev.is_file():
        assert dev_reference(task, spec.primary, str(glue_dir)) is None  # no line, not a guess
        pytest.skip(f"no local {task} dev split")
    labels = pq.read_table(dev, columns=["label"])["label"].to_numpy()
    values, counts = np.unique(labels, return_counts=True)
    constant = np.full(labels.shape, values[np.argmax(counts)])
    p = float(np.mean(labels == 1))
    for metric in spec.metrics:
        majority, chance = dev_reference(task, metric, str(glue_dir))
        if metric == "acc_and_f1":
            want = (accuracy_score(labels, constant) + f1_score(labels, constant)) / 2
            want_chance = (1 / spec.num_labels + p / (p + 0.5)) / 2
        else:
            want = SKLEARN[metric](labels, constant)
            want_chance = {"accuracy": 1 / spec.num_labels, "mcc": 0.0,
                           "f1": p / (p + 0.5)}[metric]
        assert majority == pytest.approx(want), (task, metric)
        assert chance == pytest.approx(want_chance), (task, metric)


def test_the_001_mrpc_panel_draws_the_baselines_of_the_metric_it_plots(glue_dir, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("REINIT_TUNE_DATA", str(glue_dir))
    synth = SyntheticStore(tmp_path / "results")
    for k in (0, 6):
        for seed in range(2):
            # stored as the trial would be: the primary (accuracy) baselines in the row
            synth.add("001-layers", "mrpc", 0.70 + 0.01 * seed, seed=seed, train_size=500,
                      reinit_layers=range(k, 6), majority=0.6838, chance=0.5)
    trials = synth.load().trials
    trials["eval_acc_and_f1"] = 0.78
    fig, _, _ = plot_progressive(trials, tmp_path / "out", experiment="001-layers",
                                 probing=None, metrics={"mrpc": "acc_and_f1"})
    ax = fig.axes[0]
    lines = {line.get_label().split(" (")[0]: line.get_ydata()[0] for line in ax.get_lines()
             if line.get_label().startswith(("majority", "chance"))}
    assert lines["majority class"] == pytest.approx(0.7480, abs=1e-4)
    assert lines["chance"] == pytest.approx(0.5388, abs=1e-4)


def test_published_mrpc_values_that_a_trivial_predictor_scores_are_marked(glue_dir,
                                                                          monkeypatch):
    monkeypatch.setenv("REINIT_TUNE_DATA", str(glue_dir))
    for metric, value in zip(published.MRPC_001["metric"],
                             published.MRPC_001["published: reinit any k"], strict=True):
        assert "majority dev class" in trivial_predictor("mrpc", metric, value), metric
    assert trivial_predictor("mrpc", "accuracy", 0.776) is None  # 001's no-reinit baseline
