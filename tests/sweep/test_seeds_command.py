"""Seeds on demand through the real command (``python sweeps/progressive.py --seeds auto``) on
a tiny model: a group whose stored seeds are quiet stops at --min-seeds without training, a
noisy one trains seeds until --max-seeds, a rerun trains nothing, and a driver killed
mid-sweep resumes to the same seeds per group. Every group's stored seeds are 0..n-1 with
both conditions present."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from reinit_tune import families, store
from reinit_tune.cli.sweep import configs_of, sweep_parser
from reinit_tune.model.fingerprint import model_fingerprint
from tests.helpers import REPO, kill_all, start_sweep, wait_for_rows

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # the real command, in processes

# k = 0 and k = L (the reference) on two tasks: two groups of two conditions each
def sweep_args(model: str, results, tmp_path) -> list[str]:
    return ["--model", model, "--tasks", "rte", "sst2", "--sizes", "64", "--epochs", "1",
            "--k", "0", "4", "--precision", "fp32", "--seeds", "auto", "--target-ci", "0.01",
            "--min-seeds", "3", "--max-seeds", "5", "--results", str(results),
            "--storage", str(tmp_path / "tune"), "--cpus-per-trial", "1"]


# stored seeds 0..2 of each group: rte's differences are -0.1 ± 0.0005 (closed at
# --min-seeds), sst2's spread over 0.4 (wider than --target-ci whatever seeds 3 and 4 give)
PLANTED = {"rte": ([0.6, 0.6005, 0.5995], [0.7, 0.7, 0.7]),
           "sst2": ([0.5, 0.9, 0.6], [0.7, 0.7, 0.7])}


def plant(results, model: str, tmp_path) -> None:
    family = families.get("progressive")
    args = sweep_parser(family).parse_args(sweep_args(model, results, tmp_path))
    for config in configs_of(args, family):
        if config.seed >= 3:
            continue
        k0, full = PLANTED[config.task]
        score = (k0 if config.reinit_layers else full)[config.seed]
        reports = [{"epoch": 1, "train_loss": 0.4, "eval_loss": 0.6,
                    f"eval_{config.task_spec.primary}": score, "score": score,
                    "train_time_s": 1.0, "eval_time_s": 0.5, "train_examples_per_s": 10.0,
                    "train_examples": 64, "setup_time_s": 0.1, "device": "cpu",
                    "precision_used": "fp32", "node_id": "n",
                    "versions": json.dumps({"torch": "2.x"})}]
        store.write_trial(results, store.trial_row(config, reports, num_layers=4, status="ok"),
                          store.epoch_rows(config, reports))


def seeds_by_group(results) -> dict[str, dict[int, set[int]]]:
    """task -> seed -> the k of its stored ok rows."""
    trials = store.load_trials(results, status="ok")
    out: dict[str, dict[int, set[int]]] = {}
    for row in trials.itertuples():
        k = 4 - len(row.reinit_layers)
        out.setdefault(row.task, {}).setdefault(int(row.seed), set()).add(k)
    return out


def run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "sweeps/progressive.py", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture
def env(glue_dir) -> dict:
    out = {**os.environ, "REINIT_TUNE_DATA": str(glue_dir), "NO_COLOR": "1"}
    out.pop("RAY_ADDRESS", None)
    return out


EXPECTED = {"rte": {s: {0, 4} for s in range(3)}, "sst2": {s: {0, 4} for s in range(5)}}


def test_quiet_group_stops_at_min_seeds_and_noisy_one_grows_to_max(tiny_bert, tmp_path, env):
    results = tmp_path / "results"
    plant(results, tiny_bert, tmp_path)
    args = sweep_args(tiny_bert, results, tmp_path)
    dry = run([*args, "--dry-run"], env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "4 trials not needed" in dry.stdout, dry.stdout  # rte's seeds 3 and 4
    assert "at least 0 trials" in dry.stdout and "at most 4 " in dry.stdout, dry.stdout

    first = run(args, env)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-4000:]
    assert "4 ran ok, 0 failed" in out, out[-3000:]  # sst2's seeds 3 and 4, both k
    assert "groups open" in out, out[-3000:]  # the progress line
    report = out[out.index("seeds on demand (--target-ci 0.01)"):]
    assert "rte n=64" in report and "3 seeds" in report.split("rte n=64")[1].splitlines()[0]
    sst2 = report.split("sst2 n=64")[1].splitlines()[0]
    assert "5 seeds" in sst2 and "stopped at --max-seeds" in sst2, report
    assert "a fixed --seeds 5 design runs 20" in report, report
    assert seeds_by_group(results) == EXPECTED
    trained = store.load_trials(results, status="ok")
    trained = trained[trained["seed"] >= 3]  # the planted rows predate fingerprints
    assert set(trained["model_fingerprint"]) == {model_fingerprint(tiny_bert)}

    again = run(args, env)  # decided from the store alone: nothing left to train
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-3000:]
    assert "0 ran ok" in out and "joining" not in out and "starting" not in out.lower(), out
    assert seeds_by_group(results) == EXPECTED


def test_a_killed_driver_resumes_to_the_same_seeds(tiny_bert, tmp_path, env):
    results = tmp_path / "results"
    plant(results, tiny_bert, tmp_path)
    args = sweep_args(tiny_bert, results, tmp_path)
    started: list = []
    try:
        sweep = start_sweep(args, env, started)
        before = len(list((results / store.TRIALS).glob("*.parquet")))
        wait_for_rows(sweep, results, more_than=before)  # seed 3 is under way
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait(30)
    finally:
        kill_all(started)
    rerun = run(args, env)
    out = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, out[-4000:]
    assert seeds_by_group(results) == EXPECTED
