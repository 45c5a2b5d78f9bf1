"""The driver side of a running sweep: ``StoreWriter``, the Tune callback that writes each
finished or finally failed trial to the Parquet store (whatever node ran it) and decides when
the sweep must stop early, and ``HaltStopper``, the Tune stopper that reads that decision."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray import tune

from reinit_tune import store
from reinit_tune.config import TrialConfig
from reinit_tune.outcome import Status, TrialOutcome
from reinit_tune.sweep import claims, memory
from reinit_tune.sweep.packs import SPLIT
from reinit_tune.sweep.progress import Progress
from reinit_tune.sweep.searcher import trial_id_of, tune_trial_name
from reinit_tune.sweep.stalls import Watchdog, stalled_text
from reinit_tune.sweep.summary import SweepSummary

log = logging.getLogger("reinit_tune")


class StoreWriter(tune.Callback):
    """Writes a store row when a Tune trial finishes or finally fails (driver side), and
    decides when the sweep must stop early (``halt``, read by ``HaltStopper``):

    - the first two trials to fail, before any succeeded, failed with the same message (a
      deterministic error: a broken model, wrong data, a bug; retrying every trial would only
      repeat it). Divergence is exempt: some learning rates of a grid may diverge.
    - a store write failed (a full disk, a read-only folder): training more trials whose
      results cannot be kept wastes the compute.
    """

    def __init__(self, results_dir: Path, configs: dict[str, TrialConfig], summary: SweepSummary,
                 num_layers: dict[str, int], progress: Progress | None = None,
                 source: dict[str, Any] | None = None,
                 packs: dict[str, list[str]] | None = None,
                 claim_context: claims.Context | None = None):
        self.results_dir = results_dir
        self.configs = configs
        self.summary = summary
        self.num_layers = num_layers  # per model, from pre-flight: for trials that never ran
        self.progress = progress
        self.source = source or {}  # git commit and dirty flag of the code the driver runs
        # Tune grid id -> the trial ids a pack trains (reinit_tune.sweep.packs); one-trial
        # packs and unpacked sweeps need no entry
        self.packs = packs or {}
        self.outcomes: dict[str, TrialOutcome] = {}  # trial_id -> its epochs reported so far
        self.failures: dict[str, TrialOutcome] = {}  # trial_id -> its deterministic failure
        self.halt: str | None = None  # why the sweep must stop, once it must
        # the results folder this sweep writes to, as (device, inode): a folder deleted or
        # moved away mid-sweep must not be recreated silently beside the store's rows
        self.folder = _identity(results_dir)
        self.claims = claim_context  # released once a trial is stored or stops
        self.skips: dict[str, str] = {}  # trial_id -> why another driver has it
        # trial ids this run is done with (stored, or left to another driver): what a
        # restarted or next chunk of the sweep must not run again
        self.settled: set[str] = set()
        # told of each trial once stored (its status, and its score when ok) or left to
        # another driver (status None): what seeds on demand decides on
        self.on_stored: Callable[[str, str | None, float | None, float | None], None] | None \
            = None
        # ends trials that make no progress within their limit (reinit_tune.sweep.stalls)
        self.watchdog: Watchdog | None = None
        # held from a row's write to its count: a summary printed from another thread (the
        # lost head, ``close``) never misses a row that is already in the store
        self._lock = threading.Lock()
        self._closed = False

    def __getstate__(self) -> dict:
        # Tune pickles its callbacks with the experiment state; a lock does not pickle
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def close(self, timeout_s: float = 10.0) -> None:
        """Write no more rows: what the summary printed next counts is what the store
        holds. Trials that end later are not stored; the same command trains them again."""
        acquired = self._lock.acquire(timeout=timeout_s)  # a write is local: seconds at most
        self._closed = True
        if acquired:
            self._lock.release()

    def members(self, trial) -> list[str]:
        """Our trial ids of what a Tune trial runs: a pack's members, else the trial."""
        return self.packs.get(trial_id_of(trial)) or [trial_id_of(trial)]

    def on_trial_start(self, iteration, trials, trial, **info):
        if self.watchdog is not None:
            self.watchdog.progressed(trial, trial_id_of(trial))
        if self.progress is not None:
            for trial_id in self.members(trial):
                self.progress.trial_started(trial_id)
            location = getattr(getattr(trial, "temporary_state", None), "location", None)
            self.progress.announce(getattr(location, "hostname", None))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if self.watchdog is not None:
            self.watchdog.progressed(trial, trial_id_of(trial))
        outcome = TrialOutcome.from_report(result["outcome"])  # a pack's: one member's
        if result.get(SPLIT):  # said by the pack once, when it split
            log.warning("%s: %s", tune_trial_name(trial), result[SPLIT])
        key = outcome.trial_id
        if outcome.status in (Status.FAILED, Status.DIVERGED):
            self.failures[key] = outcome
            return
        if outcome.status is Status.SKIPPED:
            self.skips[key] = outcome.error or ""
            return
        # By epoch: a retried trial that resumes re-reports epochs already seen. A pack
        # member trained anew after its pack split keeps only the new run's epochs.
        seen = self.outcomes.get(key)
        anew = seen is not None and seen.pack_history != outcome.pack_history
        self.outcomes[key] = outcome if seen is None or anew else seen.then(outcome)

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.summary.retries += 1
        if self.watchdog is not None and trial.trial_id in self.watchdog.ended:
            self.summary.stalled += 1
            return  # the watchdog said why; Tune's error is only its kill
        # one line instead of Tune's traceback (TUNE_PRINT_ALL_TRIAL_ERRORS=0: ``environment``)
        log.warning("trial %s failed on its worker (%s); Tune runs it again (retry %d of "
                    "--max-failures)", tune_trial_name(trial),
                    _error_text(trial).splitlines()[-1][:200], trial.num_failures)

    def _write(self, trial, ended: TrialOutcome, attempts: int) -> None:
        """Store a trial that ended as ``ended`` says, with the epochs it reported before."""
        with self._lock:
            if not self._closed:
                self._write_counted(trial, ended, attempts)

    def _write_counted(self, trial, ended: TrialOutcome, attempts: int) -> None:
        config = self.configs[ended.trial_id]
        seen = self.outcomes.pop(config.trial_id, None)
        # an ended trial's own fields (node, data) are those of its reported epochs
        outcome = ended if seen is None else dataclasses.replace(
            seen, status=ended.status, error=ended.error).with_epochs(ended.epochs)
        status, error = outcome.status.stored, outcome.error
        row, epochs = store.outcome_rows(config, outcome,
                                         num_layers=self.num_layers[config.model],
                                         attempts=attempts, **self.source)
        if self.folder is not None and _identity(self.results_dir) != self.folder:
            self.halt = self.halt or (
                f"the results store {self.results_dir} was deleted or moved while the sweep "
                "ran: stopped rather than start a second store there; put it back (or pass "
                "--results with its new place) and rerun the same command (stored trials "
                "are skipped)")
            return  # the summary says it, once
        try:
            if status == "ok" and outcome.similarity:  # before the trial row
                store.write_similarity(self.results_dir, config.trial_id,
                                       [dict(r) for r in outcome.similarity])
            if status == "ok" and (steps := store.outcome_steps(outcome)):
                store.write_steps(self.results_dir, config.trial_id, steps)
            store.write_trial(self.results_dir, row, epochs)
        except OSError as e:
            self.halt = self.halt or (
                f"cannot write to the results store {self.results_dir}: {e}. Stopped the "
                "sweep so no more trials train for nothing; free disk space or make the "
                "folder writable, then rerun the same command (stored trials are skipped)")
            return  # the summary says it, once
        self._release(config.trial_id)
        self.settled.add(config.trial_id)
        if self.on_stored is not None:
            self.on_stored(config.trial_id, status, row["score"] if status == "ok" else None,
                           row.get("majority_score"))
        if status == "ok":
            self.summary.ok += 1
            self.summary.examples_per_s.append(row["train_examples_per_s"])
            detail = f"{config.task_spec.primary} {row['score']:.4f}"
        else:
            self.summary.errors[error or ""] += 1
            if outcome.status is not Status.DIVERGED:  # some learning rates may diverge
                self._fail_fast(error or "")
            detail = (error or "").splitlines()[-1][:100] if error else ""
        if self.progress is not None:
            shown = "diverged" if outcome.status is Status.DIVERGED else status
            self.progress.trial_finished(config.trial_id, shown, detail)
        _drop_checkpoint(trial)

    def _fail_fast(self, error: str) -> None:
        if self.summary.ok or self.halt:
            return
        if self.summary.errors[error] >= 2:
            self.halt = (f"stopped the sweep: its first {self.summary.failed} trials failed, "
                         f"{self.summary.errors[error]} of them with the same error, so the "
                         "others would too. Fix what it says and rerun the same command")

    def on_trial_complete(self, iteration, trials, trial, **info):
        if self.watchdog is not None:
            self.watchdog.finished(trial)
        attempts = trial.num_failures + 1  # every failed attempt was retried; this one ended
        for trial_id in self.members(trial):
            self._complete(trial, trial_id, attempts)

    def _release(self, trial_id: str) -> None:
        if self.claims is not None:
            try:
                claims.release(self.claims, trial_id)
            except OSError as e:  # it expires after its lease
                log.warning("could not release the claim of trial %s: %s", trial_id, e)

    def _complete(self, trial, trial_id: str, attempts: int) -> None:
        if (why := self.skips.pop(trial_id, None)) is not None:
            self.summary.elsewhere[why] += 1
            self.settled.add(trial_id)
            if self.on_stored is not None:
                self.on_stored(trial_id, None, None, None)
            if self.progress is not None:
                self.progress.trial_stopped(trial_id)
            return
        if (failure := self.failures.pop(trial_id, None)) is not None:
            self._write(trial, failure, attempts)
            return
        config = self.configs[trial_id]
        seen = self.outcomes.get(trial_id)
        if seen is None or seen.epoch < config.epochs:
            # Stopped before its last epoch (the sweep was halted or interrupted): not a
            # result. Leaving it out of the store makes the next run train it again.
            self.outcomes.pop(trial_id, None)
            self._release(trial_id)
            if self.progress is not None:
                self.progress.trial_stopped(config.trial_id)
            return
        self._write(trial, TrialOutcome(trial_id), attempts)

    def on_trial_error(self, iteration, trials, trial, **info):
        # Tune counted this failure already: every attempt failed. A pack member that
        # another driver holds, or that reported its own failure (it diverged), keeps that
        # outcome: writing Tune's error over it could replace another driver's ok row.
        error = _error_text(trial)
        if self.watchdog is not None:
            self.watchdog.finished(trial)
            if (limit := self.watchdog.ended.get(trial.trial_id)) is not None:
                self.summary.stalled += 1
                error = stalled_text(limit)
        for trial_id in self.members(trial):
            if trial_id in self.skips or trial_id in self.failures:
                self._complete(trial, trial_id, trial.num_failures)
            else:
                self._write(trial, TrialOutcome(trial_id, Status.FAILED, error=error),
                            trial.num_failures)


