"""002-C5 and 002-C7 on planted pairs tables (the rows `reinit-tune consistency` writes),
written with the store's own writers: verdicts, estimates against a direct computation from
the planted curves, and what is missing when pairs are too few."""

from __future__ import annotations

import numpy as np
import pytest

from reinit_tune import store
from reinit_tune.verdicts import BY_ID, evaluate
from reinit_tune.verdicts.pairs import change_point
from tests.helpers import NED, SyntheticStore, one, plant_pairs


def pair_verdicts(root, claim):
    return evaluate(store.load_trials(root), [BY_ID[claim]], pairs=store.load_pairs(root))


LATE = [0.01, 0.01, 0.011, 0.012, 0.05, 0.06]  # diverges in the last quarter (5, 6 of 6)
EARLY = [0.01, 0.012, 0.04, 0.05, 0.06, 0.07]  # diverges from layer 3 of 6


@pytest.mark.parametrize("curve,want", [(LATE, "supported"), (LATE[::-1], "contradicted")])
def test_002_c5_a_seeds_diverge_only_at_the_top(tmp_path, curve, want):
    planted = plant_pairs(tmp_path, {"sst2": curve, "mnli": curve})
    rows = pair_verdicts(tmp_path, "002-C5")
    row = one(rows, "sst2")
    assert row.verdict == want and "(a)" in row.reason and "6 seed pairs" in row.reason
    mean = np.mean([js for js, _ in planted["seeds", "sst2"]], axis=0)
    assert row.estimate == pytest.approx(mean[4:].mean() / mean[:4].mean())
    assert one(rows, None).verdict == want  # across the paper's tasks


def test_002_c5_b_mrpc_diverges_earlier(tmp_path):
    planted = plant_pairs(tmp_path, {"sst2": LATE, "mnli": LATE, "mrpc": EARLY})
    row = one(pair_verdicts(tmp_path, "002-C5"), "mrpc / mnli / sst2")
    assert row.verdict == "supported" and "(b)" in row.reason

    def cp(task):
        return change_point(np.mean([js for js, _ in planted["seeds", task]], axis=0))[0]

    assert row.estimate == pytest.approx(min(cp("mnli"), cp("sst2")) - cp("mrpc"))
    assert cp("mrpc") == pytest.approx(3 / 6) and cp("sst2") == pytest.approx(5 / 6)


def test_002_c5_short_of_pairs_and_without_any(tmp_path):
    plant_pairs(tmp_path, {"sst2": LATE}, seeds=2)
    row = one(pair_verdicts(tmp_path, "002-C5"), "sst2")
    assert row.verdict == NED and "3 seed pairs of sst2 (1 stored)" in row.reason
    assert "reinit-tune consistency" in row.reason
    empty = tmp_path / "empty"
    SyntheticStore(empty).add("002-dynamics", "sst2", 0.8)
    [only] = pair_verdicts(empty, "002-C5")
    assert only.verdict == NED and "reinit-tune consistency" in only.reason


TASKS = {("mnli", "rte"): 0.02, ("mrpc", "rte"): 0.04, ("mrpc", "sst2"): 0.06,
         ("mnli", "mrpc"): 0.05, ("mnli", "sst2"): 0.03, ("rte", "sst2"): 0.05}


@pytest.mark.parametrize("low,want", [(1.0, "supported"), (3.0, "contradicted")])
def test_002_c7_low_layers_agree_across_tasks_and_upper_ones_order(tmp_path, low, want):
    seed_js = [0.01, 0.01, 0.012, 0.014, 0.02, 0.02]
    task_curves = {pair: ([low * 0.01, low * 0.01, 0.02, 0.03, late, late],
                          [low * 0.2, low * 0.22, 0.3, 0.4, 0.5, 0.6])
                   for pair, late in TASKS.items()}
    planted = plant_pairs(tmp_path, dict.fromkeys(("mnli", "rte", "mrpc", "sst2"), seed_js),
                     seeds=3, task_curves=task_curves)
    rows = pair_verdicts(tmp_path, "002-C7")
    row = one(rows, "mnli / rte")
    assert row.verdict == want and "(a)" in row.reason
    task = np.mean([js for js, _ in planted["tasks", ("mnli", "rte")]], axis=0)
    seed = np.mean([js for t in ("mnli", "rte") for js, _ in planted["seeds", t]], axis=0)
    assert row.estimate == pytest.approx(np.mean(task[:2] / seed[:2]))
    ordered = one(rows, "mnli / mrpc / rte / sst2")
    assert ordered.verdict == "supported" and "(b)" in ordered.reason
