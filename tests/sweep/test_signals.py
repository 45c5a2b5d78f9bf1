"""SIGTERM takes Ctrl+C's path; a local Ray instance keeps token authentication on."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from reinit_tune.sweep import cluster, signals
from tests.helpers import REPO


def test_sigterm_calls_the_current_sigint_handler(monkeypatch):
    calls = []
    monkeypatch.setattr(signal, "getsignal", lambda s: (lambda n, f: calls.append(n))
                        if s == signal.SIGINT else signal.SIG_DFL)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        signals.forward_sigterm()
        os.kill(os.getpid(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous if callable(previous) else signal.SIG_DFL)
    assert calls == [signal.SIGINT]


def test_sigterm_outside_a_sweep_is_a_keyboard_interrupt():
    previous = signal.getsignal(signal.SIGTERM)
    sigint = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh process
    try:
        signals.forward_sigterm()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous if callable(previous) else signal.SIG_DFL)
        signal.signal(signal.SIGINT, sigint)


def test_a_local_ray_instance_gets_token_auth_before_ray_is_imported(monkeypatch, tmp_path):
    """Ray reads RAY_AUTH_MODE once, at import: a fresh command-line process that is about to
    start its own instance turns tokens on (Ray binds every interface); one that joins a
    cluster leaves the mode alone."""
    code = ("import os, sys; from reinit_tune.sweep import cluster; cluster.secure_local_ray(); "
            "print(os.environ.get('RAY_AUTH_MODE'), 'ray' in sys.modules)")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": str(tmp_path)}
    env.pop("RAY_ADDRESS", None)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, cwd=REPO)
    assert run.stdout.split() == ["token", "False"], run.stderr[-2000:]
    joined = subprocess.run([sys.executable, "-c", code], env={**env, "RAY_ADDRESS": "local"},
                            capture_output=True, text=True, cwd=REPO)
    assert joined.stdout.split() == ["token", "False"]
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