class HaltStopper(tune.Stopper):
    """Stops the whole sweep once its ``StoreWriter`` says it must (see ``halt``)."""

    def __init__(self, writer: StoreWriter):
        self.writer = writer

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.writer.halt is not None


def _drop_checkpoint(trial) -> None:
    """A stored trial is never resumed: free its checkpoint (model + optimizer, ~1.3 GB for
    bert-base) in Tune's storage."""
    checkpoint = trial.checkpoint
    if checkpoint is None:
        return
    try:
        checkpoint.filesystem.delete_dir(checkpoint.path)
    except OSError as e:  # already gone, or storage unreachable: only disk space is at stake
        log.warning("could not delete checkpoint %s: %s", checkpoint.path, e)


def _identity(folder: Path) -> tuple[int, int] | None:
    """(device, inode) of ``folder``, None where it does not exist."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _error_text(trial) -> str:
    path = getattr(trial, "error_file", None)
    if path and os.path.exists(path):
        text = Path(path).read_text()
        if memory.KILLED_TEXT in text:  # Ray's message runs on with a table of processes
            return memory.KILLED
        lines = [ln for ln in text.splitlines() if ln.strip()]
        # The exception line is last; keep a little context for debugging.
        return "\n".join(lines[-3:])
    return "trial failed (no error file)"
