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


def test_a_trial_timeout_shorter_than_a_setup_is_warned_of():
    warning = stalls.short_override(20)
    assert warning is not None and warning.startswith("--trial-timeout 20: shorter than 60 s")
    assert "while it loads its model or encodes its data" in warning
    assert stalls.short_override(stalls.SETUP_S) is None
    assert stalls.short_override(0) is None  # no limit
    assert stalls.short_override(None) is None  # the derived limits


def test_a_trial_that_beats_is_never_ended_however_long_its_epoch():
    """Progress is any beat of the board (a step, a dev batch), not only an epoch: a trial
    that beats every 0.1 s outlives a 0.3 s limit with no epoch at all; one whose beats
    stop is ended one limit after its last beat."""
    killed, counts = [], {"stepping": 0, "stuck": 0}
    dog = stalls.Watchdog({"stepping": 0.3, "stuck": 0.3}, killed.append, interval=0.05,
                          beats=lambda: dict(counts))
    try:
        stepping, stuck = (SimpleNamespace(trial_id=n) for n in ("t1", "t2"))
        dog.progressed(stepping, "stepping")
        dog.progressed(stuck, "stuck")
        for i in range(12):
            time.sleep(0.1)
            counts["stepping"] += 1
            if i < 3:
                counts["stuck"] += 1
        assert killed == [stuck] and dog.ended == {"t2": 0.3}
    finally:
        dog.stop()


def test_every_training_step_and_dev_batch_beats(tiny_bert, glue_dir, monkeypatch):
    """A trial run in process with a sink: its setup phases, each training step and each
    dev batch beat (the rate limit set to 0), the first beat at once."""
    from reinit_tune import TrialConfig
    from reinit_tune.sweep.trial import execute
    from reinit_tune.training import beats

    monkeypatch.setattr(beats, "EVERY_S", 0.0)
    sent = []
    config = TrialConfig(tiny_bert, "rte", train_size=64, epochs=2, batch_size=16,
                         precision="fp32")
    with beats.sending_to(lambda: sent.append(1)):
        execute(config, data_dir=str(glue_dir), use_gpu=False)
    steps, dev_batches = 2 * 64 // 16, 277 // 32 + 1  # RTE's 277 dev examples, 32 a batch
    assert len(sent) >= 1 + 2 + steps + dev_batches, len(sent)
    before = len(sent)
    beats.beat()
    assert len(sent) == before  # outside the block nothing is sent


@pytest.mark.ray
def test_the_board_counts_beats_sent_from_a_worker(ray_local):
    """The sweep's board, a trial's sink for it and the watchdog's reader, through Ray."""
    import ray

    from reinit_tune.sweep.options import TrialRuntime
    from reinit_tune.sweep.trial import beat_sink

    board = stalls.board()
    runtime = TrialRuntime(beats=board)

    @ray.remote(num_cpus=0)
    def worker(runtime, pid, n):
        sink = beat_sink(runtime, pid)
        refs = [sink() for _ in range(n)]
        ray.get(refs)

    ray.get([worker.remote(runtime, "p1", 3), worker.remote(runtime, "p2", 1)])
    assert stalls.reader(board)() == {"p1": 3, "p2": 1}
    ray.kill(board)
    deadline = time.monotonic() + 30
    while stalls.reader(board)() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stalls.reader(board)() == {}  # a lost board: no beats, epochs still count
    assert beat_sink(TrialRuntime(), "p1") is None


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


# the frozen drills' --trial-timeout: a frozen trial is ended this long after its last beat;
# the others beat every step (a tiny model: milliseconds) and between their setup phases
LIMIT = 12


def sweep_args(model: str, results, tmp_path, *extra: str) -> list[str]:
    return ["--model", model, "--tasks", "rte", "--sizes", "200", "--seeds", "1",
            "--epochs", "3", "--k", "0", "2", "4", "--precision", "fp32",
            "--results", str(results), "--storage", str(tmp_path / "tune"),
            "--cpus-per-trial", "1", "--trial-timeout", str(LIMIT), *extra]


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


@pytest.mark.slow
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
    assert f"made no progress for {LIMIT} s: ended" in out, out[-3000:]
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
        assert f"failed (1 trial): stalled: no progress for {LIMIT} s" in out, out[-2000:]
        failed = trials[trials["status"] == "error"]
        assert len(failed) == 1 and failed["error"].iloc[0].startswith("stalled: no progress")
    assert took < 120, took


@pytest.mark.slow
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
    assert f"made no progress for {LIMIT} s: ended" in out and "Traceback" not in out, out[-3000:]
    assert f"failed (3 trials): stalled: no progress for {LIMIT} s" in out, out[-2000:]
    trials = store.load_trials(results)
    assert len(trials) == 3 and set(trials["status"]) == {"error"}
    assert all(e.startswith(f"stalled: no progress for {LIMIT} s") for e in trials["error"])


@pytest.mark.slow
@pytest.mark.ray
def test_a_slow_epoch_longer_than_the_limit_finishes(tiny_bert, tmp_path, env):
    """One trial whose only epoch (1,000 RTE examples two at a time: ~40 s on a 2-vCPU
    Xeon) takes longer than its --trial-timeout: its steps beat, so it is never ended and
    stores ok (an epoch's report was the only progress before)."""
    results = tmp_path / "results"
    args = ["--model", tiny_bert, "--tasks", "rte", "--sizes", "1000", "--seeds", "1",
            "--epochs", "1", "--batch-size", "2", "--k", "0", "--precision", "fp32",
            "--results", str(results), "--storage", str(tmp_path / "tune"),
            "--cpus-per-trial", "1", "--trial-timeout", "6", "--max-failures", "0"]
    started: list = []
    try:
        sweep = start_sweep(args, env, started)
        out, _ = sweep.communicate(timeout=400)
    finally:
        kill_all(started)
    assert sweep.returncode == 0, out[-3000:]
    assert "made no progress" not in out and "1 ran ok, 0 failed" in out, out[-3000:]
    assert "--trial-timeout 6: shorter than 60 s" in out, out[-3000:]
    (row,) = store.load_trials(results).itertuples()
    assert row.status == "ok" and row.train_time_s > 6, row.train_time_s
