"""Ctrl+C, SIGTERM and SIGHUP take one graceful path (summary, exit 128 + signal, Ray
stopped); a local Ray instance keeps token authentication on."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from reinit_tune.sweep import cluster, signals
from tests.helpers import (
    REPO,
    descendants,
    driver_lines,
    kill_all,
    reap,
    start_sweep,
    stored,
    wait_for_rows,
)


def _restored(signums):
    saved = {s: signal.getsignal(s) for s in signums}

    def restore():
        for s, handler in saved.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
    return restore


@pytest.mark.parametrize("signum", signals.STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_during_a_tune_run_asks_tune_to_stop(signum):
    calls = []
    restore = _restored((*signals.STOP_SIGNALS, signal.SIGUSR1))
    try:
        signals.install()
        signal.signal(signal.SIGUSR1, lambda n, f: calls.append(n))  # as tune.run installs it
        os.kill(os.getpid(), signum)
        assert calls == [signum] and signals.exit_status() == 128 + signum
        with pytest.raises(KeyboardInterrupt):  # a second signal stops at once
            os.kill(os.getpid(), signum)
        assert calls == [signum]
    finally:
        restore()


def test_a_stop_signal_outside_a_sweep_is_a_keyboard_interrupt():
    restore = _restored(signals.STOP_SIGNALS)
    try:
        signals.install()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
        assert signals.exit_status() == 143
    finally:
        restore()


@pytest.mark.ray
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP],
                         ids=lambda s: signal.Signals(s).name)
@pytest.mark.slow
def test_an_interrupted_sweep_prints_its_summary_exits_128_plus_the_signal_and_stops_ray(
        signum, tiny_bert, glue_dir, tmp_path):
    results = tmp_path / "results"
    ray_tmp = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))  # short: socket path limit
    env = {**os.environ, "REINIT_TUNE_DATA": str(glue_dir), "RAY_TMPDIR": str(ray_tmp),
           "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    args = ["--model", tiny_bert, "--tasks", "rte", "--sizes", "32", "--seeds", "3",
            "--epochs", "2", "--k", "0", "4", "--results", str(results),
            "--cpus-per-trial", "1"]
    started: list[subprocess.Popen] = []
    try:
        proc = start_sweep(args, env, started)
        wait_for_rows(proc, results, 0)
        ray_processes = descendants(proc.pid)
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 128 + signum, out[-3000:]
        assert "not finished" in out and "rerun the same command" in out, out[-3000:]
        assert "Traceback" not in driver_lines(out) and "Fatal Python error" not in out, \
            out[-3000:]
        # Tune's own hint ("Tuner.restore(...)") is for Tune's users: it goes to the log
        assert "Tuner.restore" not in out and out.count("rerun the same command") == 1, \
            out[-3000:]
        assert 0 < len(stored(results)) < 12
        # ray.shutdown ran: the instance's raylet and GCS are gone with the command
        assert not reap(ray_processes) & {"raylet", "gcs_server"}
    finally:
        kill_all(started)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_local_ray_instance_gets_token_auth_before_ray_is_imported(monkeypatch, tmp_path):
    """Ray reads RAY_AUTH_MODE once, at import: a fresh command-line process that is about to
    start its own instance turns tokens on (Ray binds every interface), unless the user set
    the mode (kept, with a warning); one that joins a cluster leaves the mode alone."""
    code = ("import os, sys; from reinit_tune.sweep import cluster; cluster.secure_local_ray(); "
            "print(os.environ.get('RAY_AUTH_MODE'), 'ray' in sys.modules)")
    env = {**os.environ, "RAY_TMPDIR": str(tmp_path)}
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_AUTH_MODE", None)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, cwd=REPO)
    assert run.stdout.split() == ["token", "False"], run.stderr[-2000:]
    joined = subprocess.run([sys.executable, "-c", code], env={**env, "RAY_ADDRESS": "local"},
                            capture_output=True, text=True, cwd=REPO)
    assert joined.stdout.split() == ["token", "False"]
    env["RAY_AUTH_MODE"] = "disabled"
    own = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, cwd=REPO)
    assert own.stdout.split() == ["disabled", "False"], own.stderr[-2000:]
    assert "RAY_AUTH_MODE=disabled is set" in own.stderr and "without a token" in own.stderr
    with socket.socket() as server:  # a live cluster named by RAY_ADDRESS: joined, untouched
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        joining = subprocess.run([sys.executable, "-c", code],
                                 env={**env, "RAY_ADDRESS": address}, capture_output=True,
                                 text=True, cwd=REPO)
    assert joining.stdout.split() == ["disabled", "False"], joining.stderr[-2000:]


def test_the_address_file_is_where_ray_records_it(monkeypatch, tmp_path):
    from ray._common.utils import get_ray_address_file

    for env in ({"RAY_TMPDIR": str(tmp_path)}, {"TMPDIR": str(tmp_path / "t")}, {}):
        monkeypatch.delenv("RAY_TMPDIR", raising=False)
        monkeypatch.delenv("TMPDIR", raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        assert cluster.address_file() == Path(get_ray_address_file(None))
