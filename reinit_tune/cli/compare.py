"""``reinit-tune compare MODEL_A MODEL_B``: two models compared layer by layer (002 §5) on
dev examples, into a CSV table and a figure."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reinit_tune.cli.formatting import Help, output_folder, positive_int, task_arg
from reinit_tune.errors import InputError
from reinit_tune.tasks import TASKS


def add_parser(commands: argparse._SubParsersAction) -> None:
    compare = commands.add_parser(
        "compare", help="compare two models layer by layer (002 §5)", formatter_class=Help,
        description="Weight distances, attention JS divergence, SVCCA distance and linear CKA "
                    "between two models, per layer, on the dev examples of one or more tasks "
                    "(002 §5.2 pools 200 examples of each task). Models are names, or folders "
                    "saved by a sweep run with --save-model (RESULTS/models/<trial_id>).")
    compare.add_argument("model_a", help="model name or saved model folder")
    compare.add_argument("model_b", help="model name or saved model folder")
    compare.add_argument("--tasks", nargs="+", default=["sst2"], type=task_arg,
                         metavar="TASK", help="dev splits to compare on, of: "
                                              f"{' '.join(sorted(TASKS))}")
    compare.add_argument("--examples", type=positive_int, default=200,
                         help="dev examples per task")
    compare.add_argument("--max-seq-length", type=int, default=128,
                         help="longer inputs are truncated")
    compare.add_argument("--data-dir", default=None,
                         help="data folder (default: $REINIT_TUNE_DATA, else the hub)")
    compare.add_argument("--layer-replacement", action="store_true",
                         help="also 002 §4's layer replacement (model_b's layer put into "
                              "model_a)")
    compare.add_argument("--out", default="similarity",
                         help="folder for the CSV and the figure")


def command(args: argparse.Namespace) -> int:
    import pandas as pd

    from reinit_tune.analysis.similarity import plot_pair
    from reinit_tune.similarity.compare import compare

    for name, model in (("model_a", args.model_a), ("model_b", args.model_b)):
        path = Path(model).expanduser()
        if not path.exists() and model.startswith((".", "/", "~")):
            raise InputError(f"{name} {model}: no such folder (a saved model is a folder with "
                             "config.json, as --save-model writes to RESULTS/models/<trial_id>/)")
        if path.exists() and not (path / "config.json").is_file():
            raise InputError(f"{name} {model}: not a saved model (a folder with config.json, "
                             "as --save-model writes to RESULTS/models/<trial_id>/) nor a "
                             "model name")
    if args.max_seq_length < 8:  # what a trial's config accepts (reinit_tune.config)
        raise InputError(f"--max-seq-length {args.max_seq_length}: must be at least 8")
    # The checks a real sweep makes first: an uncached hub id or dataset offline otherwise
    # retries for most of a minute before the same error.
    from reinit_tune.sweep.preflight import check_hub_data, check_hub_model

    problems = [p for name, model in (("model_a", args.model_a), ("model_b", args.model_b))
                for p in check_hub_model(model, name, flag="")]
    problems += check_hub_data(set(args.tasks), args.data_dir)
    if problems:
        raise InputError(problems[0] + "".join(f"\n  {p}" for p in problems[1:]))
    output_folder("--out", args.out)
    args.tasks = list(dict.fromkeys(args.tasks))  # a task named twice is pooled once
    try:
        rows = compare(args.model_a, args.model_b, args.tasks, examples=args.examples,
                       max_seq_length=args.max_seq_length, data_dir=args.data_dir,
                       layer_replacement=args.layer_replacement)
    except (InputError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    table = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "similarity.csv", index=False)
    _, paths, _ = plot_pair(table, out, "similarity",
                            f"{Path(args.model_a).name} vs {Path(args.model_b).name} on "
                            f"{'+'.join(args.tasks)}")
    print(table.drop(columns=["note"]).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"table: {out / 'similarity.csv'}\nfigure: " + ", ".join(str(p) for p in paths))
    return 0
