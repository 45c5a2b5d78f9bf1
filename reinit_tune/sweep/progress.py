"""How a running sweep shows itself: each trial's experiment axes, and a progress line.

``axes`` names a trial by what a researcher varies (family, task, train size, seed, k or the
reinitialized layers/heads, permutation, init scheme, learning rate): Tune's ``param_space``
carries them as real values, so Tune's table, ``ResultGrid.get_dataframe()``, logger callbacks
(TensorBoard hparams, W&B, MLflow) and the dashboard show them instead of a hash, and trials are
named by them. ``Progress`` says when the first trials start, then prints one line per
finished trial with its axes, outcome and score, under a header of done/running/pending,
throughput and an ETA: the cost model's estimate of the remaining trials, corrected by how
long the finished ones took against their own estimate; where the cost model has no estimate
(a model shape it has no table for), the mean time of the finished trials. Once a trial has
finished the ETA is never unknown.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from reinit_tune.config import TrialConfig

Axis = str | int | float


def axes(config: TrialConfig, num_layers: int) -> dict[str, Axis]:
    """The trial's coordinates in its experiment, as scalars (Tune shows and logs scalars)."""
    out: dict[str, Axis] = {
        "family": config.experiment,
        "task": config.task,
        "train_size": "full" if config.train_size is None else config.train_size,
        "seed": config.seed,
    }
    if config.intermediate_task is not None:
        out["intermediate_task"] = config.intermediate_task
    if config.probe_layer is not None:
        out["probe_layer"] = config.probe_layer
    reinit = config.reinit_layers
    if reinit == tuple(range(num_layers - len(reinit), num_layers)):
        out["k"] = num_layers - len(reinit)  # layers 1..k pretrained, the rest reinitialized
    else:
        out["reinit_layers"] = ",".join(map(str, reinit))
    if config.reinit_heads:
        out["reinit_heads"] = " ".join(f"{layer}.{head}" for layer, head in config.reinit_heads)
    if config.layer_order is not None:
        out["layer_order"] = ",".join(map(str, config.layer_order))
    out["init_scheme"] = config.init_scheme
    out["lr"] = config.lr
    return out


def trial_name(values: dict[str, Any]) -> str:
    """A short readable trial name from its axes: ``progressive_rte_n500_s3_k4``."""
    parts = [str(values.get("family", "trial")), str(values.get("task", ""))]
    parts.append(f"n{values.get('train_size')}")
    parts.append(f"s{values.get('seed')}")
    for key, short in (("k", "k"), ("probe_layer", "probe"), ("reinit_layers", "reinit"),
                       ("reinit_heads", "heads"), ("layer_order", "order"),
                       ("intermediate_task", "after-")):
        if key in values and values[key] != "":
            parts.append(f"{short}{values[key]}".replace(" ", "+").replace(",", "-"))
    return "_".join(parts)[:120]


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """One line per finished trial, with counts, throughput and an ETA (see module doc).

    ``trials`` maps trial ids to their ``axes``; ``estimates`` maps trial ids to the cost
    model's seconds for one trial on one worker; ``slots`` is how many trials run at once
    (measured as the sweep runs)."""

    def __init__(self, trials: dict[str, dict[str, Axis]],
                 estimates: dict[str, float] | None = None, out: TextIO | None = None):
        self.trials = dict(trials)
        self.estimates = estimates or {}
        self.out = out
        self.started: dict[str, float] = {}
        self.finished: set[str] = set()
        self.measured_s = 0.0  # summed trial wall times of finished trials ...
        self.estimated_s = 0.0  # ... and the cost model's estimate of the same trials
        self.finished_s = 0.0  # wall time of every finished trial that was seen starting
        self.timed = 0
        self.slots = 1
        self.start = time.monotonic()
        # what eta_s needs of the unfinished trials, kept as running totals: a pass over
        # every trial per finished one costs O(n^2) over a sweep
        self.pending_estimated_s = sum(self.estimates.get(t, 0.0) for t in trials)
        self.pending_unestimated = sum(t not in self.estimates for t in trials)
        self.status: Callable[[], str] | None = None  # more to show in the header
        self.announced = False  # the line said when the first trial starts

    def not_needed(self, trial_ids: Iterable[str]) -> None:
        """Trials the sweep will not run after all (seeds on demand closed their group)."""
        for trial_id in trial_ids:
            if trial_id in self.trials and trial_id not in self.finished \
                    and trial_id not in self.started:
                del self.trials[trial_id]
                if trial_id in self.estimates:
                    self.pending_estimated_s -= self.estimates[trial_id]
                else:
                    self.pending_unestimated -= 1

    def __getstate__(self) -> dict:
        # Tune pickles its callbacks and stoppers with the experiment state; a console
        # stream does not pickle, and a restored copy prints to its own process's stdout.
        return {**self.__dict__, "out": None, "status": None}

    def trial_stopped(self, trial_id: str) -> None:
        """A trial ended without a result (the sweep was stopped): it stays pending."""
        self.started.pop(trial_id, None)

    def trial_started(self, trial_id: str) -> None:
        self.started[trial_id] = time.monotonic()
        self.slots = max(self.slots, len(self.started))

    def announce(self, where: str | None = None) -> None:
        """Say once, as the first trials start, how many run (and ``where``) and the ETA
        the cost table gives, so a sweep whose first trial takes long is not silent."""
        if self.announced:
            return
        self.announced = True
        place = f" on {where}" if where else ""
        eta = self.eta_s()
        source = "" if eta is None else " (from the cost table; corrected as trials finish)"
        print(f"{self.header()}  started: {len(self.started)} running{place}; a line per "
              f"finished trial follows{source}", file=self.out or sys.stdout, flush=True)

    def trial_finished(self, trial_id: str, status: str, detail: str = "") -> None:
        began = self.started.pop(trial_id, None)
        seconds = time.monotonic() - began if began is not None else 0.0
        if trial_id not in self.finished:
            self.finished.add(trial_id)
            if trial_id in self.estimates:
                self.pending_estimated_s -= self.estimates[trial_id]
            else:
                self.pending_unestimated -= 1
        if began is not None:
            self.finished_s += seconds
            self.timed += 1
        if trial_id in self.estimates and began is not None:
            self.measured_s += seconds
            self.estimated_s += self.estimates[trial_id]
        shown = " ".join(f"{k}={v}" for k, v in self.trials[trial_id].items()
                         if k not in ("family", "init_scheme", "lr"))
        print(f"{self.header()}  {status:<8} {shown}  {detail}  ({_duration(seconds)})",
              file=self.out or sys.stdout, flush=True)

    def eta_s(self) -> float | None:
        if self.done >= len(self.trials):
            return 0.0
        mean_s = self.finished_s / self.timed if self.timed else None
        if self.pending_unestimated and mean_s is None:
            return None
        correction = self.measured_s / self.estimated_s if self.estimated_s else 1.0
        estimated = correction * max(0.0, self.pending_estimated_s)  # float drift below 0
        return (estimated + self.pending_unestimated * (mean_s or 0.0)) / self.slots

    @property
    def done(self) -> int:
        return len(self.finished)

    def header(self) -> str:
        total = len(self.trials)
        running = len(self.started)
        pending = total - self.done - running
        elapsed = time.monotonic() - self.start
        rate = f"{self.done / elapsed * 3600:.0f} trials/h" if self.done and elapsed else "-"
        eta = self.eta_s()
        status = f"; {self.status()}" if self.status is not None else ""
        return (f"[{self.done:>{len(str(total))}}/{total} done, {running} running, {pending} "
                f"pending; {rate}; ETA {'?' if eta is None else _duration(eta)}{status}]")
