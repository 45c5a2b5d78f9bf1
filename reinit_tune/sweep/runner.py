"""Launching a planned sweep on Ray Tune and writing every trial to the store.

Trials run as Tune function trainables (``tune.with_resources``, ``tune.with_parameters``,
reused actors, ``FailureConfig`` retries); a driver-side ``StoreWriter`` callback writes each
finished or failed trial to the Parquet store, so results land on the driver's disk whatever
node ran the trial. ``run_sweep`` plans, estimates (dry run) and launches in one call. With
``--pack-size`` above 1 a Tune trial trains a pack of trials (``reinit_tune.sweep.packs``)
and the writer stores each member as its own trial.

Resuming needs no state besides the store: a rerun of the same command skips every trial
stored "ok" (identity = config hash) and runs the rest, so a driver killed by SIGINT or
SIGKILL loses only the trials it was running. Within one run, a trial whose worker dies is
retried by Tune from its last checkpoint (``reinit_tune.sweep.trial``).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ray import tune
from ray.tune.search import Searcher

from reinit_tune import sanity, store
from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.model.shape import ModelShape
from reinit_tune.sweep import claims, cluster, cost, loggers, memory, preflight
from reinit_tune.sweep.options import RunOptions
from reinit_tune.sweep.packs import MEMBER, pack_note, plan_packs, resolve_pack_size, run_pack
from reinit_tune.sweep.plan import Plan, describe, make_plan
from reinit_tune.sweep.progress import Progress, axes, trial_name
from reinit_tune.sweep.trial import run_trial

log = logging.getLogger("reinit_tune")


@dataclass
class SweepSummary:
    name: str
    results_dir: Path
    total: int
    skipped: int = 0
    ok: int = 0
    reused: int = 0  # copied from a stored run of the same config under another family
    retries: int = 0
    wall_time_s: float = 0.0
    examples_per_s: list[float] = field(default_factory=list)
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)  # results that are not really results
    errors: Counter[str] = field(default_factory=Counter)  # failure message -> trials
    stopped: str | None = None  # why the sweep stopped before running every trial
    # trials left to other drivers on the same store (reinit_tune.sweep.claims): why -> count
    elsewhere: Counter[str] = field(default_factory=Counter)

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    @property
    def stored(self) -> int:
        """Trials of this sweep's grid the store holds now (this run's and earlier ones)."""
        return self.skipped + self.ok + self.failed + self.reused

    @property
    def not_finished(self) -> int:
        return (self.total - self.skipped - self.ok - self.failed - self.reused
                - sum(self.elsewhere.values()))

    def __str__(self) -> str:
        if self.dry_run:
            return f"dry run: {self.total - self.skipped} of {self.total} trials would run"
        speed = (
            f"; {sum(self.examples_per_s) / len(self.examples_per_s):.1f} train examples/s per "
            "trial (mean)" if self.examples_per_s else ""
        )
        rerun = (f"\n{self.stored} stored, {self.not_finished} not finished; rerun the same "
                 "command to resume (stored trials are skipped)" if self.not_finished else "")
        warned = "".join(f"\nwarning: {w}" for w in self.warnings)
        failures = "".join(f"\nfailed ({n} trial{'s' * (n > 1)}): {text}"
                           for text, n in self.errors.most_common(5))
        stopped = f"\n{self.stopped}" if self.stopped else ""
        others = "".join(f"\n{n} trial{'s' * (n > 1)} {why}"
                         for why, n in sorted(self.elsewhere.items()))
        if any(why.startswith("being trained") for why in self.elsewhere):
            others += ("\nrerun the same command after the other driver finishes to pick up "
                       "any trial it did not finish")
        return (
            f"sweep {self.name}: {self.total} trials: {self.ok} ran ok, {self.failed} failed, "
            f"{self.skipped} already in the store (skipped), "
            + (f"{self.reused} copied from another family's identical runs, "
               if self.reused else "") +
            (f"{sum(self.elsewhere.values())} left to other drivers on this store, "
             if self.elsewhere else "") +
            f"{self.not_finished} not finished; "
            f"{self.retries} retries; wall time {self.wall_time_s:.0f} s{speed}\nresults: "
            f"{self.results_dir}/{store.TRIALS}/ and {self.results_dir}/{store.EPOCHS}/ "
            f"(reinit_tune.store.load_trials('{self.results_dir}'))"
            f"{failures}{stopped}{others}{rerun}{warned}"
        )


# -- store writer -------------------------------------------------------------------------
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
        self.reports: dict[str, dict[int, dict]] = defaultdict(dict)
        self.failures: dict[str, str] = {}  # trial_id -> reported deterministic failure
        self.halt: str | None = None  # why the sweep must stop, once it must
        self.claims = claim_context  # released once a trial is stored or stops
        self.skips: dict[str, str] = {}  # trial_id -> why another driver has it
        # trial ids this run is done with (stored, or left to another driver): what a
        # restarted or next chunk of the sweep must not run again
        self.settled: set[str] = set()

    def members(self, trial) -> list[str]:
        """Our trial ids of what a Tune trial runs: a pack's members, else the trial."""
        return self.packs.get(trial_id_of(trial)) or [trial_id_of(trial)]

    def on_trial_start(self, iteration, trials, trial, **info):
        if self.progress is not None:
            for trial_id in self.members(trial):
                self.progress.trial_started(trial_id)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        key = result.get(MEMBER) or trial_id_of(trial)  # a pack reports for each member
        if "failed" in result:
            self.failures[key] = result["failed"]
            return
        if claims.SKIPPED in result:
            self.skips[key] = result[claims.SKIPPED]
            return
        # Keyed by epoch: a retried trial that resumes re-reports epochs already seen.
        self.reports[key][int(result["epoch"])] = dict(result)

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.summary.retries += 1
        # one line instead of Tune's traceback (TUNE_PRINT_ALL_TRIAL_ERRORS=0 in ``launch``)
        log.warning("trial %s failed on its worker (%s); Tune runs it again (retry %d of "
                    "--max-failures)", tune_trial_name(trial),
                    _error_text(trial).splitlines()[-1][:200], trial.num_failures)

    def _write(self, trial, status: str, error: str | None, attempts: int,
               trial_id: str | None = None) -> None:
        config = self.configs[trial_id or trial_id_of(trial)]
        reports = list(self.reports.pop(config.trial_id, {}).values())
        num_layers = reports[-1]["num_layers"] if reports else self.num_layers[config.model]
        row = store.trial_row(config, reports, num_layers=num_layers, status=status,
                              error=error, attempts=attempts, **self.source)
        final = max(reports, key=lambda r: r["epoch"], default={})
        try:
            if status == "ok" and final.get("similarity_rows"):  # before the trial row
                rows = json.loads(final["similarity_rows"])
                store.write_similarity(self.results_dir, config.trial_id, rows)
            if status == "ok" and (steps := store.step_rows(config.trial_id, reports)):
                store.write_steps(self.results_dir, config.trial_id, steps)
            store.write_trial(self.results_dir, row, store.epoch_rows(config, reports))
        except OSError as e:
            self.halt = self.halt or (
                f"cannot write to the results store {self.results_dir}: {e}. Stopped the "
                "sweep so no more trials train for nothing; free disk space or make the "
                "folder writable, then rerun the same command (stored trials are skipped)")
            log.error("%s", self.halt)
            return
        self._release(config.trial_id)
        self.settled.add(config.trial_id)
        if status == "ok":
            self.summary.ok += 1
            self.summary.examples_per_s.append(row["train_examples_per_s"])
            detail = f"{config.task_spec.primary} {row['score']:.4f}"
        else:
            self.summary.errors[error or ""] += 1
            self._fail_fast(error or "")
            detail = (error or "").splitlines()[-1][:100] if error else ""
        if self.progress is not None:
            shown = "diverged" if (error or "").startswith("diverged:") else status
            self.progress.trial_finished(config.trial_id, shown, detail)
        _drop_checkpoint(trial)

    def _fail_fast(self, error: str) -> None:
        if self.summary.ok or error.startswith("diverged:") or self.halt:
            return
        if self.summary.errors[error] >= 2:
            self.halt = (f"stopped the sweep: its first {self.summary.failed} trials failed, "
                         f"{self.summary.errors[error]} of them with the same error, so the "
                         "others would too. Fix what it says and rerun the same command")

    def on_trial_complete(self, iteration, trials, trial, **info):
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
            if self.progress is not None:
                self.progress.trial_stopped(trial_id)
            return
        if (failure := self.failures.pop(trial_id, None)) is not None:
            self._write(trial, "error", failure, attempts, trial_id)
            return
        config = self.configs[trial_id]
        if max(self.reports.get(trial_id, {}), default=0) < config.epochs:
            # Stopped before its last epoch (the sweep was halted or interrupted): not a
            # result. Leaving it out of the store makes the next run train it again.
            self.reports.pop(trial_id, None)
            self._release(trial_id)
            if self.progress is not None:
                self.progress.trial_stopped(config.trial_id)
            return
        self._write(trial, "ok", None, attempts, trial_id)

    def on_trial_error(self, iteration, trials, trial, **info):
        # Tune counted this failure already: every attempt failed. A pack member that
        # another driver holds, or that reported its own failure (it diverged), keeps that
        # outcome: writing Tune's error over it could replace another driver's ok row.
        for trial_id in self.members(trial):
            if trial_id in self.skips or trial_id in self.failures:
                self._complete(trial, trial_id, trial.num_failures)
            else:
                self._write(trial, "error", _error_text(trial), trial.num_failures, trial_id)


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


