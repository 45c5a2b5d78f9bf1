"""SIGTERM takes the path Ctrl+C takes.

Cluster schedulers, ``timeout`` and ``kill`` stop a driver with SIGTERM. Ray's ``ray.init``
answers it with ``sys.exit`` mid-call (stack dumps, exit 134 from Ray's threads), while Ctrl+C
asks Ray Tune to end the run cleanly: running trials stop, finished trials are already stored,
and the summary says to rerun. ``forward_sigterm`` makes SIGTERM call whatever handles SIGINT
at that moment (Tune's graceful stop during a sweep, ``KeyboardInterrupt`` outside it).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


def _as_sigint(signum: int, frame: FrameType | None) -> None:
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:  # SIGINT ignored or left to the OS: stop the way an unhandled Ctrl+C would
        raise KeyboardInterrupt


def forward_sigterm() -> None:
    """Route SIGTERM to the current SIGINT handler (call again after anything, such as
    ``ray.init``, installs its own SIGTERM handler). Only the main thread may set handlers."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _as_sigint)
