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
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ray import tune

from reinit_tune import sanity, store
from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.model.shape import ModelShape
from reinit_tune.sweep import cluster, cost, loggers, preflight
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

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    @property
    def not_finished(self) -> int:
        return self.total - self.skipped - self.ok - self.failed - self.reused

    def __str__(self) -> str:
        if self.dry_run:
            return f"dry run: {self.total - self.skipped} of {self.total} trials would run"
        speed = (
            f"; {sum(self.examples_per_s) / len(self.examples_per_s):.1f} train examples/s per "
            "trial (mean)" if self.examples_per_s else ""
        )
        rerun = ("\nrerun the same command to run the unfinished trials (stored ones are "
                 "skipped)" if self.not_finished else "")
        warned = "".join(f"\nwarning: {w}" for w in self.warnings)
        failures = "".join(f"\nfailed ({n} trial{'s' * (n > 1)}): {text}"
                           for text, n in self.errors.most_common(5))
        stopped = f"\n{self.stopped}" if self.stopped else ""
        return (
            f"sweep {self.name}: {self.total} trials: {self.ok} ran ok, {self.failed} failed, "
            f"{self.skipped} already in the store (skipped), "
            + (f"{self.reused} copied from another family's identical runs, "
               if self.reused else "") +
            f"{self.not_finished} not finished; "
            f"{self.retries} retries; wall time {self.wall_time_s:.0f} s{speed}\nresults: "
            f"{self.results_dir}/{store.TRIALS}/ and {self.results_dir}/{store.EPOCHS}/ "
            f"(reinit_tune.store.load_trials('{self.results_dir}'))"
            f"{failures}{stopped}{rerun}{warned}"
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
                 packs: dict[str, list[str]] | None = None):
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
        # Keyed by epoch: a retried trial that resumes re-reports epochs already seen.
        self.reports[key][int(result["epoch"])] = dict(result)

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.summary.retries += 1

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

    def _complete(self, trial, trial_id: str, attempts: int) -> None:
        if (failure := self.failures.pop(trial_id, None)) is not None:
            self._write(trial, "error", failure, attempts, trial_id)
            return
        config = self.configs[trial_id]
        if max(self.reports.get(trial_id, {}), default=0) < config.epochs:
            # Stopped before its last epoch (the sweep was halted or interrupted): not a
            # result. Leaving it out of the store makes the next run train it again.
            self.reports.pop(trial_id, None)
            if self.progress is not None:
                self.progress.trial_stopped(config.trial_id)
            return
        self._write(trial, "ok", None, attempts, trial_id)

    def on_trial_error(self, iteration, trials, trial, **info):
        # Tune counted this failure already: every attempt failed.
        for trial_id in self.members(trial):
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
        lines = [ln for ln in Path(path).read_text().splitlines() if ln.strip()]
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
    cluster.warn_if_storage_is_local(plan.storage, alive, scalable)


def param_space(trials: dict[str, dict[str, Any]]) -> dict:
    """Tune's search space: one grid point per trial, ``{"trial": {"trial_id": ..., <axes>}}``
    with the trial's experiment axes (``trials``: id -> ``progress.axes``) as real values,
    so Tune's table, ``ResultGrid.get_dataframe()`` (``config/trial/k``...), logger callbacks
    (TensorBoard hparams ``trial/k``...) and the dashboard show them. One grid value per
    trial keeps the axes of a trial together (a cartesian product of axes would be another
    grid)."""
    return {"trial": tune.grid_search([{"trial_id": tid, **values}
                                       for tid, values in trials.items()])}


def trial_id_of(trial) -> str | None:
    """Our trial id of a Tune trial (from its config; see ``param_space``)."""
    return (trial.config.get("trial") or {}).get("trial_id")


class TrialNames:
    """Tune's ``trial_name_creator``/``trial_dirname_creator``: a trial named by its axes
    (``progressive_rte_n500_s3_k4``), looked up by its trial id (the one grid value Tune
    has resolved when it names a trial)."""

    def __init__(self, trials: dict[str, dict[str, Any]]):
        self.names = {tid: trial_name(values) for tid, values in trials.items()}

    def name(self, trial) -> str:
        return self.names.get(trial_id_of(trial), "trial")

    def dirname(self, trial) -> str:
        return f"{self.name(trial)}_{trial.trial_id}"


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
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, configs=todo, runtime=runtime) if pack_size == 1
        else tune.with_parameters(run_pack, packs=packs, runtime=runtime),
        {"cpu": options.resources.cpus_per_trial, "gpu": options.resources.gpus_per_trial},
    )
    progress = None if options.verbose else Progress(trial_axes, cost.trial_estimates(
        list(todo.values()), plan.shapes, plan.data_dir,
        every_epoch=options.evaluate == "every-epoch"), out=out)
    writer = StoreWriter(plan.results_dir, todo, summary, num_layers, progress=progress,
                         source=source_version(),
                         packs={pid: [c.trial_id for c in members]
                                for pid, members in packs.items() if len(members) > 1})
    names = TrialNames(grid)
    run_name = f"{plan.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    tuner = tune.Tuner(
        trainable,
        param_space=param_space(grid),
        tune_config=tune.TuneConfig(reuse_actors=True, trial_name_creator=names.name,
                                    trial_dirname_creator=names.dirname),
        run_config=tune.RunConfig(
            name=run_name,
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
    if "tensorboard" in options.loggers:
        log.info("TensorBoard: tensorboard --logdir %s/%s", str(plan.storage).rstrip("/"),
                 run_name)
    start = time.perf_counter()
    tuner.fit()
    summary.wall_time_s = time.perf_counter() - start
    summary.stopped = writer.halt
    try:  # past store.COMPACT_AFTER_FILES per-trial files: every later read stays fast
        store.compact_if_many(plan.results_dir)
    except OSError as e:  # the rows are safe in their per-trial files; compact later
        log.warning("could not compact the results store %s: %s", plan.results_dir, e)
    trials = store.load_trials(plan.results_dir)
    summary.warnings = sanity.warnings(
        trials[trials["trial_id"].isin({c.trial_id for c in plan.configs})])
    return summary


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
