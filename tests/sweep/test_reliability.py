"""Reliability: a killed trial worker is retried from its checkpoint, a killed or
interrupted driver is finished by rerunning the same command, a killed store writer never
leaves a half-written file, and a stale cluster address falls back to a local Ray."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import duckdb
import pytest
import torch
from ray.tune import Callback

from reinit_tune import families, store
from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.families import Grid
from reinit_tune.hardware import resolve_precision
from reinit_tune.sweep import cluster, trial
from reinit_tune.sweep.options import RunOptions
from reinit_tune.sweep.runner import run_sweep
from tests.helpers import (
    REPO,
    descendants,
    driver_lines,
    free_port,
    kill_all,
    reap,
    start_sweep,
    stored,
    wait_for_rows,
)


# -- a trial's worker process killed mid-training ----------------------------------------
class KillWorkerAfterFirstCheckpoint(Callback):
    """SIGKILLs a trial's worker process, as a preempted node would, once its first checkpoint
    (epoch 1) is in storage; records every result's (pid, epoch, resumed_from_epoch)."""

    def __init__(self):
        self.killed_pid: int | None = None
        self.results: list[tuple[int, int, int]] = []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        # ``pid`` is Tune's own record of the process that runs the trial.
        self.results.append((result["pid"], result["epoch"], result["resumed_from_epoch"]))

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        if self.killed_pid is None:
            self.killed_pid = self.results[-1][0]
            os.kill(self.killed_pid, signal.SIGKILL)


@pytest.mark.slow  # a trial worker killed with SIGKILL
@pytest.mark.ray
def test_killed_worker_is_retried_from_its_last_checkpoint(ray_local, tiny_bert, glue_dir,
                                                           tmp_path):
    config = TrialConfig(model=tiny_bert, task="rte", train_size=160, seed=1, epochs=3,
                         lr=3e-4, reinit_layers=(3,))
    killer = KillWorkerAfterFirstCheckpoint()
    summary = run_sweep([config], RunOptions(results_dir=tmp_path, data_dir=str(glue_dir),
                                             max_failures=1, checkpoint_after_s=0,
                                             callbacks=(killer,)))
    assert (summary.ok, summary.failed, summary.retries) == (1, 0, 1)

    pids = [pid for pid, _, _ in killer.results]
    assert killer.killed_pid is not None and pids[0] == killer.killed_pid
    after = [(epoch, resumed) for pid, epoch, resumed in killer.results if pid != pids[0]]
    assert after == [(2, 1), (3, 1)]  # a new process went on from the epoch-1 checkpoint

    trials = store.load_trials(tmp_path)
    assert len(trials) == 1
    row = trials.iloc[0]
    assert (row["status"], row["attempts"], row["resumed_from_epoch"]) == ("ok", 2, 1)
    assert row["epochs_completed"] == 3
    assert list(store.load_epochs(tmp_path)["epoch"]) == [1, 2, 3]
    assert not list((tmp_path / "_tune").rglob("checkpoint_*"))  # freed once stored

    # The retried trial computed what an uninterrupted one computes (1 CPU: 1 thread).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reference = trial.execute(config, data_dir=str(glue_dir), use_gpu=False)[-1]
    finally:
        torch.set_num_threads(threads)
    assert (row["train_loss"], row["eval_loss"], row["score"]) == (
        reference["train_loss"], reference["eval_loss"], reference["score"])


