"""The one sweep runner: validate a grid, skip finished trials, run the rest on Ray Tune.

Every sweep script builds a list of ``TrialConfig`` and calls ``run_sweep``. Trials run as
Tune function trainables (``tune.with_resources``, reused actors, ``FailureConfig`` retries);
a driver-side ``StoreWriter`` callback writes each finished or failed trial to the Parquet
store, so results land on the driver's disk whatever node ran the trial.

Resuming (O3) needs no state besides the store: a rerun of the same command skips every trial
stored "ok" (identity = config hash) and runs the rest, so a driver killed by SIGINT or
SIGKILL loses only the trials it was running. Within one run, a trial whose worker dies is
retried by Tune from its last checkpoint (``reinit_tune.trial``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from reinit_tune import cluster, data, store
from reinit_tune.cluster import connect_ray
from reinit_tune.config import TrialConfig
from reinit_tune.layer_similarity import SimilarityOptions
from reinit_tune.preflight import SweepError, preflight
from reinit_tune.trial import DEFAULT_CHECKPOINT_AFTER_S

try:  # Tune is a hard dependency, but a dry run should not pay for importing it
    from ray.tune import Callback as _TuneCallback
except ImportError:  # pragma: no cover
    _TuneCallback = object

__all__ = ["SweepError", "SweepSummary", "StoreWriter", "connect_ray", "describe", "preflight",
           "run_sweep"]

log = logging.getLogger("reinit_tune")

STORAGE_ENV = "REINIT_TUNE_STORAGE"


@dataclass
class SweepSummary:
    name: str
    results_dir: Path
    total: int
    skipped: int = 0
    ok: int = 0
    failed: int = 0
    retries: int = 0
    wall_time_s: float = 0.0
    examples_per_s: list[float] = field(default_factory=list)
    dry_run: bool = False

    @property
    def not_finished(self) -> int:
        return self.total - self.skipped - self.ok - self.failed

    def __str__(self) -> str:
        if self.dry_run:
            return f"dry run: {self.total - self.skipped} of {self.total} trials would run"
        speed = (
            f"; {sum(self.examples_per_s) / len(self.examples_per_s):.1f} train examples/s per "
            "trial (mean)" if self.examples_per_s else ""
        )
        rerun = ("\nrerun the same command to run the unfinished trials (stored ones are "
                 "skipped)" if self.not_finished else "")
        return (
            f"sweep {self.name}: {self.total} trials: {self.ok} ran ok, {self.failed} failed, "
            f"{self.skipped} already in the store (skipped), {self.not_finished} not finished; "
            f"{self.retries} retries; wall time {self.wall_time_s:.0f} s{speed}\nresults: "
            f"{self.results_dir}/{store.TRIALS}/ and {self.results_dir}/{store.EPOCHS}/ "
            f"(reinit_tune.store.load_trials('{self.results_dir}')){rerun}"
        )


def describe(configs: list[TrialConfig]) -> str:
    """A short table of the grid: trials per experiment, task and train size."""
    groups: dict[tuple, list[TrialConfig]] = defaultdict(list)
    for c in configs:
        groups[(c.experiment, c.model, c.task, c.train_size)].append(c)
    lines = [f"{'experiment':<14} {'task':<6} {'size':>7} {'trials':>6} {'seeds':>5} "
             f"{'epochs':>6}  model"]
    for (exp, model, task, size), cs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        epochs = ",".join(str(e) for e in sorted({c.epochs for c in cs}))
        lines.append(
            f"{exp:<14} {task:<6} {str(size if size is not None else 'full'):>7} {len(cs):>6} "
            f"{len({c.seed for c in cs}):>5} {epochs:>6}  {model}"
        )
    lines.append(f"total: {len(configs)} trials")
    return "\n".join(lines)


# -- store writer -------------------------------------------------------------------------
class StoreWriter(_TuneCallback):
    """Writes a store row when a Tune trial finishes or finally fails (driver side)."""

    def __init__(self, results_dir: Path, configs: dict[str, TrialConfig], summary: SweepSummary):
        self.results_dir = results_dir
        self.configs = configs
        self.summary = summary
        self.reports: dict[str, dict[int, dict]] = defaultdict(dict)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        # Keyed by epoch: a retried trial that resumes re-reports epochs already seen.
        self.reports[trial.trial_id][int(result["epoch"])] = dict(result)

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.summary.retries += 1

    def _write(self, trial, status: str, error: str | None) -> None:
        config = self.configs[trial.config["trial_id"]]
        reports = list(self.reports.pop(trial.trial_id, {}).values())
        hostname = reports[-1].get("hostname") if reports else None
        row = store.trial_row(
            config, reports, status=status, error=error,
            attempts=trial.num_failures + 1, hostname=hostname,
        )
        final = max(reports, key=lambda r: r["epoch"], default={})
        if status == "ok" and final.get("similarity_rows"):  # before the trial row
            rows = json.loads(final["similarity_rows"])
            store.write_similarity(self.results_dir, config.trial_id, rows)
        store.write_trial(self.results_dir, row, store.epoch_rows(config, reports))
        if status == "ok":
            self.summary.ok += 1
            self.summary.examples_per_s.append(row["train_examples_per_s"])
        else:
            self.summary.failed += 1
        _drop_checkpoint(trial)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._write(trial, "ok", None)

    def on_trial_error(self, iteration, trials, trial, **info):
        self._write(trial, "error", _error_text(trial))


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
def run_sweep(
    configs: list[TrialConfig],
    *,
    results_dir: str | os.PathLike = "results",
    data_dir: str | None = None,
    cpus_per_trial: float = 1,
    gpus_per_trial: float = 0,
    max_failures: int = 2,
    storage: str | None = None,
    checkpoint_after_s: float | None = None,
    callbacks: list | None = None,
    name: str | None = None,
    dry_run: bool = False,
    calibrate: bool = False,
    similarity: SimilarityOptions | None = None,
    save_model: bool = False,
    out=None,
) -> SweepSummary:
    """Run every config not yet in the store; return counts of what happened.

    ``storage`` is Tune's ``storage_path`` (checkpoints, Tune's own logs): a local folder, an
    NFS path or an ``s3://``/``gs://`` URI every node can reach; default
    ``$REINIT_TUNE_STORAGE``, else ``<results_dir>/_tune``. ``callbacks`` are extra Tune
    callbacks (loggers, notifications). ``checkpoint_after_s`` (default
    ``DEFAULT_CHECKPOINT_AFTER_S``) is the epoch duration from which trials checkpoint.
    ``similarity`` makes each trial compare its finetuned model with its pre-finetuning
    state per layer (``RESULTS/similarity/``); ``save_model`` saves each finetuned model to
    ``RESULTS/models/<trial_id>/`` (written by the worker: on a multi-node cluster RESULTS
    must be on storage every node can write, as Tune's own storage path must be). A trial
    in the store without the asked-for similarity rows or saved model runs again. A dry run
    prints the grid and its estimated cost (``reinit_tune.cost``; ``calibrate`` measures the
    per-token cost on this device first) and runs nothing.
    """
    out = out or sys.stdout
    if checkpoint_after_s is None:
        checkpoint_after_s = DEFAULT_CHECKPOINT_AFTER_S
    results = Path(results_dir).expanduser().resolve()
    storage = storage or os.environ.get(STORAGE_ENV) or str(results / "_tune")
    if "://" not in storage:
        storage = str(Path(storage).expanduser().resolve())
    data_root = data.resolve_data_dir(data_dir)
    data_dir_str = str(data_root) if data_root else None
    by_id = {c.trial_id: c for c in configs}  # identical configs collapse to one trial
    unique = list(by_id.values())
    name = name or (unique[0].experiment if unique else "sweep")
    preflight(unique, results, data_dir_str, storage=storage, cpus_per_trial=cpus_per_trial,
              gpus_per_trial=gpus_per_trial, max_failures=max_failures,
              checkpoint_after_s=checkpoint_after_s)
    done = store.finished_ids(results)
    if similarity is not None:
        done &= store.similarity_ids(results)
    if save_model:
        done = {i for i in done if (results / "models" / i / "config.json").is_file()}
    todo = [c for c in unique if c.trial_id not in done]
    summary = SweepSummary(name, results, total=len(unique), skipped=len(unique) - len(todo))
    print(describe(unique), file=out)
    if summary.skipped:
        print(f"{summary.skipped} trials already in {results}: skipped", file=out)
    if dry_run:
        from reinit_tune import cost

        summary.dry_run = True
        print(summary, file=out)
        print(cost.sweep_estimate(todo, data_dir_str, calibrate_here=calibrate,
                                  use_gpu=gpus_per_trial > 0), file=out)
        return summary
    if not todo:
        print(summary, file=out)
        return summary

    from ray import tune

    from reinit_tune.trial import run_trial

    connect_ray()
    alive, scalable = cluster.inventory()
    cluster.check_resources(cpus_per_trial, gpus_per_trial, alive, scalable)
    cluster.warn_if_storage_is_local(storage, alive, scalable)
    store.remove_partial_files(results)
    todo_by_id = {c.trial_id: c for c in todo}
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, configs={k: c.to_dict() for k, c in todo_by_id.items()},
                             checkpoint_after_s=checkpoint_after_s),
        {"cpu": cpus_per_trial, "gpu": gpus_per_trial},
    )
    writer = StoreWriter(results, todo_by_id, summary)
    tuner = tune.Tuner(
        trainable,
        param_space={
            "trial_id": tune.grid_search(list(todo_by_id)), "data_dir": data_dir_str,
            "similarity": dataclasses.asdict(similarity) if similarity else None,
            "models_dir": str(results / "models") if save_model else None,
        },
        tune_config=tune.TuneConfig(reuse_actors=True),
        run_config=tune.RunConfig(
            name=f"{name}-{time.strftime('%Y%m%d-%H%M%S')}",
            storage_path=storage,
            failure_config=tune.FailureConfig(max_failures=max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
            callbacks=[writer, *(callbacks or [])],
            verbose=1,
        ),
    )
    start = time.perf_counter()
    tuner.fit()
    summary.wall_time_s = time.perf_counter() - start
    print(summary, file=out)
    return summary

