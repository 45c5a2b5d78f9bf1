"""Stalled trials: limits derived from the cost model or given, the watchdog ending a trial
that stops reporting, and through the real command a trial worker frozen with SIGSTOP: the
sweep ends it, retries it, and either stores it ok on the retry or, with no retry left,
as one "stalled" error row, and exits with its summary."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from types import SimpleNamespace

import psutil
import pytest

from reinit_tune import store
from reinit_tune.sweep import stalls
from tests.helpers import descendants, kill_all, start_sweep


def test_limits_are_given_or_derived_from_the_estimate():
    epochs = {"a": 3, "b": 3, "c": 1}
    derived = stalls.limits(epochs, {"a": 30.0, "b": 9000.0}, None)
    assert derived == {"a": stalls.FLOOR_S, "b": stalls.EPOCH_FACTOR * 3000.0,
                       "c": stalls.UNKNOWN_S}
    assert stalls.limits(epochs, {}, 12.0) == dict.fromkeys(epochs, 12.0)
    assert stalls.limits(epochs, {}, 0.0) == dict.fromkeys(epochs, None)


def test_a_trial_timeout_shorter_than_an_estimated_epoch_is_warned_of():
    epochs, estimates = {"a": 3, "b": 2, "c": 1}, {"a": 300.0, "b": 500.0}  # c: no estimate
    warning = stalls.short_override(epochs, estimates, 200)
    assert warning is not None and warning.startswith("--trial-timeout 200: shorter than the "
                                                      "longest estimated epoch")
    assert "about 250 s" in warning  # b's 500 s over 2 epochs
    assert stalls.short_override(epochs, estimates, 250) is None
    assert stalls.short_override(epochs, estimates, 0) is None  # no limit
    assert stalls.short_override(epochs, estimates, None) is None  # the derived limits
    assert stalls.short_override({"c": 1}, {}, 1) is None  # nothing to compare with


def test_the_watchdog_ends_only_trials_past_their_limit():
    killed = []
    dog = stalls.Watchdog({"slow": 0.3, "free": None, "busy": 0.3}, killed.append,
                          interval=0.05)
    try:
        slow, free, busy = (SimpleNamespace(trial_id=n) for n in ("t1", "t2", "t3"))
        dog.progressed(slow, "slow")
        dog.progressed(free, "free")
        dog.progressed(busy, "busy")
        for _ in range(10):  # busy reports every 0.1 s
            time.sleep(0.1)
            dog.progressed(busy, "busy")
        assert killed == [slow] and dog.ended == {"t1": 0.3}
        dog.progressed(slow, "slow")  # its retry starts: no longer counted as stalled
        assert "t1" not in dog.ended
    finally:
        dog.stop()


def sweep_args(model: str, results, tmp_path, *extra: str) -> list[str]:
    return ["--model", model, "--tasks", "rte", "--sizes", "200", "--seeds", "1",
            "--epochs", "6", "--k", "0", "2", "4", "--precision", "fp32",
            "--results", str(results), "--storage", str(tmp_path / "tune"),
            "--cpus-per-trial", "1", "--trial-timeout", "20", *extra]


def freeze_a_training_trial(sweep: subprocess.Popen, timeout: float = 120,
                            worker: str = "ReinitTuneTrial") -> psutil.Process:
    """SIGSTOP one trial (or pack) worker while it trains (inside its ``train`` call)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in descendants(sweep.pid):
            try:
                if any(part.startswith(f"ray::{worker}.train") for part in p.cmdline()):
                    p.send_signal(signal.SIGSTOP)
                    return p
            except psutil.Error:
                continue
        time.sleep(0.1)
    pytest.fail("no trial trained in time")


@pytest.fixture
def env(glue_dir) -> dict:
    out = {**os.environ, "REINIT_TUNE_DATA": str(glue_dir), "NO_COLOR": "1"}
    out.pop("RAY_ADDRESS", None)
    return out


@pytest.mark.ray
@pytest.mark.parametrize("retries", [1, 0])
def test_a_frozen_trial_worker_is_ended_and_the_sweep_goes_on(tiny_bert, tmp_path, env,
                                                              retries):
    results = tmp_path / "results"
    started: list = []
    try:
        sweep = start_sweep(sweep_args(tiny_bert, results, tmp_path, "--max-failures",
                                       str(retries)), env, started)
        frozen = freeze_a_training_trial(sweep)
        began = time.monotonic()
        out, _ = sweep.communicate(timeout=300)
        took = time.monotonic() - began
    finally:
        kill_all(started)
    assert not frozen.is_running() or frozen.status() == psutil.STATUS_ZOMBIE
    assert "made no progress for 20 s: ended" in out, out[-3000:]
    assert "Traceback" not in out, out[-4000:]
    trials = store.load_trials(results)
    assert len(trials) == 3
    if retries:
        assert sweep.returncode == 0, out[-3000:]
        assert "3 ran ok, 0 failed" in out and "1 retries (1 after a stall)" in out, out[-2000:]
        assert set(trials["status"]) == {"ok"}
    else:
        assert sweep.returncode == 1, out[-3000:]
        assert "2 ran ok, 1 failed" in out, out[-2000:]
        assert "failed (1 trial): stalled: no progress for 20 s" in out, out[-2000:]
        failed = trials[trials["status"] == "error"]
        assert len(failed) == 1 and failed["error"].iloc[0].startswith("stalled: no progress")
    assert took < 120, took


@pytest.mark.ray
def test_a_frozen_pack_is_ended_and_each_member_stored_as_stalled(tiny_bert, tmp_path, env):
    results = tmp_path / "results"
    started: list = []
    try:
        sweep = start_sweep(sweep_args(tiny_bert, results, tmp_path, "--max-failures", "0",
                                       "--pack-size", "3"), env, started)
        freeze_a_training_trial(sweep, worker="ReinitTunePack")
        out, _ = sweep.communicate(timeout=300)
    finally:
        kill_all(started)
    assert sweep.returncode == 1, out[-3000:]
    assert "made no progress for 20 s: ended" in out and "Traceback" not in out, out[-3000:]
    assert "failed (3 trials): stalled: no progress for 20 s" in out, out[-2000:]
    trials = store.load_trials(results)
    assert len(trials) == 3 and set(trials["status"]) == {"error"}
    assert all(e.startswith("stalled: no progress for 20 s") for e in trials["error"])