# -- running ------------------------------------------------------------------------------
def connect(plan: Plan) -> None:
    """Join or start Ray and check that the cluster can place one trial of ``plan`` (raises
    ``InputError`` otherwise: nothing has started yet). Hub models must be cached or
    downloadable first, and so must hub data (a dry run needs neither)."""
    problems = [p for m in sorted({c.model for c in plan.todo})
                for p in preflight.check_hub_model(m)]
    problems += preflight.check_hub_data(
        {t for c in plan.todo for t in (c.task, c.intermediate_task) if t}, plan.data_dir)
    if problems:
        raise InputError("cannot start the sweep:\n  - " + "\n  - ".join(problems))
    cluster.connect_ray()
    alive, scalable = cluster.inventory()
    resources = plan.options.resources
    cluster.check_resources(resources.cpus_per_trial, resources.gpus_per_trial, alive, scalable)
    cluster.check_memory(*memory.largest_trial(
        list(plan.todo), plan.shapes, use_gpu=resources.gpus_per_trial > 0,
        data_dir=plan.data_dir, similarity=plan.options.similarity is not None),
        alive, scalable)
    cluster.warn_if_storage_is_local(plan.storage, alive, scalable)


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


def pending_trials() -> int:
    """How many trials Tune keeps queued ahead of free slots: what it gives its own variant
    generator (at least 200, so an autoscaling cluster sees the demand; 1.1 per cluster CPU
    beyond) instead of the 1 it gives any other searcher."""
    import ray

    return max(200, int(ray.cluster_resources().get("CPU", 1.0) * 1.1))


