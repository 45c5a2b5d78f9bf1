"""What each speed lever of a trial is worth: the same trial with one lever turned off at a time.

Levers: ``length_grouped`` (batches of similar length; a config field), ``bf16`` (autocast; a
config field), ``fused`` (fused AdamW kernel instead of foreach), ``vocab_rows`` (optimize only
the reachable word-embedding rows), ``retain_memory`` (keep freed memory instead of
page-faulting new buffers; CPU). Each run is a fresh process (the allocator setting is
process-wide), levers are interleaved per repetition, and the table gives median training
examples/s and the slowdown without each.

    python -m benchmarks.bench_levers                  # SST-2, MiniLM, 500 x 1 epoch, 3 repeats
    python -m benchmarks.bench_levers --smoke --model <tiny local model> --task rte
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from benchmarks import common

LEVERS = ("none", "length_grouped", "bf16", "fused", "vocab_rows", "retain_memory")


def without(lever: str, config):
    """Turn ``lever`` off in this process; return the config to run."""
    from reinit_tune.training import loop
    from reinit_tune.training.vocab_rows import VocabRows

    if lever == "length_grouped":
        return config.replace(length_grouped=False)
    if lever == "bf16":
        return config.replace(precision="fp32")
    if lever == "fused":
        make = loop.make_optimizer

        def foreach(groups, device_type):
            optimizer = make(groups, device_type)
            for group in optimizer.param_groups:
                group["fused"], group["foreach"] = False, True
            return optimizer
        loop.make_optimizer = foreach
    elif lever == "vocab_rows":
        VocabRows.for_model = classmethod(lambda cls, *args: None)
    elif lever == "retain_memory":
        loop.retain_freed_memory = lambda: False
    return config


def run_one(args) -> dict:
    import torch

    from reinit_tune.config import TrialConfig
    from reinit_tune.sweep import trial

    if args.threads:
        torch.set_num_threads(args.threads)
    config = TrialConfig(model=args.model, task=args.task, train_size=args.train_size,
                         epochs=args.epochs, precision="bf16", length_grouped=True,
                         experiment="bench-levers")
    reports = trial.execute(without(args.one, config), use_gpu=False)
    seconds = sum(r["train_time_s"] for r in reports)
    examples = sum(r["train_examples"] for r in reports)
    return {"lever": args.one, "examples_per_s": examples / seconds}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = common.job_parser(__doc__, epochs=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--levers", nargs="+", choices=LEVERS, default=list(LEVERS))
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    p.add_argument("--smoke", action="store_true", help="16 examples, 1 repeat")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: one run
    args = p.parse_args(argv)
    common.offline_defaults()
    if args.smoke:
        args.train_size, args.repeats = 16, 1
        argv += ["--train-size", "16"]
    if args.one:
        print(json.dumps(run_one(args)))
        return 0
    print(f"bench_levers: {args.model} {args.task} {args.train_size} examples x {args.epochs} "
          f"epochs, bf16, length-grouped, torch threads {args.threads or 'all'}, "
          f"{common.load_average()}", flush=True)
    speeds: dict[str, list[float]] = {lever: [] for lever in args.levers}
    for repeat in range(args.repeats):
        shift = repeat % len(args.levers)
        for lever in args.levers[shift:] + args.levers[:shift]:
            done = subprocess.run([sys.executable, "-m", __spec__.name, *argv, "--one", lever],
                                  capture_output=True, text=True, cwd=common.REPO)
            if done.returncode != 0:
                raise RuntimeError(f"{lever} failed:\n{done.stderr[-4000:]}")
            speed = json.loads(done.stdout.strip().splitlines()[-1])["examples_per_s"]
            speeds[lever].append(speed)
            print(f"  repeat {repeat} without {lever}: {speed:.1f} train ex/s "
                  f"[{common.load_average()}]", flush=True)
    base = common.median(speeds["none"]) if "none" in speeds else float("nan")
    rows = [[f"without {lever}" if lever != "none" else "all levers on", len(v),
             common.median(v), base / common.median(v)] for lever, v in speeds.items()]
    print()
    print(common.table(["run", "runs", "train ex/s", "all-on speed-up"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
