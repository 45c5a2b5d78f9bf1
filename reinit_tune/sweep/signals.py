"""Ctrl+C, SIGTERM and SIGHUP take one path: a graceful stop, the summary, exit 128 + signal.

Cluster schedulers, ``timeout`` and ``kill`` stop a driver with SIGTERM, a closed terminal or
SSH session sends SIGHUP. Ray's ``ray.init`` answers SIGTERM with ``sys.exit`` mid-call (stack
dumps, exit 134 from Ray's threads), SIGHUP kills the process without a word, and Tune's own
Ctrl+C handler leaves no trace of the interruption (the command then exited 1, not 130).
Here all three are recorded and, during a Tune run, ask Tune to end it cleanly: running
trials stop, finished trials are already stored, and the summary says to rerun. Tune's stop
is reached through its SIGUSR1 handler (Tune's SIGINT handler is turned off with its
``TUNE_DISABLE_SIGINT_HANDLER``, set by ``reinit_tune.sweep.environment``, so that Ctrl+C
comes here first). A second signal, or one outside a Tune run, raises ``KeyboardInterrupt``:
the command stops at once.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_received: list[int] = []
# SIGUSR1's handler when ours were installed: a later one is the running Tune's stop handler
# (a finished run leaves its handler behind, which must not swallow a signal).
_before_tune: list[object] = [None]


def _stop(signum: int, frame: FrameType | None) -> None:
    first = not _received
    _received.append(signum)
    tune_stop = signal.getsignal(signal.SIGUSR1)
    if first and callable(tune_stop) and tune_stop is not _before_tune[0]:
        tune_stop(signum, frame)
    else:
        raise KeyboardInterrupt


def received() -> int | None:
    """The first stop signal this command received (None: none)."""
    return _received[0] if _received else None


def exit_status(default: int = 130) -> int:
    """128 + the first stop signal's number (130 Ctrl+C, 143 SIGTERM, 129 SIGHUP)."""
    return 128 + _received[0] if _received else default


def install() -> None:
    """A fresh command: forget earlier signals (in-process tests run several) and route the
    stop signals here."""
    _received.clear()
    forward_sigterm()


def forward_sigterm() -> None:
    """Route SIGINT, SIGTERM and SIGHUP here (call again after anything, such as ``ray.init``,
    installs its own handlers). Only the main thread may set handlers."""
    if threading.current_thread() is not threading.main_thread():
        return
    _before_tune[0] = signal.getsignal(signal.SIGUSR1)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)