def named_trainable(function, name: str) -> type:
    """Tune's class for a function trainable, named: the dashboard's Actors page lists a
    trial worker by its class, which Tune calls ``ImplicitFunc`` for every function."""
    from ray.tune.trainable.function_trainable import wrap_function

    trainable = wrap_function(function)
    trainable.__name__ = trainable.__qualname__ = name
    return trainable


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


def source_version() -> dict[str, Any]:
    """``git_commit`` and ``git_dirty`` of the reinit-tune source this process runs (None
    where it is not a git checkout, e.g. an installed wheel)."""
    root = Path(__file__).resolve().parents[2]
    try:
        # This package's own files must be tracked there: a wheel installed inside some
        # other checkout would otherwise report that checkout's commit.
        subprocess.run(["git", "-C", str(root), "ls-files", "--error-unmatch",
                        "reinit_tune/__init__.py"], capture_output=True, timeout=10, check=True)
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                                capture_output=True, text=True, timeout=10, check=True)
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                 "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": commit.stdout.strip(), "git_dirty": bool(status.stdout.strip())}


def launch(plan: Plan, out: TextIO | None = None) -> SweepSummary:
    """Run every trial of ``plan`` not yet in the store through Ray Tune; return the counts.
    One line per finished trial goes to ``out`` (Tune's own table instead with
    ``plan.options.verbose``)."""
    summary = SweepSummary(plan.name, plan.results_dir, total=len(plan.configs),
                           skipped=plan.skipped)
    by_id = {c.trial_id: c for c in plan.configs}
    for trial_id, source in plan.reuse.items():
        store.reuse_trial(plan.results_dir, source, by_id[trial_id])
        summary.reused += 1
    if not plan.todo:
        return summary
    # now, before any trial: a row stored later was stored by another driver
    claim_context = claims.Context(str(plan.results_dir))
    connect(plan)
    store.remove_partial_files(plan.results_dir)
    options = plan.options
    todo = {c.trial_id: c for c in plan.todo}
    runtime = options.runtime(plan.data_dir, plan.results_dir)
    num_layers = {m: s.num_layers for m, s in plan.shapes.items()}
    trial_axes = {tid: axes(c, num_layers[c.model]) for tid, c in todo.items()}
    pack_size = resolve_pack_size(options.pack_size, list(plan.todo), plan.shapes,
                                  options.resources.gpus_per_trial)
    if (note := pack_note(pack_size, runtime)) is not None:
        log.warning("%s", note)
        pack_size = 1
    # --pack-size 1 runs the unpacked trainable and grid exactly as before packs existed
    packs, grid = plan_packs(list(plan.todo), pack_size, trial_axes)
    needs = memory.tune_trial_bytes(packs, plan.shapes,
                                    use_gpu=options.resources.gpus_per_trial > 0,
                                    data_dir=plan.data_dir,
                                    similarity=runtime.similarity is not None)
    if pack_size > 1 and not memory.fits(max(needs.values()), *cluster.inventory()):
        need, what = memory.largest(needs, packs)
        log.warning("--pack-size %d: %s needs an estimated %s of memory, more than any "
                    "node has; running unpacked", pack_size, what, memory.gb(need))
        pack_size = 1
        packs, grid = plan_packs(list(plan.todo), 1, trial_axes)
        needs = memory.tune_trial_bytes(packs, plan.shapes,
                                        use_gpu=options.resources.gpus_per_trial > 0,
                                        data_dir=plan.data_dir,
                                        similarity=runtime.similarity is not None)
    trainable = named_trainable(tune.with_resources(
        tune.with_parameters(run_trial, configs=todo, runtime=runtime, claims=claim_context)
        if pack_size == 1 else tune.with_parameters(run_pack, packs=packs, runtime=runtime,
                                                    claims=claim_context),
        memory.resources(options.resources.cpus_per_trial, options.resources.gpus_per_trial,
                         needs),
    ), "ReinitTuneTrial" if pack_size == 1 else "ReinitTunePack")
    progress = None if options.verbose else Progress(trial_axes, cost.trial_estimates(
        list(todo.values()), plan.shapes, plan.data_dir,
        every_epoch=options.evaluate == "every-epoch"), out=out)
    writer = StoreWriter(plan.results_dir, todo, summary, num_layers, progress=progress,
                         source=source_version(),
                         packs={pid: [c.trial_id for c in members]
                                for pid, members in packs.items() if len(members) > 1},
                         claim_context=claim_context)
    # its own folder per driver: two drivers started in one second must not share one
    run_name = f"{plan.name}-{time.strftime('%Y%m%d-%H%M%S')}-{claim_context.owner.token[:6]}"

    def tuner(chunk: list[str], part: int) -> tune.Tuner:
        return tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(search_alg=TrialList({pid: grid[pid] for pid in chunk}),
                                        num_samples=len(chunk), reuse_actors=True,
                                        trial_name_creator=tune_trial_name,
                                        trial_dirname_creator=tune_trial_dirname),
            run_config=tune.RunConfig(
                name=run_name if part == 0 else f"{run_name}-part{part + 1}",
                storage_path=plan.storage,
                failure_config=tune.FailureConfig(max_failures=options.max_failures),
                checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
                callbacks=[writer, *loggers.callbacks(options.loggers, plan.name),
                           *options.callbacks],
                stop=HaltStopper(writer),
                verbose=1 if options.verbose else 0,
            ),
        )

    # Tune's newer console output prints an experiment box and, with TensorBoard logging, a
    # hint naming a temporary staging folder even at verbose 0; its classic reporter prints
    # nothing there, which leaves our one line per trial (--verbose: Tune's table)
    os.environ["RAY_AIR_NEW_OUTPUT"] = "1" if options.verbose else "0"
    # a trial whose worker fails gets one line from ``StoreWriter`` instead of a traceback;
    # the whole error stays in the trial's error.txt in Tune's folder
    os.environ["TUNE_PRINT_ALL_TRIAL_ERRORS"] = "1" if options.verbose else "0"
    # Tune queues 1 trial ahead for a searcher (``TrialList``), pending_trials() for its own
    # variant generator; the searcher's trials are the same grid, so queue as for a grid
    os.environ.setdefault("TUNE_MAX_PENDING_TRIALS_PG", str(pending_trials()))
    size = chunk_size(options.resources.cpus_per_trial, options.resources.gpus_per_trial)
    if "tensorboard" in options.loggers:
        log.info("TensorBoard: tensorboard --logdir %s/%s", str(plan.storage).rstrip("/"),
                 run_name if len(grid) <= size else "")
    start = time.perf_counter()

    def head_lost(address: str) -> None:
        summary.wall_time_s = time.perf_counter() - start
        summary.stopped = (
            f"lost the Ray cluster's head node (its GCS at {address} stopped answering): the "
            "sweep cannot go on; restart the cluster first")
        print(summary, file=out or sys.stdout, flush=True)
        sys.stderr.flush()
        # what is left of a local instance this command started goes with it; a shutdown
        # that waits on the dead GCS is given a few seconds, not Ray's own 60-s timeout
        stopping = threading.Thread(target=cluster.shutdown_ray, daemon=True)
        stopping.start()
        stopping.join(timeout=5)
        os._exit(1)

    heartbeat = claims.Heartbeat(claim_context)
    watch = cluster.HeadWatch(head_lost)
    try:
        fit_in_chunks(tuner, packs, list(grid), size, writer, summary, options.max_failures)
    finally:
        watch.stop()
        heartbeat.stop()
    summary.wall_time_s = time.perf_counter() - start
    summary.stopped = writer.halt or summary.stopped
    try:  # past store.COMPACT_AFTER_FILES per-trial files: every later read stays fast
        store.compact_if_many(plan.results_dir)
    except OSError as e:  # the rows are safe in their per-trial files; compact later
        log.warning("could not compact the results store %s: %s", plan.results_dir, e)
    # only what the sanity checks read, of the ok rows: every column of every row of a large
    # store costs seconds and hundreds of MB after each sweep
    trials = store.load_trials(plan.results_dir, status="ok", columns=_SANITY_COLUMNS)
    summary.warnings = sanity.warnings(
        trials[trials["trial_id"].isin({c.trial_id for c in plan.configs})])
    return summary


