"""Launching a planned sweep on Ray Tune: the trainable, one ``Tuner`` per chunk of trials,
and what the driver does around them.

Trials run as Tune function trainables (``tune.with_resources``, ``tune.with_parameters``,
reused actors, ``FailureConfig`` retries) that reach Tune through ``TrialList``
(``reinit_tune.sweep.searcher``); the driver-side ``StoreWriter`` (``reinit_tune.sweep.writer``)
writes each finished or failed trial to the Parquet store, so results land on the driver's
disk whatever node ran the trial. With ``--pack-size`` above 1 a Tune trial trains a pack of
trials (``reinit_tune.sweep.packs``) and the writer stores each member as its own trial.
Within one run, a trial whose worker dies is retried by Tune from its last checkpoint
(``reinit_tune.sweep.trial``); a ``Tuner.fit`` ended by a lost worker runs its unsettled
trials again (``fit_in_chunks``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from ray import tune

from reinit_tune import sanity, store
from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.sweep import claims, cluster, cost, loggers, memory, preflight, seeds, stalls
from reinit_tune.sweep.packs import pack_note, plan_packs, resolve_pack_size, run_pack
from reinit_tune.sweep.plan import Plan
from reinit_tune.sweep.progress import Progress, axes
from reinit_tune.sweep.searcher import (
    SeedSearcher,
    TrialList,
    tune_trial_dirname,
    tune_trial_name,
)
from reinit_tune.sweep.source import source_version
from reinit_tune.sweep.summary import SweepSummary
from reinit_tune.sweep.trial import run_trial
from reinit_tune.sweep.writer import HaltStopper, StoreWriter

log = logging.getLogger("reinit_tune")


def connect(plan: Plan, job: cluster.JobInfo | None = None) -> None:
    """Join or start Ray (as ``job``, the name the dashboard shows) and check that the
    cluster can place one trial of ``plan`` (raises ``InputError`` otherwise: nothing has
    started yet). Hub models must be cached or downloadable first, and so must hub data (a
    dry run needs neither)."""
    problems = [p for m in sorted({c.model for c in plan.todo})
                for p in preflight.check_hub_model(m)]
    problems += preflight.check_hub_data(
        {t for c in plan.todo for t in (c.task, c.intermediate_task) if t}, plan.data_dir)
    if problems:
        raise InputError("cannot start the sweep:\n  - " + "\n  - ".join(problems))
    cluster.connect_ray(job)
    alive, scalable = cluster.inventory()
    resources = plan.options.resources
    cluster.check_resources(resources.cpus_per_trial, resources.gpus_per_trial, alive, scalable)
    cluster.check_memory(*memory.largest_trial(
        list(plan.todo), plan.shapes, use_gpu=resources.gpus_per_trial > 0,
        data_dir=plan.data_dir, similarity=plan.options.similarity is not None),
        alive, scalable)
    cluster.warn_if_storage_is_local(plan.storage, alive, scalable)


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


def launch(plan: Plan, out: TextIO | None = None, ray_log: Path | None = None) -> SweepSummary:
    """Run every trial of ``plan`` not yet in the store through Ray Tune; return the counts.
    Ray must be connected first (``connect``) where anything is left to run. One line per
    finished trial goes to ``out`` (Tune's own table instead with ``plan.options.verbose``);
    ``ray_log``: where Ray's own output goes (``reinit_tune.sweep.console``).
    """
    summary = SweepSummary(plan.name, plan.results_dir, total=len(plan.configs),
                           skipped=plan.skipped, not_needed=plan.not_needed, ray_log=ray_log)
    by_id = {c.trial_id: c for c in plan.configs}
    for trial_id, source in plan.reuse.items():
        store.reuse_trial(plan.results_dir, source, by_id[trial_id])
        summary.reused += 1
    if not plan.todo:
        if plan.groups:
            summary.seeds = seeds.stored_report(plan.groups, _group_scores(plan),
                                                plan.options.seeds)
        return summary
    if ray_log is not None:
        print(f"Ray's and Tune's own output: {ray_log}", file=out or sys.stdout, flush=True)
    # now, before any trial: a row stored later was stored by another driver
    claim_context = claims.Context(str(plan.results_dir))
    store.remove_partial_files(plan.results_dir)
    options = plan.options
    todo = {c.trial_id: c for c in plan.todo}
    beats = stalls.board()
    runtime = dataclasses.replace(options.runtime(plan.data_dir, plan.results_dir), beats=beats)
    num_layers = {m: s.num_layers for m, s in plan.shapes.items()}
    trial_axes = {tid: axes(c, num_layers[c.model]) for tid, c in todo.items()}
    gpus_per_trial = options.resources.gpus_per_trial
    gpus = cluster.gpu_inventory()[0] if gpus_per_trial > 0 else 0.0
    pack_size = resolve_pack_size(options.pack_size, list(plan.todo), plan.shapes,
                                  gpus_per_trial, gpus=max(gpus, 1.0))
    if (note := pack_note(pack_size, runtime)) is not None:
        log.warning("%s", note)
        pack_size = 1
    # seeds on demand: a pack holds one group's trials of one seed, so a group that closes
    # stops training with its next pack, never inside another group's
    split = seeds.group_and_seed(plan.groups) if plan.groups else None
    # --pack-size 1 runs the unpacked trainable and grid exactly as before packs existed
    packs, grid = plan_packs(list(plan.todo), pack_size, trial_axes, split)
    needs = memory.tune_trial_bytes(packs, plan.shapes, use_gpu=gpus_per_trial > 0,
                                    data_dir=plan.data_dir,
                                    similarity=runtime.similarity is not None)
    if pack_size > 1 and not memory.fits(max(needs.values()), *cluster.inventory()):
        need, what = memory.largest(needs, packs)
        log.warning("--pack-size %d: %s needs an estimated %s of memory, more than any "
                    "node has; running unpacked", pack_size, what, memory.gb(need))
        pack_size = 1
        packs, grid = plan_packs(list(plan.todo), 1, trial_axes, split)
        needs = memory.tune_trial_bytes(packs, plan.shapes, use_gpu=gpus_per_trial > 0,
                                        data_dir=plan.data_dir,
                                        similarity=runtime.similarity is not None)
    print(devices_line(gpus_per_trial, gpus, packs,
                       trial_slots(options.resources.cpus_per_trial, gpus_per_trial)),
          file=out or sys.stdout, flush=True)
    trainable = named_trainable(tune.with_resources(
        tune.with_parameters(run_trial, configs=todo, runtime=runtime, claims=claim_context)
        if pack_size == 1 else tune.with_parameters(run_pack, packs=packs, runtime=runtime,
                                                    claims=claim_context),
        memory.resources(options.resources.cpus_per_trial, gpus_per_trial, needs),
    ), "ReinitTuneTrial" if pack_size == 1 else "ReinitTunePack")
    estimates = cost.trial_estimates(list(todo.values()), plan.shapes, plan.data_dir,
                                     every_epoch=options.evaluate == "every-epoch")
    progress = None if options.verbose else Progress(trial_axes, estimates, out=out)
    writer = StoreWriter(plan.results_dir, todo, summary, num_layers, progress=progress,
                         source=source_version(),
                         packs={pid: [c.trial_id for c in members]
                                for pid, members in packs.items() if len(members) > 1},
                         claim_context=claim_context)
    # its own folder per driver: two drivers started in one second must not share one
    run_name = f"{plan.name}-{time.strftime('%Y%m%d-%H%M%S')}-{claim_context.owner.token[:6]}"
    searchers: list[SeedSearcher] = []  # seeds on demand: one per Tuner.fit, the last one's

    def search(chunk: list[str]) -> TrialList | SeedSearcher:
        if options.seeds is None:
            return TrialList({pid: grid[pid] for pid in chunk})
        # a fresh searcher per fit, from the store: a restarted fit decides as the first did
        searcher = SeedSearcher(
            list(plan.groups), options.seeds, {pid: grid[pid] for pid in chunk},
            {pid: [c.trial_id for c in packs[pid]] for pid in chunk},
            str(plan.results_dir), _group_scores(plan),
            on_close=progress.not_needed if progress is not None else None)
        writer.on_stored = searcher.record
        if progress is not None:
            progress.status = searcher.status
        searchers.append(searcher)
        return searcher

    def tuner(chunk: list[str], part: int) -> tune.Tuner:
        return tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(search_alg=search(chunk),
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

    # Tune queues 1 trial ahead for a searcher (``TrialList``), pending_trials() for its own
    # variant generator; the searcher's trials are the same grid, so queue as for a grid.
    # The one variable not set with the others (``environment.prepare``): it depends on the
    # size of the cluster, known only once Ray is connected; Tune reads it in ``fit``.
    os.environ.setdefault("TUNE_MAX_PENDING_TRIALS_PG", str(pending_trials()))
    size = chunk_size(options.resources.cpus_per_trial, gpus_per_trial)
    if options.seeds is not None:  # which trials run is decided as they finish: one fit
        size = max(size, len(grid))
    if "tensorboard" in options.loggers:
        log.info("TensorBoard: tensorboard --logdir %s/%s", str(plan.storage).rstrip("/"),
                 run_name if len(grid) <= size else "")
    start = time.perf_counter()

    def head_lost(what: str) -> None:
        writer.close()
        summary.wall_time_s = time.perf_counter() - start
        summary.stopped = what
        print(summary, file=out or sys.stdout, flush=True)
        sys.stderr.flush()
        # what is left of a local instance this command started goes with it; a shutdown
        # that waits on the dead GCS is given a few seconds, not Ray's own 60-s timeout
        stopping = threading.Thread(target=cluster.shutdown_ray, daemon=True)
        stopping.start()
        stopping.join(timeout=5)
        # Ending the process from this thread, not returning through the main one: the main
        # thread is inside ``Tuner.fit``, blocked in Ray calls to the dead GCS, which neither
        # return nor take a KeyboardInterrupt until Ray's C++ side aborts the process ~60 s
        # later with only its own message (tests/sweep/test_multinode.py, the lost head:
        # summary and exit 1 within 60 s). Nothing is lost: every finished trial is stored.
        os._exit(1)

    heartbeat = claims.Heartbeat(claim_context)
    watch = cluster.HeadWatch(head_lost)
    epochs = {pid: max(c.epochs for c in members) for pid, members in packs.items()}
    totals = {pid: sum(estimates[c.trial_id] for c in members)
              for pid, members in packs.items() if all(c.trial_id in estimates for c in members)}
    if (short := stalls.short_override(options.trial_timeout)) is not None:
        log.warning("%s", short)
    writer.watchdog = stalls.Watchdog(stalls.limits(epochs, totals, options.trial_timeout),
                                      stalls.kill_trial, beats=stalls.reader(beats))
    try:
        fit_in_chunks(tuner, packs, list(grid), size, writer, summary, options.max_failures)
    finally:
        writer.watchdog.stop()
        stalls.close(beats)
        watch.stop()
        heartbeat.stop()
    summary.wall_time_s = time.perf_counter() - start
    summary.stopped = writer.halt or summary.stopped
    if searchers:
        summary.seeds = searchers[-1].report()
        summary.not_needed += searchers[-1].not_needed()
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


def devices_line(gpus_per_trial: float, gpus: float,
                 packs: dict[str, list[TrialConfig]], slots: int = 0) -> str:
    """The plan line printed before the first trial: what runs on what, and how many Tune
    trials the cluster's nodes run at once (``slots``; none said where it has none yet)."""
    largest = max((len(m) for m in packs.values()), default=1)
    what = (f"packs of up to {largest} trials ({len(packs)} Tune trials)" if largest > 1
            else "one trial per Tune trial")
    at_once = f", up to {slots} at a time" if slots > 0 else ""
    if gpus_per_trial <= 0:
        return f"CPU trials: {what}{at_once}"
    where = cluster.gpu_count(gpus) if gpus > 0 else "GPUs the autoscaler starts"
    return f"GPU trials: {gpus_per_trial:g} GPU per Tune trial, {what}, {where}{at_once}"


def _group_scores(plan: Plan) -> seeds.Stored:
    """The stored scores of the trials of ``plan``'s seed groups."""
    ids = {t for g in plan.groups for per_seed in g.trials for t in per_seed.values()}
    return seeds.stored_scores(str(plan.results_dir), ids)


def chunk_size(cpus_per_trial: float, gpus_per_trial: float) -> int:
    """Tune trials per ``Tuner.fit``: at least ``MIN_CHUNK_TRIALS``, and 20 rounds of the
    cluster's trial slots, so the slots idle while a chunk drains are a few percent of it.
    Tune's controller walks every trial it holds on each step, so one ``fit`` of 10^4 trials
    costs 2.6x more driver time per trial than one of 100 (benchmarks/RESULTS.md, "the sweep
    driver at scale"); chunks of about 10^3 keep it at the 10^3 cost."""
    return max(MIN_CHUNK_TRIALS, 20 * trial_slots(cpus_per_trial, gpus_per_trial))


def trial_slots(cpus_per_trial: float, gpus_per_trial: float) -> int:
    """How many Tune trials the cluster's nodes run at once, by the CPUs (or GPUs) each asks
    for (fewer where their memory estimates do not fit; 0 before an autoscaler starts any)."""
    import ray

    resources = ray.cluster_resources()
    return int(resources.get("GPU", 0) / gpus_per_trial if gpus_per_trial > 0
               else resources.get("CPU", 0) / cpus_per_trial)


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
                return  # the summary says it, once
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
