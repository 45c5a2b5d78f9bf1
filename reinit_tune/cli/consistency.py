"""``reinit-tune consistency``: every pair of seeds and of tasks of a store compared layer by
layer (002 §5), from the trials' saved models."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reinit_tune.cli.formatting import Help, positive_int, results_folder
from reinit_tune.errors import InputError


def add_parser(commands: argparse._SubParsersAction) -> None:
    pairs = commands.add_parser(
        "consistency", help="compare every pair of seeds and of tasks of a store (002 §5)",
        formatter_class=Help,
        description="002 §5's consistency analyses: every two trials of the store that differ "
                    "only in their seed, and every two that differ only in their task (and its "
                    "hyperparameters), compared layer by layer on dev examples, into "
                    "RESULTS/pairs/. Needs the trials' saved models (--save-model).")
    pairs.add_argument("--results", default="results", type=results_folder,
                       help="results store folder")
    pairs.add_argument("--examples", type=positive_int, default=200,
                       help="dev examples of each task (002 §5.2 uses 200)")
    pairs.add_argument("--experiment", default=None,
                       help="only the trials of this family (default: every family)")
    pairs.add_argument("--data-dir", default=None,
                       help="data folder (default: $REINIT_TUNE_DATA, else the hub)")


def command(args: argparse.Namespace) -> int:
    from reinit_tune import store
    from reinit_tune.similarity.pairs import consistency

    results = Path(args.results)
    if (problem := store.not_a_store(results)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.experiment is not None:
        present = sorted(set(store.load_trials(results, columns=["experiment"])["experiment"]
                             .dropna().astype(str)))
        if args.experiment not in present:
            print(f"error: --experiment {args.experiment}: no trial of {results} is of it; "
                  f"the store holds {', '.join(present) or 'no trials'}", file=sys.stderr)
            return 2
    try:
        done = consistency(results, examples=args.examples, data_dir=args.data_dir,
                           experiment=args.experiment)
    except (InputError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    stored = len(store.pair_ids(results))
    if not stored:
        print(f"no pairs to compare in {results}: it needs two trials with saved models "
              "(sweep with --save-model) that differ only in their seed, or only in their "
              "task", file=sys.stderr)
        return 1
    print(f"{done} pairs compared into {results / 'pairs'} ({stored} there in all); "
          "`reinit-tune report` draws them")
    return 0
