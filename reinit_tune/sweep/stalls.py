"""Stalled trials: a trial that makes no progress for longer than its limit is ended, so a
wedged GPU, a hung file system or a deadlocked data loader never holds a sweep forever.

A trial's progress is its start, each epoch it reports, and the beats of its loops: every
training step and dev batch beats (``reinit_tune.training.beats``, at most one beat every 2
s) to the sweep's board (``Beats``, an actor beside the driver), so the limit is on the gap
between two signs of life, never on how long an epoch takes: a trial stepping slowly on a
loaded node is never ended. Its limit is ``--trial-timeout``
where given (0: no limit), else derived from the cost model's estimate of the trial:
``EPOCH_FACTOR`` times its estimated epoch plus its estimated setup, at least ``FLOOR_S``
(``UNKNOWN_S`` where the cost model has no estimate). A ``Watchdog`` thread on the driver
checks the running trials every second and kills the actor of a stalled one
(``ray.kill``): Tune sees a lost worker and retries the trial like one lost with its node
(``--max-failures``); one whose attempts all stall is stored as an error "stalled: no
progress for N s". The store writer (``reinit_tune.sweep.writer``) feeds the watchdog and
reads what it ended.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

log = logging.getLogger("reinit_tune")

FLOOR_S = 600.0  # never less: model loading, data encoding and a slow node's first epoch
EPOCH_FACTOR = 5.0  # times the estimated epoch: far above any trial's ordinary spread
UNKNOWN_S = 3600.0  # a trial the cost model cannot estimate (a model shape it has no table for)
SETUP_S = 60.0  # a --trial-timeout below this is warned of: setup phases beat only between


def limits(epochs: Mapping[str, int], estimates: Mapping[str, float],
           override: float | None) -> dict[str, float | None]:
    """The limit of each Tune trial (``epochs``: its epochs; ``estimates``: the cost model's
    seconds for the whole trial, where known): ``override`` for all where given (None for 0,
    no limit), else derived as the module docstring says."""
    if override is not None:
        return dict.fromkeys(epochs, override if override > 0 else None)
    per_epoch = epoch_seconds(epochs, estimates)
    return {pid: UNKNOWN_S if pid not in per_epoch else max(FLOOR_S, EPOCH_FACTOR * per_epoch[pid])
            for pid in epochs}


def epoch_seconds(epochs: Mapping[str, int], estimates: Mapping[str, float]) -> dict[str, float]:
    """The estimated seconds of one epoch of each Tune trial whose whole trial is estimated."""
    return {pid: estimates[pid] / max(n, 1) for pid, n in epochs.items() if pid in estimates}


def short_override(override: float | None) -> str | None:
    """A warning where ``--trial-timeout`` is shorter than ``SETUP_S``: a trial beats
    between the phases of its setup (loading its model, encoding its data), not inside
    them, and a limit in minutes typed as seconds would end every trial as stalled; None
    where it is not, or no limit was given."""
    if not override or override <= 0 or override >= SETUP_S:
        return None
    return (f"--trial-timeout {override:g}: shorter than {SETUP_S:.0f} s; a trial sends no "
            "progress beat while it loads its model or encodes its data, so trials may be "
            "ended as stalled there; give more seconds, or drop --trial-timeout (default: "
            f"5x the estimated epoch, at least {FLOOR_S:.0f} s)")


def stalled_text(seconds: float) -> str:
    """The error a trial whose every attempt stalled is stored with."""
    return (f"stalled: no progress for {seconds:.0f} s (no training step, dev batch or epoch; "
            "its limit: --trial-timeout sets it, 0 turns it off)")


class Beats:
    """The sweep's board of progress beats: how many beats each Tune trial (our id) sent.
    Counts, not times, so no two hosts' clocks are compared."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def beat(self, pid: str) -> None:
        self.counts[pid] = self.counts.get(pid, 0) + 1

    def read(self) -> dict[str, int]:
        return self.counts


