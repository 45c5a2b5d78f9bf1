"""How the trials of a sweep reach Ray Tune and how Tune names them: ``TrialList`` (Tune's
searcher, each trial once, in order), ``SeedSearcher`` (seeds on demand: each group's next
seed only while it is needed; ``reinit_tune.sweep.seeds``) and the trial id, name and folder
of a Tune trial read back from the config either gave it."""

from __future__ import annotations

import pickle
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from ray.tune.search import Searcher

from reinit_tune import store
from reinit_tune.inference.sequential import SeedRule
from reinit_tune.sweep.claims import CLAIMS
from reinit_tune.sweep.progress import trial_name
from reinit_tune.sweep.seeds import GroupState, SeedGroup, SeedReport, Stored, seed_report

POLL_S = 5.0  # how often trials another driver trains are looked up in the store


class TrialList(Searcher):
    """Tune's search space: each trial once, in order, as ``{"trial": {"trial_id": ...,
    <axes>}}`` with the trial's experiment axes (``trials``: id -> ``progress.axes``) as real
    values, so Tune's table, ``ResultGrid.get_dataframe()`` (``config/trial/k``...), logger
    callbacks (TensorBoard hparams ``trial/k``...) and the dashboard show them.

    A Tune searcher rather than one ``grid_search`` value per trial: Tune's variant generator
    deep-copies the whole search space, grid included, for each trial it creates, which is
    O(n) per trial and O(n^2) per sweep (22 s of a 1,000-trial sweep's 60 s of driver time;
    benchmarks/RESULTS.md, "the sweep driver at scale"); handing out the next value is O(1).
    """

    def __init__(self, trials: dict[str, dict[str, Any]]):
        super().__init__()
        self.values = [{"trial_id": tid, **values} for tid, values in trials.items()]
        self.given = 0

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True  # no metric to optimize: every value runs

    def suggest(self, trial_id: str) -> dict | str | None:
        if self.given >= len(self.values):
            return Searcher.FINISHED
        self.given += 1
        return {"trial": dict(self.values[self.given - 1])}

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass

    # with Tune's experiment state (periodic), so that state stays whole
    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump((self.values, self.given), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.values, self.given = pickle.load(f)


class SeedSearcher(Searcher):
    """Tune's searcher for ``--seeds auto``: hands out the Tune trials (``grid``: id ->
    axes; ``members``: id -> our trial ids, several for a pack) of each group's next seed
    while the group's decision wants it, and finishes once every group is closed.

    ``record`` is told of every trial the store writer stores (``StoreWriter.on_stored``);
    trials another driver holds are looked up in the store until they are stored there, or
    handed out again once no driver holds them."""

    def __init__(self, groups: list[SeedGroup], rule: SeedRule, grid: Mapping[str, dict],
                 members: Mapping[str, list[str]], results_dir: str,
                 stored: Stored,
                 on_close: Callable[[list[str]], None] | None = None):
        super().__init__()
        self.rule = rule
        self.grid = dict(grid)
        self.results_dir = results_dir
        self.states = [GroupState.of(g, stored) for g in groups]
        self.pid_of = {t: pid for pid, ids in members.items() for t in ids}
        self.members = {pid: list(ids) for pid, ids in members.items()}
        self.where = {t: (i, seed) for i, state in enumerate(self.states)
                      for seed, per_seed in enumerate(state.group.trials)
                      for t in per_seed.values()}
        self.queue: deque[str] = deque()
        self.in_flight: set[str] = set()  # pids handed out, not yet settled
        self.unsettled: dict[str, set[str]] = {}  # pid -> its members not yet stored
        self.elsewhere: set[str] = set()
        self.last_poll = 0.0
        self.on_close = on_close  # called with the trial ids a closed group no longer needs
        for i in range(len(self.states)):
            self._advance(i)

    # -- Tune's side ---------------------------------------------------------------------
    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True

    def suggest(self, trial_id: str) -> dict | str | None:
        if self.elsewhere and time.monotonic() - self.last_poll > POLL_S:
            self._poll()
        if self.queue:
            pid = self.queue.popleft()
            self.in_flight.add(pid)
            return {"trial": {"trial_id": pid, **self.grid[pid]}}
        if not self.in_flight and not self.elsewhere and all(
                s.decision is not None and (s.decision.closed or s.stuck(s.complete()))
                for s in self.states):
            return Searcher.FINISHED
        return None

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass  # the store writer tells ``record`` what was stored

    # -- the store's side ----------------------------------------------------------------
    def record(self, trial_id: str, status: str | None, score: float | None,
               majority: float | None = None) -> None:
        """``trial_id`` was stored with ``status`` ("ok": ``score``, and its task's
        ``majority``-class score), or (None) is left to another driver."""
        if trial_id not in self.where:
            return
        i, _ = self.where[trial_id]
        state = self.states[i]
        pid = self.pid_of.get(trial_id)
        if status is None:
            self.elsewhere.add(trial_id)
        elif status == "ok" and score is not None and np.isfinite(score):
            state.scores[trial_id] = float(score)
            if majority is not None and np.isfinite(majority):
                state.majority = float(majority)
        else:
            state.failed.add(trial_id)
        if pid is not None:
            left = self.unsettled.get(pid)
            if left is not None:
                left.discard(trial_id)
                if not left:
                    self.in_flight.discard(pid)
                    del self.unsettled[pid]
        self._advance(i)

    def _poll(self) -> None:
        """Trials another driver trains: stored since, or free to train here again."""
        self.last_poll = time.monotonic()
        rows = store.load_trials(self.results_dir,
                                 columns=["trial_id", "status", "score", "majority_score"])
        rows = rows[rows["trial_id"].isin(self.elsewhere)]
        for row in rows.itertuples():
            self.elsewhere.discard(row.trial_id)
            self.record(row.trial_id, row.status, row.score,
                        getattr(row, "majority_score", None))
        claims = Path(self.results_dir) / CLAIMS
        for trial_id in sorted(self.elsewhere):
            if not (claims / f"{trial_id}.json").exists():  # its driver let it go
                self.elsewhere.discard(trial_id)
                pid = self.pid_of.get(trial_id)
                if pid is not None and pid not in self.queue:
                    self.unsettled.setdefault(pid, set()).add(trial_id)
                    self.queue.append(pid)

    def _advance(self, i: int) -> None:
        """Decide group ``i`` on its complete seeds; hand out the seeds it wants next."""
        state = self.states[i]
        state.decision = state.decide(self.rule)
        # a partly stored seed past the decision (a resumed or extended sweep) is finished,
        # so stored seeds stay paired
        wanted = max(state.decision.wanted, state.touched())
        while state.released < wanted:
            self._release(state, state.released)
            state.released += 1
        if state.decision.closed and self.on_close is not None:
            unused = [t for per_seed in state.group.trials[state.released:]
                      for t in per_seed.values()]
            if unused:
                self.on_close(unused)

    def _release(self, state: GroupState, seed: int) -> None:
        pids = dict.fromkeys(self.pid_of[t] for t in state.group.trials[seed].values()
                             if t in self.pid_of and t not in state.scores)
        for pid in pids:
            if pid in self.unsettled or pid in self.in_flight:
                continue
            self.unsettled[pid] = {t for t in self.members[pid] if t not in state.scores}
            self.queue.append(pid)

    # -- what the sweep shows ------------------------------------------------------------
    def open_groups(self) -> int:
        return sum(1 for s in self.states
                   if s.decision is None or not (s.decision.closed or s.stuck(s.complete())))

    def widest(self) -> float | None:
        widths = [s.decision.half_width for s in self.states
                  if s.decision is not None and s.decision.half_width is not None
                  and not s.decision.closed]
        return max(widths) if widths else None

    def status(self) -> str:
        widest = self.widest()
        return (f"{self.open_groups()}/{len(self.states)} groups open"
                + ("" if widest is None else f", widest ±{widest:.4f}"))

    def not_needed(self) -> int:
        """Trials of the grid a closed group did not hand out: seeds it did not need."""
        return sum(1 for s in self.states if s.decision is not None and s.decision.closed
                   for per_seed in s.group.trials[s.released:] for t in per_seed.values()
                   if t in self.pid_of and t not in s.scores)

    def report(self) -> SeedReport:
        return seed_report(self.states, self.rule)

    # with Tune's experiment state; a resumed sweep rebuilds all of it from the store
    def save(self, checkpoint_path: str) -> None:
        pass

    def restore(self, checkpoint_path: str) -> None:
        pass


def trial_id_of(trial) -> str | None:
    """Our trial id of a Tune trial (from its config; see ``TrialList``)."""
    return (trial.config.get("trial") or {}).get("trial_id")


def tune_trial_name(trial) -> str:
    """Tune's ``trial_name_creator``: a trial named by its axes
    (``progressive_rte_n500_s3_k4``), from its config (``TrialList``). A module function, not
    a table of names: Tune serializes the creators once per trial it creates."""
    values = trial.config.get("trial")
    return trial_name(values) if values else "trial"


def tune_trial_dirname(trial) -> str:
    """Tune's ``trial_dirname_creator``: the trial's name and Tune's trial id."""
    return f"{tune_trial_name(trial)}_{trial.trial_id}"