def chunk_size(cpus_per_trial: float, gpus_per_trial: float) -> int:
    """Tune trials per ``Tuner.fit``: at least ``MIN_CHUNK_TRIALS``, and 20 rounds of the
    cluster's trial slots, so the slots idle while a chunk drains are a few percent of it.
    Tune's controller walks every trial it holds on each step, so one ``fit`` of 10^4 trials
    costs 2.6x more driver time per trial than one of 100 (benchmarks/RESULTS.md, "the sweep
    driver at scale"); chunks of about 10^3 keep it at the 10^3 cost."""
    import ray

    resources = ray.cluster_resources()
    slots = (resources.get("GPU", 0) / gpus_per_trial if gpus_per_trial > 0
             else resources.get("CPU", 1) / cpus_per_trial)
    return max(MIN_CHUNK_TRIALS, 20 * int(slots))


MIN_CHUNK_TRIALS = 1000


def fit_in_chunks(tuner, packs: dict[str, list[TrialConfig]], pending: list[str], size: int,
                  writer: StoreWriter, summary: SweepSummary, max_failures: int) -> None:
    """Run the Tune trials ``pending`` (grid ids) ``size`` at a time, one ``Tuner.fit`` each
    (``tuner(chunk, part)`` builds it), until all are settled or the sweep stops.

    A chunk that returns with trials unsettled was stopped (a halt, Ctrl+C, a signal): no
    further chunk starts. Ray's memory monitor killing a worker, or a worker node dying,
    ends ``fit`` itself (Tune's actor manager raises a RuntimeError for these instead of
    failing the trial): an infrastructure failure, so the chunk's unsettled trials run again,
    up to ``max_failures`` times in all, each counted as a retry."""
    part = restarts = 0
    while pending:
        chunk, pending = pending[:size], pending[size:]
        try:
            tuner(chunk, part).fit()
        except RuntimeError as e:
            if not memory.is_lost_worker(e):
                raise
            what = ("killed by Ray's memory monitor (its node ran low on memory)"
                    if memory.is_memory_kill(e) else "lost with its node")
            if restarts >= max_failures:
                summary.stopped = (
                    f"stopped: a trial worker was {what} {restarts + 1} times (--max-failures "
                    f"{max_failures}). Lower --batch-size or --max-seq-length, or give each "
                    "trial more memory (fewer trials per node), then rerun the same command")
                log.error("%s", summary.stopped)
                return
            restarts += 1
            summary.retries += 1
            log.warning("a trial worker was %s: running this part of the sweep's unfinished "
                        "trials again (%d of --max-failures %d)", what, restarts, max_failures)
            pending = [*_unsettled(chunk, packs, writer), *pending]
            part += 1
            continue
        part += 1
        if writer.halt or _unsettled(chunk, packs, writer):
            return