def board():
    """A ``Beats`` actor on the driver's node (no CPU of its own): what trials beat to."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    return ray.remote(num_cpus=0)(Beats).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=True)).remote()


def close(beats) -> None:
    """End the board (an actor outlives its sweep in a Ray instance the process keeps)."""
    import ray

    try:
        ray.kill(beats)
    except Exception as e:  # noqa: BLE001 - gone with its node, or Ray already down
        log.debug("could not end the progress board: %s", e)


def reader(beats) -> Callable[[], Mapping[str, int]]:
    """What the watchdog polls: the board's counts (empty where it cannot be reached)."""
    def read() -> Mapping[str, int]:
        import ray

        try:
            return ray.get(beats.read.remote(), timeout=10)
        except Exception as e:  # noqa: BLE001 - epochs still count as progress
            log.debug("could not read the progress beats: %s", e)
            return {}
    return read


class Watchdog:
    """Ends Tune trials that make no progress within their limit (see the module doc).

    ``limits`` maps our Tune trial ids (``searcher.trial_id_of``) to seconds (None: none);
    ``kill(trial)`` ends a Tune trial's worker; ``beats()`` returns the board's beat counts
    by our id (``reader``): a count that moved restarts a trial's clock. ``ended`` maps a
    Tune trial's own id to the limit it overran, for the writer's message."""

    def __init__(self, limits: Mapping[str, float | None], kill: Callable[[object], None],
                 interval: float = 1.0,
                 beats: Callable[[], Mapping[str, int]] | None = None):
        self.limits = dict(limits)
        self.kill = kill
        self.interval = interval
        self.beats = beats
        self._counts: dict[str, int] = {}
        self.ended: dict[str, float] = {}
        self._running: dict[str, tuple[object, str, float]] = {}  # tune id -> (trial, pid, t)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-watchdog", daemon=True)
        self._thread.start()

    def __getstate__(self) -> dict:
        # Tune pickles its callbacks (the store writer holds this) with the experiment
        # state: a restored copy keeps the limits and watches nothing
        return {"limits": self.limits, "ended": dict(self.ended), "interval": self.interval}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.kill = lambda trial: None
        self.beats = None
        self._counts = {}
        self._running = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def progressed(self, trial, pid: str) -> None:
        """``trial`` (our id ``pid``) started or reported an epoch: its clock restarts."""
        with self._lock:
            self._running[trial.trial_id] = (trial, pid, time.monotonic())
            self.ended.pop(trial.trial_id, None)  # a new attempt, or it moves again

    def finished(self, trial) -> None:
        with self._lock:
            self._running.pop(trial.trial_id, None)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            counts = self.beats() if self.beats is not None else {}
            now = time.monotonic()
            with self._lock:
                for tune_id, (trial, pid, _) in list(self._running.items()):
                    if pid in counts and counts[pid] != self._counts.get(pid):
                        self._running[tune_id] = (trial, pid, now)
                self._counts.update(counts)
                over = [(trial, limit) for trial, pid, since in self._running.values()
                        if (limit := self.limits.get(pid)) is not None and now - since > limit]
                for trial, _ in over:
                    self._running.pop(trial.trial_id, None)
            for trial, limit in over:
                self.ended[trial.trial_id] = limit
                log.warning("trial %s made no progress for %.0f s: ended (no training step, "
                            "dev batch or epoch: a stalled worker); it runs again up to "
                            "--max-failures times (--trial-timeout sets the limit, 0 turns "
                            "it off)", trial, limit)
                try:
                    self.kill(trial)
                except Exception as e:  # already gone: Tune sees that by itself
                    log.debug("could not end stalled trial %s: %s", trial, e)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def kill_trial(trial) -> None:
    """End a Tune trial's worker (``ray.kill``): Tune handles it as a lost worker."""
    import ray

    actor = trial.temporary_state.ray_actor
    if actor is not None:
        ray.kill(actor, no_restart=True)
