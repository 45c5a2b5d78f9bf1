"""``reinit-tune verdicts``: does each finding of the papers hold on a store's own runs?
One row per verdict (``reinit_tune.verdicts``), optionally as JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reinit_tune.cli.formatting import Help, output_file, results_folder


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "verdicts", help="test every claim of the papers on a results store",
        formatter_class=Help,
        description="Decide each testable claim of the papers (claims.md) on the store's "
                    "runs: per task, size and protocol the estimate, its 95% interval, the "
                    "runs per cell and one of supported / contradicted / inconclusive / not "
                    "enough data, with the published value beside it; for an undecided "
                    "verdict, what is missing or about how many seeds would decide it, and "
                    "the command that runs them.")
    p.add_argument("--results", default="results", type=results_folder,
                   help="results store folder")
    p.add_argument("--claims", nargs="+", default=None, metavar="ID",
                   help="only these claims, e.g. 003-C1 003-C13 (default: all)")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="also write the verdicts to FILE as a JSON list")


def command(args: argparse.Namespace) -> int:
    from reinit_tune import store, verdicts
    from reinit_tune.cli.costs import priced
    from reinit_tune.store.check import bad_scores
    from reinit_tune.verdicts.epochs import EPOCH_COLUMNS
    from reinit_tune.verdicts.groups import COLUMNS
    from reinit_tune.verdicts.inputs import conflicting_reruns, nothing_to_decide
    from reinit_tune.verdicts.layers import SIMILARITY_COLUMNS
    from reinit_tune.verdicts.pairs import PAIR_COLUMNS
    from reinit_tune.verdicts.table import text, write_json

    if args.claims:
        unknown = [c for c in args.claims if c.upper() not in verdicts.BY_ID]
        if unknown:
            import difflib

            near = [m for c in unknown for m in difflib.get_close_matches(
                c.upper(), list(verdicts.BY_ID), n=2, cutoff=0.6)]
            hint = (f"did you mean {' or '.join(dict.fromkeys(near))}?" if near else
                    "ids look like 003-C1; `reinit-tune verdicts` without --claims decides "
                    "every claim")
            print(f"error: --claims {' '.join(unknown)}: no such claim; {hint}",
                  file=sys.stderr)
            return 2
    if args.json is not None:
        output_file("--json", args.json)
    results = Path(args.results)
    if (problem := store.not_a_store(results)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    named = dict.fromkeys(c.upper() for c in args.claims or ())  # each claim once
    claims = [verdicts.BY_ID[c] for c in named] if named else verdicts.CLAIMS
    stored = store.load_trials(results, columns=list(COLUMNS))  # read once: every status
    if (problem := nothing_to_decide(stored["status"], str(results))) is not None:
        if stored.empty and (broken := store.broken_files(results)):
            problem = (f"--results {results}: no trial can be read ({len(broken)} damaged "
                       f"file(s)); `reinit-tune store check --results {results}` names them")
        print(f"error: {problem}", file=sys.stderr)
        return 1
    trials = stored[stored["status"] == "ok"].reset_index(drop=True)
    if (problem := bad_scores(trials)) is not None:
        print(f"error: --results {results}: {problem}", file=sys.stderr)
        return 1
    clashes = conflicting_reruns(trials)
    similarity = store.load_similarity(results, columns=list(SIMILARITY_COLUMNS))
    epochs = store.load_epochs(results, columns=list(EPOCH_COLUMNS))
    pairs = store.load_pairs(results, columns=list(PAIR_COLUMNS))
    rows = verdicts.evaluate(trials, claims, results_dir=str(results), similarity=similarity,
                             epochs=epochs, pairs=pairs)
    rows = priced(rows, [r.command for r in rows if r.command])
    print(text(rows))
    if clashes:
        print(f"note: {len(clashes)} run(s) were stored by several trials (under two "
              "experiment names, or copied) whose scores differ; the verdicts and figures use "
              "the one marked (used) of each: "
              + "; ".join(map(str, clashes[:5])) + (" ..." if len(clashes) > 5 else ""))
    if args.json:
        write_json(rows, args.json)
        print(f"wrote {len(rows)} verdicts to {args.json}")
    return 0
