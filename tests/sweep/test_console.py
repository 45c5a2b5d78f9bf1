"""One message per fault: what Ray and Tune print while a sweep runs goes to the log file
the command names, never to its terminal. In process (Python loggers, forwarded lines,
descriptor 2, the command's own lines kept) and through the real command: a full disk, the
local raylet killed, and a worker node's raylet frozen until it is declared dead, then
resumed (its fatal stack)."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from reinit_tune import store
from reinit_tune.sweep import console
from tests.helpers import (
    REPO,
    descendants,
    kill_all,
    ray_cluster,
    start_sweep,
    stored,
    wait_for_rows,
    wait_for_trial_on,
)

# what Ray prints on its own: forwarded lines of other processes, its loggers, C++ lines
RAY_NOISE = re.compile(r"^\((raylet|pid=|gcs_server)|\[state-dump\]|Failed to fetch metrics|"
                       r"Traceback|core_worker\.cc|experiment_state\.py", re.M)


def test_ray_output_goes_to_the_log_and_the_commands_own_lines_to_the_terminal(
        tmp_path, capfd):
    ours = logging.getLogger("reinit_tune")
    handler = logging.StreamHandler(sys.stderr)  # as the command's basicConfig makes it
    ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    log = console.log_path(tmp_path / "results", "progressive")
    try:
        with console.ray_output_to(log) as terminal:
            logging.getLogger("ray.tune.execution").error("Saving experiment state failed")
            print("(raylet) Raylet is terminated", file=sys.stderr)  # a forwarded line
            print("(run_trial pid=7) worker output")  # forwarded worker stdout
            os.write(2, b"core_worker.cc:609: a C++ line\n")
            ours.warning("our own warning")
            print("our progress line", file=terminal.out, flush=True)
    finally:
        ours.removeHandler(handler)
    printed = capfd.readouterr()
    assert "our progress line" in printed.out and "our own warning" in printed.err
    assert not RAY_NOISE.search(printed.out + printed.err), printed
    assert "worker output" not in printed.out
    text = log.read_text()
    for line in ("Saving experiment state failed", "(raylet) Raylet is terminated",
                 "(run_trial pid=7) worker output", "core_worker.cc:609"):
        assert line in text
    assert log.parent == tmp_path / "results" / console.LOGS
    print("after", file=sys.stderr)  # everything is back where it was
    assert "after" in capfd.readouterr().err and "after" not in log.read_text()
    assert handler.stream is sys.stderr


def test_a_log_that_cannot_be_written_drops_rays_output_silently(tmp_path, capfd):
    results = tmp_path / "results"
    results.mkdir()
    (results / console.LOGS).write_text("a file where the folder goes")
    with console.ray_output_to(console.log_path(results, "x")) as terminal:
        logging.getLogger("ray").error("lost at once")
        print("our line", file=terminal.out, flush=True)
    log = tmp_path / "ok" / "x.log"
    with console.ray_output_to(log):
        log.unlink()
        log.parent.rmdir()
        logging.getLogger("ray").error("lost later")
        print("also lost", file=sys.stderr)
    printed = capfd.readouterr()
    assert "our line" in printed.out
    assert "lost" not in printed.out + printed.err and "Logging error" not in printed.err


@pytest.fixture
def env(glue_dir) -> dict:
    out = {**os.environ, "REINIT_TUNE_DATA": str(glue_dir), "NO_COLOR": "1"}
    out.pop("RAY_ADDRESS", None)
    return out


def args(model: str, results: Path, *extra: str) -> list[str]:
    return ["--model", model, "--tasks", "rte", "--precision", "fp32", "--max-seq-length",
            "32", "--results", str(results), *extra]


def ray_log_of(out: str) -> Path:
    named = re.findall(r"^Ray's and Tune's own output: (\S+)$", out, re.M)
    assert len(named) == 2 and named[0] == named[1], out[-3000:]  # at the start, in the summary
    return Path(named[0])


@pytest.fixture
def small_disk(tmp_path):
    """A 400 kB filesystem for the results: room for a few trials, not for all."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs",
                              str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.slow
