"""Classification dev-split metrics as pure functions on prediction and label arrays.

Accuracy, binary F1 (positive class 1, as GLUE scores MRPC) and Matthews correlation are
written out from the confusion matrix so that tests can check them against scikit-learn;
Pearson and Spearman come from scipy; ``acc_and_f1`` is their mean for MRPC, as transformers'
GLUE metric and 001 §5.6 report it. Extractive QA is scored in ``reinit_tune.qa``.
"""

from __future__ import annotations

import math

import numpy as np

from reinit_tune.tasks import ALL_METRICS, get_task


def accuracy(pred: np.ndarray, label: np.ndarray) -> float:
    return float(np.mean(pred == label))


def f1_binary(pred: np.ndarray, label: np.ndarray) -> float:
    tp = float(np.sum((pred == 1) & (label == 1)))
    fp = float(np.sum((pred == 1) & (label == 0)))
    fn = float(np.sum((pred == 0) & (label == 1)))
    denom = 2 * tp + fp + fn
    return 0.0 if denom == 0 else 2 * tp / denom


def matthews_corrcoef(pred: np.ndarray, label: np.ndarray) -> float:
    """Multiclass MCC (Gorodkin 2004); equals the binary formula for two classes.

    Defined as 0 when either marginal is constant, as scikit-learn does (a model that
    predicts one class for every CoLA sentence scores 0, not NaN).
    """
    classes = np.union1d(pred, label)
    idx = {c: i for i, c in enumerate(classes)}
    cm = np.zeros((len(classes), len(classes)), dtype=np.float64)
    for p, t in zip(pred, label, strict=True):
        cm[idx[t], idx[p]] += 1
    t_sum = cm.sum(axis=1)
    p_sum = cm.sum(axis=0)
    n = cm.sum()
    correct = np.trace(cm)
    cov_ytyp = correct * n - np.dot(t_sum, p_sum)
    cov_ypyp = n * n - np.dot(p_sum, p_sum)
    cov_ytyt = n * n - np.dot(t_sum, t_sum)
    if cov_ypyp == 0 or cov_ytyt == 0:
        return 0.0
    return float(cov_ytyp / math.sqrt(cov_ytyt * cov_ypyp))


def _stats():
    # scipy.stats costs ~0.8 s to import: every trial worker and command would pay it, and
    # only STS-B's metrics use it
    from scipy import stats

    return stats


def _correlation(fn, pred: np.ndarray, label: np.ndarray) -> float:
    if np.all(pred == pred[0]) or np.all(label == label[0]):
        return 0.0  # correlation with a constant is undefined; score it as no signal
    return float(fn(pred, label)[0])


def compute(task: str, predictions, labels) -> dict[str, float]:
    """Metrics of ``task`` for class predictions (or regression scores for STS-B), under the
    names of its first dev split."""
    spec = get_task(task)
    if spec.is_qa:
        raise ValueError(f"{task} is scored from answer texts (reinit_tune.qa), not labels")
    pred = np.asarray(predictions)
    label = np.asarray(labels)
    if pred.shape != label.shape:
        raise ValueError(f"predictions {pred.shape} and labels {label.shape} differ in shape")
    if pred.size == 0:
        raise ValueError("no predictions to score")
    if spec.is_regression:
        pred = pred.astype(np.float64)
        label = label.astype(np.float64)
    out: dict[str, float] = {}
    for name in spec.metrics:
        if name == "accuracy":
            out[name] = accuracy(pred, label)
        elif name == "f1":
            out[name] = f1_binary(pred, label)
        elif name == "mcc":
            out[name] = matthews_corrcoef(pred, label)
        elif name == "pearson":
            out[name] = _correlation(_stats().pearsonr, pred, label)
        elif name == "spearman":
            out[name] = _correlation(_stats().spearmanr, pred, label)
    if "acc_and_f1" in spec.metrics:
        out["acc_and_f1"] = (out["accuracy"] + out["f1"]) / 2
    return out


def reference_scores(task: str, labels, metric: str | None = None
                     ) -> tuple[float, float | None]:
    """What ``metric`` of ``task`` (default: its primary) gives without learning, on dev
    ``labels``:

    - majority: every example predicted as the most frequent dev label (STS-B: its mean), so
      accuracy is that label's share, MCC and correlations 0;
    - chance: the expected score of uniform random guessing: 1/K accuracy; 0 MCC and
      correlation; for F1 (positive class 1, a share p of the labels), p / (p + 1/2), with
      precision p and recall 1/2; acc_and_f1 their mean.
    """
    spec = get_task(task)
    metric = metric or spec.primary
    label = np.asarray(labels)
    if spec.is_regression:
        constant = np.full(label.shape, float(np.mean(label)))
        return compute(task, constant, label)[metric], 0.0
    values, counts = np.unique(label, return_counts=True)
    majority = compute(task, np.full(label.shape, values[np.argmax(counts)]), label)
    p = float(np.mean(label == 1))
    chance = {"accuracy": 1 / spec.num_labels, "mcc": 0.0,
              "f1": p / (p + 0.5) if p > 0 else 0.0}
    chance["acc_and_f1"] = (chance["accuracy"] + chance["f1"]) / 2
    return majority[metric], chance.get(metric)


# Correlations and MCC lie in [-1, 1]; every other metric here (and the QA scores, stored as
# fractions) in [0, 1].
_SIGNED = ("mcc", "pearson", "spearman")


def metric_range(metric: str) -> tuple[float, float]:
    """The values ``metric`` (a primary metric, or a stored ``eval_*`` name without the
    prefix, with or without a dev split's suffix) can take; (-inf, inf) for unknown names."""
    name = str(metric).removeprefix("eval_")
    if name not in ALL_METRICS:
        return -math.inf, math.inf
    return (-1.0, 1.0) if name.split("_")[0] in _SIGNED else (0.0, 1.0)
