"""Faults of a real Ray cluster on this machine (a head and worker nodes on loopback, each its
own ``ray start``): a worker node killed mid-sweep, the head killed mid-sweep and the rerun
after it, Ray's memory monitor killing trial workers, and ``Tuner.fit`` itself ending on a
lost worker. Each asserts what a user sees: the exit status, the summary, no traceback in
the command's own lines, and one ok row per trial in the store, never a wrong one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import psutil
import pytest

from reinit_tune import families, store
from reinit_tune.families import Grid
from reinit_tune.sweep import launch, memory, runner
from reinit_tune.sweep.options import RunOptions
from tests.helpers import (
    REPO,
    driver_lines,
    kill_all,
    kill_node,
    ray_cluster,
    start_sweep,
    stored,
    wait_for_rows,
    wait_for_trial_on,
)

pytestmark = pytest.mark.ray


def sweep_args(model: str, results, tmp_path, *, seeds: int = 2, epochs: int = 2
               ) -> list[str]:
    # trials of a few seconds each, so a node can be killed while some run
    return ["--model", model, "--tasks", "rte", "--sizes", "200", "--seeds", str(seeds),
            "--epochs", str(epochs), "--k", "0", "2", "4", "--precision", "fp32",
            "--results", str(results), "--storage", str(tmp_path / "tune"),
            "--cpus-per-trial", "1"]


def cluster_env(address: str, glue_dir) -> dict:
    return {**os.environ, "RAY_ADDRESS": address, "RAY_AUTH_MODE": "disabled",
            "REINIT_TUNE_DATA": str(glue_dir), "NO_COLOR": "1"}


def ok_rows(results) -> list[str]:
    trials = store.load_trials(results)
    return sorted(trials.loc[trials["status"] == "ok", "trial_id"])


@pytest.mark.slow
def test_a_worker_node_killed_mid_sweep_loses_no_trial(tiny_bert, glue_dir, tmp_path,
                                                       monkeypatch):
    # the head's GCS declares a node dead after this many failed health checks a second
    # apart (Ray's default: 5, 3 s apart); a killed raylet refuses them at once, while a
    # loaded but live one still has Ray's 10-s timeout for each
    monkeypatch.setenv("RAY_health_check_period_ms", "1000")
    monkeypatch.setenv("RAY_health_check_failure_threshold", "3")
    results = tmp_path / "results"
    started: list = []
    try:
        with ray_cluster(workers=2) as nodes:
            # killed the moment its trial enters training: 4 epochs are left to lose, and
            # every other trial of the sweep is still to run
            sweep = start_sweep(sweep_args(tiny_bert, results, tmp_path, epochs=4),
                                cluster_env(nodes.address, glue_dir), started)
            wait_for_trial_on(nodes.workers[0])
            kill_node(nodes.workers[0])  # the machine is gone: raylet, workers and all
            out, _ = sweep.communicate(timeout=400)
    finally:
        kill_all(started)
    assert sweep.returncode == 0, out[-4000:]
    assert "6 ran ok, 0 failed" in out, out[-3000:]
    assert re.search(r"; [1-9]\d* retries", out), out[-3000:]  # the node's trial ran again
    assert "Traceback" not in driver_lines(out), out[-4000:]
    assert not re.search(r"^\((raylet|pid=)", out, re.M), out[-4000:]  # Ray's lines: its log
    trials = store.load_trials(results)
    assert len(trials) == 6 and set(trials["status"]) == {"ok"}  # one row each, all ok


@pytest.mark.slow
def test_a_lost_head_ends_with_the_summary_and_the_rerun_resumes(tiny_bert, glue_dir,
                                                                 tmp_path):
    results = tmp_path / "results"
    started: list = []
    try:
        with ray_cluster(workers=1) as nodes:  # 3 trials, 2 at a time: one left at the kill
            sweep = start_sweep(sweep_args(tiny_bert, results, tmp_path, seeds=1),
                                cluster_env(nodes.address, glue_dir), started)
            wait_for_rows(sweep, results, more_than=0)
            kill_node(nodes.head)
            killed = time.monotonic()
            out, _ = sweep.communicate(timeout=120)
            took = time.monotonic() - killed
        before = ok_rows(results)
        assert sweep.returncode == 1, out[-4000:]
        assert took < 60, (took, out[-3000:])
        assert "lost the Ray cluster's head node" in out, out[-3000:]
        assert f"{len(before)} ran ok" in out and "not finished" in out, out[-3000:]
        assert (f"{len(before)} stored, {3 - len(before)} not finished; rerun the same "
                "command to resume") in out, out[-3000:]
        assert out.count("rerun the same command") == 1, out[-3000:]
        assert "Traceback" not in driver_lines(out), out[-4000:]
        assert 0 < len(before) < 3
        with ray_cluster(workers=1) as nodes:  # a fresh cluster; the same command
            rerun = subprocess.run([sys.executable, "sweeps/progressive.py",
                                    *sweep_args(tiny_bert, results, tmp_path, seeds=1)],
                                   cwd=REPO, env=cluster_env(nodes.address, glue_dir),
                                   capture_output=True, text=True, timeout=400)
    finally:
        kill_all(started)
    again = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, again[-4000:]
    assert f"{3 - len(before)} ran ok" in again and f"{len(before)} already in the store" in again
    after = ok_rows(results)
    assert len(after) == 3 and set(before) <= set(after)


@pytest.mark.slow
def test_trials_killed_by_the_memory_monitor_are_retried_then_stored_as_errors(
        tiny_bert, glue_dir, tmp_path):
    """A threshold below what this machine already uses: Ray's monitor kills every trial
    worker it sees, as on a node that is really out of memory."""
    used = psutil.virtual_memory().percent / 100
    env = {**os.environ, "REINIT_TUNE_DATA": str(glue_dir), "NO_COLOR": "1",
           "RAY_memory_usage_threshold": f"{used / 4:.4f}",
           "RAY_memory_monitor_refresh_ms": "100"}
    env.pop("RAY_ADDRESS", None)
    results = tmp_path / "results"
    sweep = subprocess.run(
        [sys.executable, "sweeps/progressive.py", "--model", tiny_bert, "--tasks", "rte",
         "--sizes", "16", "--seeds", "1", "--epochs", "1", "--k", "0", "2",
         "--results", str(results), "--storage", str(tmp_path / "tune"),
         "--max-failures", "1"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = sweep.stdout + sweep.stderr
    assert sweep.returncode == 1, out[-4000:]
    assert "Traceback" not in driver_lines(out), out[-4000:]
    assert "failed on its worker (killed by Ray's memory monitor" in out  # retried first
    assert "0 ran ok, 2 failed" in out and "2 retries" in out, out[-3000:]
    trials = store.load_trials(results)
    assert set(trials["status"]) == {"error"}  # never ok
    assert set(trials["error"]) == {memory.KILLED}


def test_a_fit_ended_by_a_lost_worker_runs_the_unfinished_trials_again(
        ray_local, tiny_bert, glue_dir, tmp_path, monkeypatch):
    """Tune's actor manager raises "Caught unexpected exception" out of ``Tuner.fit`` for a
    worker killed by Ray's memory monitor (not a trial failure): the sweep runs what is not
    stored again instead of dying with a traceback."""
    from ray import tune

    real_fit, calls = tune.Tuner.fit, []

    def fit(self):
        calls.append(self)
        if len(calls) == 1:  # the first fit's workers are killed before any trial finished
            raise RuntimeError("Caught unexpected exception: 1 worker(s) were killed due to "
                               "the node running low on memory.")
        return real_fit(self)

    monkeypatch.setattr(tune.Tuner, "fit", fit)
    monkeypatch.setattr(launch, "chunk_size", lambda *resources: 2)  # 2 fits: 2 and 1
    configs = families.get("progressive").configs(
        Grid(tiny_bert, tasks=("rte",), sizes=(16,), seeds=1, epochs=1,
             data_dir=str(glue_dir)), k=[0, 2, 4])
    summary = runner.run_sweep(configs, RunOptions(results_dir=tmp_path / "r",
                                                   data_dir=str(glue_dir)))
    assert len(calls) == 3  # the lost chunk, the same chunk again, then the last one
    assert summary.ok == 3 and summary.failed == 0 and summary.not_finished == 0
    assert summary.retries == 1 and summary.stopped is None
    assert len(ok_rows(tmp_path / "r")) == 3  # each trial stored once
    assert len(stored(tmp_path / "r")) == 3