@pytest.mark.ray
def test_a_full_disk_prints_one_message_and_the_rerun_resumes(tiny_bert, small_disk, env):
    results = small_disk / "results"
    command = [sys.executable, "sweeps/progressive.py",
               *args(tiny_bert, results, "--sizes", "16", "--seeds", "6", "--k", "0", "1", "2",
                     "--epochs", "1")]
    full = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    out = full.stdout + full.stderr
    assert full.returncode == 1, out[-3000:]
    assert out.count("No space left on device") == 1, out[-3000:]
    assert "cannot write to the results store" in out, out[-3000:]
    assert not RAY_NOISE.search(out), out[-4000:]  # Tune's traceback and metric warnings
    kept = len(stored(results))
    assert 0 < kept < 18 and f"{kept} stored, {18 - kept} not finished" in out, out[-2000:]
    assert ray_log_of(out).parent == results / console.LOGS
    subprocess.run(["mount", "-o", "remount,size=50m", str(small_disk)], check=True)
    again = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=300)
    rerun = again.stdout + again.stderr
    assert again.returncode == 0, rerun[-3000:]
    assert f"{18 - kept} ran ok" in rerun and f"{kept} already in the store" in rerun, \
        rerun[-2000:]
    assert len(store.load_trials(results)) == 18


def raylet_of(pid: int, timeout: float = 60) -> psutil.Process:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in descendants(pid):
            try:
                if p.name() == "raylet":
                    return p
            except psutil.Error:
                continue
        time.sleep(0.2)
    pytest.fail("no raylet started")


@pytest.mark.slow
@pytest.mark.ray
def test_a_killed_local_raylet_ends_the_sweep_with_its_summary(tiny_bert, tmp_path, env):
    results = tmp_path / "results"
    started: list = []
    try:
        sweep = start_sweep(args(tiny_bert, results, "--sizes", "200", "--seeds", "4", "--k",
                                 "0", "2", "4", "--epochs", "4"), env, started)
        wait_for_rows(sweep, results, more_than=0)
        raylet_of(sweep.pid).kill()
        killed = time.monotonic()
        out, _ = sweep.communicate(timeout=120)
        took = time.monotonic() - killed
    finally:
        kill_all(started)
    assert sweep.returncode == 1, out[-3000:]
    assert "lost the Ray node this driver runs on" in out, out[-3000:]
    kept = len(stored(results))
    assert f"{kept} stored, {12 - kept} not finished; rerun the same command" in out
    assert not RAY_NOISE.search(out), out[-4000:]
    assert "Raylet is terminated" in ray_log_of(out).read_text()
    assert took < 30, took


@pytest.mark.slow
@pytest.mark.ray
def test_a_frozen_worker_raylet_resumed_after_its_death_stays_out_of_the_output(
        tiny_bert, glue_dir, tmp_path, monkeypatch):
    """A worker node's raylet frozen (SIGSTOP) until the head declares the node dead, then
    resumed: it finds itself dead and exits with a fatal stack, which Ray forwards to the
    driver. The sweep retries the node's trial on the head and ends ok."""
    monkeypatch.setenv("RAY_health_check_period_ms", "1000")  # the head's GCS reads them
    monkeypatch.setenv("RAY_health_check_timeout_ms", "1000")
    monkeypatch.setenv("RAY_health_check_failure_threshold", "3")
    results = tmp_path / "results"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "REINIT_TUNE_DATA": str(glue_dir),
           "NO_COLOR": "1"}
    started: list = []
    try:
        with ray_cluster(workers=1) as nodes:
            env["RAY_ADDRESS"] = nodes.address
            sweep = start_sweep(args(tiny_bert, results, "--sizes", "200", "--seeds", "1",
                                     "--k", "0", "2", "4", "--epochs", "6",
                                     "--cpus-per-trial", "1"), env, started)
            wait_for_trial_on(nodes.workers[0])
            raylet = raylet_of(nodes.workers[0].pid)
            raylet.send_signal(signal.SIGSTOP)
            deadline = time.monotonic() + 90
            while not _declared_dead(nodes.logs) and time.monotonic() < deadline:
                time.sleep(0.5)
            raylet.send_signal(signal.SIGCONT)
            out, _ = sweep.communicate(timeout=400)
    finally:
        kill_all(started)
    assert sweep.returncode == 0, out[-4000:]
    assert "3 ran ok, 0 failed" in out and not RAY_NOISE.search(out), out[-4000:]
    # the node was declared dead (its trial retried, in one line of ours); the raylet's
    # fatal stack, when Ray forwards it before the sweep ends, is in the log
    assert re.search(r"failed on its worker \(.*health check failed", out), out[-3000:]
    assert ray_log_of(out).is_file()
    trials = store.load_trials(results)
    assert len(trials) == 3 and set(trials["status"]) == {"ok"}


def _declared_dead(logs: Path) -> bool:
    gcs = list(logs.glob("session_*/logs/gcs_server.out"))
    return any("marked dead" in p.read_text(errors="replace") or
               "is dead" in p.read_text(errors="replace") for p in gcs)