# -- the driver interrupted (SIGINT) or killed (SIGKILL) mid-sweep ------------------------
@pytest.fixture
def stale_ray_tmpdir() -> Path:
    """A Ray temp root (``RAY_TMPDIR``) whose address file names a cluster that no longer
    runs. Short, under /tmp: Ray's socket paths inside it must stay below 108 bytes."""
    root = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))
    (root / "ray").mkdir()
    (root / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.ray
def test_interrupted_and_killed_driver_then_rerun_finishes_the_sweep(
        tiny_bert, glue_dir, tmp_path, stale_ray_tmpdir):
    results = tmp_path / "results"
    ray_tmp = stale_ray_tmpdir
    env = {**os.environ, "REINIT_TUNE_DATA": str(glue_dir), "RAY_TMPDIR": str(ray_tmp),
           "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    args = ["--model", tiny_bert, "--tasks", "rte", "--sizes", "48", "--seeds", "2",
            "--epochs", "2", "--k", "0", "4", "--lr", "1e-4", "--results", str(results),
            "--cpus-per-trial", "1"]
    configs = families.get("progressive").configs(
        Grid(tiny_bert, tasks=("rte",), sizes=(48,), seeds=2, epochs=2, lr=1e-4,
             length_grouped=True,  # the CLI defaults: length grouping, precision auto
             precision=resolve_precision("auto", on_gpu=False)[0]), k=[0, 4])
    started: list[subprocess.Popen] = []
    try:
        # 1. SIGTERM (what `timeout` and schedulers send) once some trials are stored: the
        # Ctrl+C path: Tune stops, the summary says what is left, no stack dumps.
        first = start_sweep(args, env, started)
        wait_for_rows(first, results, 0)
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=120)
        after_sigint = stored(results)
        assert first.returncode == 128 + signal.SIGTERM, out[-3000:]
        assert "not finished" in out and "rerun the same command" in out
        assert "Traceback" not in driver_lines(out) and "Fatal Python error" not in out, \
            out[-3000:]
        assert "does not answer" in out and "starting a local Ray instance instead" in out
        assert 0 < len(after_sigint) < len(configs)

        # 2. SIGKILL the driver: nothing runs its cleanup; its local Ray goes down with it.
        second = start_sweep(args, env, started)
        wait_for_rows(second, results, len(after_sigint))
        ray_processes = descendants(second.pid)
        second.kill()
        second.communicate(timeout=60)
        outlived = reap(ray_processes)  # Ray's agents may linger a little
        assert not outlived & {"raylet", "gcs_server"}, outlived
        after_sigkill = stored(results)
        mtimes = {p: p.stat().st_mtime_ns for p in after_sigkill}
        assert after_sigint < after_sigkill

        # 3. The same command again finishes the sweep and reruns nothing stored.
        third = start_sweep(args, env, started)
        out, _ = third.communicate(timeout=300)
        assert third.returncode == 0, out[-3000:]
        skipped = len(after_sigkill)
        assert f"{skipped} already in the store (skipped)" in out
        assert f"{len(configs) - skipped} ran ok, 0 failed" in out
    finally:  # a failed assertion must not leave a sweep or its Ray behind
        kill_all(started)
    trials = store.load_trials(results)
    assert len(trials) == len(configs) and set(trials["status"]) == {"ok"}
    assert sorted(trials["trial_id"]) == sorted(c.trial_id for c in configs)
    assert {p: p.stat().st_mtime_ns for p in after_sigkill} == mtimes
    epochs = store.load_epochs(results)
    assert len(epochs) == 2 * len(configs)
    assert not epochs.duplicated(["trial_id", "epoch"]).any()


# -- a store writer killed mid-write ------------------------------------------------------
# Writes a trial twice (train_loss 1, then 2). The ``stall_at``-th file write stops half way
# through its bytes and waits to be killed: a crash at the worst moment, every time.
WRITER = textwrap.dedent("""
    import io, sys, time
    from reinit_tune import store
    from reinit_tune.config import TrialConfig

    real_write, calls, stall_at = store.pq.write_table, [], int(sys.argv[3])

    def write_table(table, where, **kwargs):
        calls.append(where)
        if len(calls) < stall_at:
            return real_write(table, where, **kwargs)
        buffer = io.BytesIO()
        real_write(table, buffer, **kwargs)
        with open(where, "wb") as f:
            f.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
            f.flush()
            print("stalled", flush=True)
            time.sleep(600)

    store.pq.write_table = write_table
    config = TrialConfig(model=sys.argv[2], task="rte", seed=99)
    for i in (1.0, 2.0):
        reports = [dict(epoch=e, train_loss=i, eval_loss=0.0, score=0.5, eval_accuracy=0.5,
                        train_time_s=1.0, eval_time_s=1.0, train_examples=8, setup_time_s=0.0)
                   for e in (1, 2, 3)]
        store.write_trial(sys.argv[1], store.trial_row(config, reports, num_layers=4,
                                                       status="ok"),
                          store.epoch_rows(config, reports))
""")


