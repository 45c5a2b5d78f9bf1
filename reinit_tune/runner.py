"""The one sweep runner: validate a grid, skip finished trials, run the rest on Ray Tune.

Every sweep script builds a list of ``TrialConfig`` and calls ``run_sweep``. Trials run as
Tune function trainables (``tune.with_resources``, reused actors, ``FailureConfig`` retries);
a driver-side ``StoreWriter`` callback writes each finished or failed trial to the Parquet
store, so results land on the driver's disk whatever node ran the trial.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from reinit_tune import data, store
from reinit_tune.config import TrialConfig

try:  # Tune is a hard dependency, but a dry run should not pay for importing it
    from ray.tune import Callback as _TuneCallback
except ImportError:  # pragma: no cover
    _TuneCallback = object


class SweepError(ValueError):
    """A grid or environment problem found before any trial starts."""


@dataclass
class SweepSummary:
    name: str
    results_dir: Path
    total: int
    skipped: int = 0
    ok: int = 0
    failed: int = 0
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
        return (
            f"sweep {self.name}: {self.total} trials: {self.ok} ran ok, {self.failed} failed, "
            f"{self.skipped} already in the store (skipped), {self.not_finished} not finished; "
            f"wall time {self.wall_time_s:.0f} s{speed}\nresults: {self.results_dir}/"
            f"{store.TRIALS}/ and {self.results_dir}/{store.EPOCHS}/ "
            f"(reinit_tune.store.load_trials('{self.results_dir}'))"
        )


# -- pre-flight ---------------------------------------------------------------------------
def preflight(configs: list[TrialConfig], results_dir: Path, data_dir: str | None) -> None:
    """Check everything that can be checked without running a trial; raise ``SweepError``."""
    if not configs:
        raise SweepError("the grid is empty: check --tasks, --sizes, --k and --seeds")
    problems: list[str] = []
    for task in sorted({c.task for c in configs}):
        try:
            n_train = data.split_rows(task, "train", data_dir)
            data.split_rows(task, "validation", data_dir)
        except data.DataNotFoundError as e:
            problems.append(str(e))
            continue
        for size in sorted({c.train_size for c in configs if c.task == task}, key=str):
            try:
                data.subset_size(size, n_train, task)
            except ValueError as e:
                problems.append(f"{e} (remove it from --sizes)")
    existing = next(p for p in (results_dir, *results_dir.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        problems.append(f"results folder {results_dir} is not writable; pass another --results")
    if problems:
        raise SweepError("cannot start the sweep:\n  - " + "\n  - ".join(problems))


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

    def _write(self, trial, status: str, error: str | None) -> None:
        config = self.configs[trial.config["trial_id"]]
        reports = list(self.reports.pop(trial.trial_id, {}).values())
        hostname = reports[-1].get("hostname") if reports else None
        row = store.trial_row(
            config, reports, status=status, error=error,
            attempts=trial.num_failures + 1, hostname=hostname,
        )
        store.write_trial(self.results_dir, row, store.epoch_rows(config, reports))
        if status == "ok":
            self.summary.ok += 1
            self.summary.examples_per_s.append(row["train_examples_per_s"])
        else:
            self.summary.failed += 1

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._write(trial, "ok", None)

    def on_trial_error(self, iteration, trials, trial, **info):
        self._write(trial, "error", _error_text(trial))


def _error_text(trial) -> str:
    path = getattr(trial, "error_file", None)
    if path and os.path.exists(path):
        lines = [ln for ln in Path(path).read_text().splitlines() if ln.strip()]
        # The exception line is last; keep a little context for debugging.
        return "\n".join(lines[-3:])
    return "trial failed (no error file)"


# -- running ------------------------------------------------------------------------------
def connect_ray() -> None:
    """Join the cluster this machine belongs to (``RAY_ADDRESS`` or one started with
    ``ray start``), else start a local Ray: the same command runs on a laptop or a cluster."""
    import ray

    if ray.is_initialized():
        return
    ray.init(log_to_driver=True, configure_logging=True, logging_level="warning")


def check_resources(cpus_per_trial: float, gpus_per_trial: float) -> None:
    import ray

    available = ray.cluster_resources()
    if gpus_per_trial > 0 and available.get("GPU", 0) == 0:
        raise SweepError(
            f"--gpus-per-trial {gpus_per_trial} asks for GPUs but the Ray cluster has none; "
            "use --gpus-per-trial 0 to run on CPUs, or start GPU nodes"
        )
    if cpus_per_trial > available.get("CPU", 0):
        raise SweepError(
            f"--cpus-per-trial {cpus_per_trial} exceeds the cluster's {available.get('CPU', 0):g} "
            "CPUs; lower it"
        )


def run_sweep(
    configs: list[TrialConfig],
    *,
    results_dir: str | os.PathLike = "results",
    data_dir: str | None = None,
    cpus_per_trial: float = 1,
    gpus_per_trial: float = 0,
    max_failures: int = 2,
    name: str | None = None,
    dry_run: bool = False,
    calibrate: bool = False,
    out=None,
) -> SweepSummary:
    """Run every config not yet in the store; return counts of what happened. A dry run
    prints the grid and its estimated cost (``reinit_tune.cost``; ``calibrate`` measures the
    per-token cost on this device first) and runs nothing."""
    out = out or sys.stdout
    results = Path(results_dir).expanduser().resolve()
    data_root = data.resolve_data_dir(data_dir)
    data_dir_str = str(data_root) if data_root else None
    by_id = {c.trial_id: c for c in configs}  # identical configs collapse to one trial
    unique = list(by_id.values())
    name = name or (unique[0].experiment if unique else "sweep")
    if cpus_per_trial <= 0 or gpus_per_trial < 0:
        raise SweepError("--cpus-per-trial must be > 0 and --gpus-per-trial >= 0")
    preflight(unique, results, data_dir_str)
    done = store.finished_ids(results)
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
    check_resources(cpus_per_trial, gpus_per_trial)
    todo_by_id = {c.trial_id: c for c in todo}
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, configs={k: c.to_dict() for k, c in todo_by_id.items()}),
        {"cpu": cpus_per_trial, "gpu": gpus_per_trial},
    )
    writer = StoreWriter(results, todo_by_id, summary)
    tuner = tune.Tuner(
        trainable,
        param_space={"trial_id": tune.grid_search(list(todo_by_id)), "data_dir": data_dir_str},
        tune_config=tune.TuneConfig(reuse_actors=True),
        run_config=tune.RunConfig(
            name=f"{name}-{time.strftime('%Y%m%d-%H%M%S')}",
            storage_path=str(results / "_tune"),
            failure_config=tune.FailureConfig(max_failures=max_failures),
            callbacks=[writer],
            verbose=1,
        ),
    )
    start = time.perf_counter()
    tuner.fit()
    summary.wall_time_s = time.perf_counter() - start
    print(summary, file=out)
    return summary

