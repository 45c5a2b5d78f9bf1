"""GLUE metrics against scikit-learn and scipy references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk

from reinit_tune import metrics

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("trial", range(5))
def test_classification_metrics_match_sklearn(trial):
    label = RNG.integers(0, 2, size=200)
    pred = np.where(RNG.random(200) < 0.7, label, 1 - label)
    out = metrics.compute("mrpc", pred, label)
    assert out["accuracy"] == pytest.approx(sk.accuracy_score(label, pred))
    assert out["f1"] == pytest.approx(sk.f1_score(label, pred))
    assert metrics.compute("cola", pred, label)["mcc"] == pytest.approx(
        sk.matthews_corrcoef(label, pred))


def test_multiclass_mcc_matches_sklearn():
    label = RNG.integers(0, 3, size=300)
    pred = np.where(RNG.random(300) < 0.5, label, RNG.integers(0, 3, size=300))
    assert metrics.matthews_corrcoef(pred, label) == pytest.approx(
        sk.matthews_corrcoef(label, pred))


def test_constant_predictions_score_zero_mcc_like_sklearn():
    label = np.array([0, 1, 1, 0, 1])
    pred = np.ones(5, dtype=int)
    assert metrics.compute("cola", pred, label)["mcc"] == 0.0 == sk.matthews_corrcoef(label, pred)


def test_regression_metrics_match_scipy():
    label = RNG.uniform(0, 5, size=150)
    pred = label + RNG.normal(0, 1.0, size=150)
    out = metrics.compute("stsb", pred, label)
    assert out["pearson"] == pytest.approx(stats.pearsonr(pred, label)[0])
    assert out["spearman"] == pytest.approx(stats.spearmanr(pred, label)[0])
    assert set(out) == {"pearson", "spearman"}


@pytest.mark.parametrize("task,keys", [("sst2", {"accuracy"}), ("qnli", {"accuracy"}),
                                       ("rte", {"accuracy"}), ("wnli", {"accuracy"}),
                                       ("mnli", {"accuracy"}),
                                       ("mrpc", {"accuracy", "f1", "acc_and_f1"}),
                                       ("cola", {"mcc"})])
def test_each_task_reports_its_glue_metrics(task, keys):
    assert set(metrics.compute(task, np.array([0, 1, 1]), np.array([0, 1, 0]))) == keys


def test_mrpc_acc_and_f1_is_the_mean_001_reports():
    pred, label = np.array([1, 1, 0, 1, 0]), np.array([1, 0, 0, 1, 1])
    out = metrics.compute("mrpc", pred, label)
    # accuracy 3/5; F1 with tp 2, fp 1, fn 1: 4/6
    assert out["accuracy"] == pytest.approx(0.6) and out["f1"] == pytest.approx(2 / 3)
    assert out["acc_and_f1"] == pytest.approx((0.6 + 2 / 3) / 2)


def test_mnli_scores_both_dev_splits_under_their_names():
    from reinit_tune.tasks import get_task

    mnli = get_task("mnli")
    assert mnli.primary == "accuracy" and mnli.num_labels == 3
    assert mnli.split_metrics("validation_matched") == ("accuracy",)
    assert mnli.split_metrics("validation_mismatched") == ("accuracy_mismatched",)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="task"):
        metrics.compute("mnli2", [0], [0])
    with pytest.raises(ValueError, match="shape"):
        metrics.compute("sst2", [0, 1], [0])