def _unsettled(chunk: list[str], packs: dict[str, list[TrialConfig]],
               writer: StoreWriter) -> list[str]:
    return [pid for pid in chunk
            if any(c.trial_id not in writer.settled for c in packs[pid])]


_SANITY_COLUMNS = ["trial_id", "status", "experiment", "task", "train_size", "train_fraction",
                   "model", "metric", "score", "majority_score", "config_json"]


def run_sweep(
    configs: list[TrialConfig],
    options: RunOptions | None = None,
    *,
    shapes: dict[str, ModelShape] | None = None,
    dry_run: bool = False,
    calibrate: bool = False,
    out: TextIO | None = None,
) -> SweepSummary:
    """Plan ``configs``, print the grid, and run what the store lacks (or, with ``dry_run``,
    print the estimated cost and run nothing; ``calibrate`` measures the per-token cost on
    this device first). Returns the counts of what happened."""
    out = out or sys.stdout
    plan = make_plan(configs, options or RunOptions(), shapes)
    print(describe(plan.configs, plan.data_dir, plan.options.allow_subset), file=out)
    if plan.skipped:
        print(f"{plan.skipped} trials already in {plan.results_dir}: skipped", file=out)
    if dry_run:
        summary = SweepSummary(plan.name, plan.results_dir, total=len(plan.configs),
                               skipped=plan.skipped, dry_run=True)
        print(summary, file=out)
        print(cost.sweep_estimate(list(plan.todo), plan.shapes, plan.data_dir,
                                  calibrate_here=calibrate,
                                  use_gpu=plan.options.resources.gpus_per_trial > 0,
                                  every_epoch=plan.options.evaluate == "every-epoch"), file=out)
        return summary
    summary = launch(plan, out)
    print(summary, file=out)
    return summary
