"""``reinit-tune verdicts``: does each finding of the papers hold on a store's own runs?
One row per verdict (``reinit_tune.verdicts``), optionally as JSON."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import shlex
import sys
from pathlib import Path

from reinit_tune.cli.formatting import Help, output_file


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
    p.add_argument("--results", default="results", help="results store folder")
    p.add_argument("--claims", nargs="+", default=None, metavar="ID",
                   help="only these claims, e.g. 003-C1 003-C13 (default: all)")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="also write the verdicts to FILE as a JSON list")


def command(args: argparse.Namespace) -> int:
    from reinit_tune import store, verdicts
    from reinit_tune.verdicts.epochs import EPOCH_COLUMNS
    from reinit_tune.verdicts.groups import COLUMNS
    from reinit_tune.verdicts.inputs import bad_scores, conflicting_reruns, nothing_to_decide
    from reinit_tune.verdicts.layers import SIMILARITY_COLUMNS
    from reinit_tune.verdicts.pairs import PAIR_COLUMNS
    from reinit_tune.verdicts.table import text, write_json

    if args.claims:
        unknown = [c for c in args.claims if c.upper() not in verdicts.BY_ID]
        if unknown:
            print(f"error: --claims {' '.join(unknown)}: no such claim; known: "
                  f"{', '.join(verdicts.BY_ID)}", file=sys.stderr)
            return 2
    if args.json:
        output_file("--json", args.json)
    results = Path(args.results)
    if (problem := store.not_a_store(results)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    claims = ([verdicts.BY_ID[c.upper()] for c in args.claims] if args.claims
              else verdicts.CLAIMS)
    stored = store.load_trials(results, columns=list(COLUMNS))  # read once: every status
    if (problem := nothing_to_decide(stored["status"], str(results))) is not None:
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
    costs = _costs(rows)
    rows = [dataclasses.replace(r, cost=costs[r.command]) if r.command in costs else r
            for r in rows]
    print(text(rows))
    if clashes:
        print(f"note: {len(clashes)} run(s) were stored by several trials (under two "
              "experiment names, or copied) whose scores differ; the verdicts and figures use "
              "one of each: "
              + "; ".join(map(str, clashes[:5])) + (" ..." if len(clashes) > 5 else ""))
    if args.json:
        write_json(rows, args.json)
        print(f"wrote {len(rows)} verdicts to {args.json}")
    return 0


COSTED = 40  # commands whose cost is planned; the rest print without one


def _costs(rows) -> dict[str, str]:
    """What each distinct command of ``rows`` would add, as its dry run plans it: "12
    trials, about 0.05 device-hours on ..." (or why that is not known here); the first
    ``COSTED`` of them."""
    from reinit_tune import families
    from reinit_tune.cli.sweep import configs_of, run_options, sweep_parser
    from reinit_tune.errors import InputError
    from reinit_tune.model.shape import shape_for
    from reinit_tune.sweep.runner import Sweep

    found: dict[str, str] = {}
    quiet = logging.getLogger("reinit_tune")
    level, quiet.level = quiet.level, logging.ERROR  # the plan's warnings are the sweep's
    try:
        # each is a dry run's planning (~0.3 s): a store of 10^4 groups prints thousands
        for command in list(dict.fromkeys(r.command for r in rows if r.command))[:COSTED]:
            words = shlex.split(command)
            try:
                family = families.get(words[2])
                args = sweep_parser(family).parse_args(words[3:])
                model = args.model or family.model
                estimate, most = Sweep(configs_of(args, family), run_options(args, family),
                                       shapes={model: shape_for(model, args.num_layers,
                                                                args.num_heads)}).cost()
            except (InputError, SystemExit, OSError) as e:
                why = " ".join(line.strip(" -") for line in str(e).splitlines()[:2])
                found[command] = "cost not known here" + (
                    f" (its dry run says: {why})" if why else "")
                continue
            if isinstance(estimate, str):
                found[command] = estimate.removeprefix("estimated cost: ")
            elif estimate is None or not estimate.trials:
                found[command] = ("adds nothing: the store has these trials" if most is None
                                  else f"adds 0 to {most} trials (seeds on demand)")
            else:
                unit = "GPU-hours" if estimate.packs else "device-hours"
                hours = f"about {estimate.device_hours:.2g} {unit}"
                found[command] = (
                    f"adds {estimate.trials} to {most} trials (seeds on demand), {hours} for "
                    f"the first {estimate.trials}" if most and most > estimate.trials
                    else f"adds {estimate.trials} trials, {hours}") + f" on {estimate.device}"
    finally:
        quiet.setLevel(level)
    return found