@pytest.mark.parametrize("stall_at,expected", [
    (1, (None, set())),  # killed writing the first epoch file: nothing of the trial shows
    (2, (None, {1.0})),  # its epochs stored, its row not: not finished, so it reruns
    (4, (1.0, {2.0})),  # the second write's epochs replaced the first's, its row not yet
])
def test_a_writer_killed_mid_write_never_leaves_a_half_file(tiny_bert, tmp_path, stall_at,
                                                             expected):
    earlier = TrialConfig(model=tiny_bert, task="rte", seed=1)
    killed = TrialConfig(model=tiny_bert, task="rte", seed=99)
    reports = [dict(epoch=1, train_loss=0.5, eval_loss=0.6, score=0.7, eval_accuracy=0.7,
                    train_time_s=1.0, eval_time_s=1.0, train_examples=8, setup_time_s=0.1)]
    store.write_trial(tmp_path, store.trial_row(earlier, reports, num_layers=4, status="ok"),
                      store.epoch_rows(earlier, reports))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.parquet")}

    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tiny_bert,
                               str(stall_at)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "stalled"
    finally:
        writer.kill()
        writer.wait()

    partial = list(tmp_path.rglob(".*.tmp"))
    assert len(partial) == 1 and partial[0].stat().st_size > 0  # half a file, left behind
    trials = store.load_trials(tmp_path).set_index("trial_id")  # reads whole files only
    epochs = store.load_epochs(tmp_path)
    trial_loss = trials["train_loss"].get(killed.trial_id)
    epoch_losses = set(epochs.loc[epochs["trial_id"] == killed.trial_id, "train_loss"])
    assert (trial_loss, epoch_losses) == expected
    assert trials.loc[earlier.trial_id, "train_loss"] == 0.5
    assert {p: p.read_bytes() for p in before} == before  # earlier rows untouched
    glob = f"'{tmp_path}/{store.TRIALS}/*.parquet'"
    assert duckdb.sql(f"SELECT count(*) FROM {glob}").fetchall() == [(len(trials),)]
    assert store.finished_ids(tmp_path) == {earlier.trial_id, *([killed.trial_id]
                                                                 if stall_at == 4 else [])}
    assert store.remove_partial_files(tmp_path) == 0  # young: maybe another writer's
    assert store.remove_partial_files(tmp_path, older_than_s=0) == 1
    assert not list(tmp_path.rglob(".*.tmp"))


# -- which cluster a sweep joins ------------------------------------------------------------
def test_a_stale_address_file_falls_back_to_a_local_instance(tmp_path):
    recorded = tmp_path / "ray_current_cluster"
    recorded.write_text(f"127.0.0.1:{free_port()}")
    address, why = cluster.choose_address({}, recorded)
    assert address == "local" and "does not answer" in why and str(recorded) in why


def test_a_live_cluster_is_joined_and_an_explicit_dead_one_is_an_error(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        live = f"127.0.0.1:{server.getsockname()[1]}"
        recorded = tmp_path / "ray_current_cluster"
        recorded.write_text(live)
        assert cluster.choose_address({}, recorded)[0] == live
        assert cluster.choose_address({"RAY_ADDRESS": live}, tmp_path / "none")[0] == live
        assert cluster.choose_address({"RAY_ADDRESS": "auto"}, recorded)[0] == live
    assert cluster.choose_address({}, tmp_path / "none")[0] == "local"
    assert cluster.choose_address({"RAY_ADDRESS": "local"}, recorded)[0] == "local"
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(InputError, match=f"RAY_ADDRESS={dead} does not answer"):
        cluster.choose_address({"RAY_ADDRESS": dead}, tmp_path / "none")
    with pytest.raises(InputError, match="no Ray cluster runs"):
        cluster.choose_address({"RAY_ADDRESS": "auto"}, tmp_path / "none")
