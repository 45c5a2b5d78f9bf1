"""Progress beats: the training and evaluation loops say "still moving" after each step and
each dev batch, so a trial that advances, however slowly, is told apart from one that is
stuck (``reinit_tune.sweep.stalls``).

``beat`` is a no-op unless a sink is set (``sending_to``: the trial worker sends to the
sweep's board, ``stalls.Beats``), and sends at most one beat every ``EVERY_S`` (2) seconds, so
a step of a few milliseconds pays one clock read. Process-wide, as a worker runs one trial
(or one pack) at a time.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator

log = logging.getLogger("reinit_tune")

EVERY_S = 2.0  # at most one beat this often

_sink: Callable[[], object] | None = None
_last = -float("inf")


def beat() -> None:
    """Say the trial moved (a step, a dev batch, a phase of its setup)."""
    global _last
    if _sink is None:
        return
    now = time.monotonic()
    if now - _last < EVERY_S:
        return
    _last = now
    try:
        _sink()
    except Exception as e:  # noqa: BLE001 - a lost board must never fail a trial
        log.debug("could not send a progress beat: %s", e)


@contextlib.contextmanager
def sending_to(sink: Callable[[], object] | None) -> Iterator[None]:
    """Beats go to ``sink`` inside the block (None: nowhere); the first one at once."""
    global _sink, _last
    previous = _sink
    _sink, _last = sink, -float("inf")
    try:
        beat()
        yield
    finally:
        _sink = previous
