"""SIGTERM takes Ctrl+C's path; a local Ray instance keeps token authentication on."""

from __future__ import annotations

import os
import signal

import pytest

from reinit_tune.sweep import cluster, signals


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
    try:
        signals.forward_sigterm()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous if callable(previous) else signal.SIG_DFL)


def test_a_local_ray_instance_starts_with_token_auth(monkeypatch, tmp_path):
    seen = {}

    class Context:
        dashboard_url = None

    def init(**kwargs):
        seen.update(kwargs, auth=os.environ.get("RAY_AUTH_MODE"))
        return Context()

    monkeypatch.setattr(cluster.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(cluster.ray, "init", init)
    monkeypatch.setattr(cluster, "address_file", lambda: tmp_path / "none")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        cluster.connect_ray()
    finally:
        signal.signal(signal.SIGTERM, previous if callable(previous) else signal.SIG_DFL)
    assert seen["address"] == "local" and seen["auth"] == "token"
