"""``reinit-tune report``: every figure and table a results store supports, drawn into one
self-contained report.html (``reinit_tune.analysis.report``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reinit_tune.cli.formatting import Help, output_folder, results_folder
from reinit_tune.errors import InputError


def add_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser("report", help="figures, tables and an HTML report from a "
                                 "results store", formatter_class=Help,
                                 description="Draw every figure and table the store supports "
                                             "into one self-contained report.html.")
    report.add_argument("--results", default="results", type=results_folder,
                        help="results store folder")
    report.add_argument("--out", default=None, help="report folder (default: RESULTS/report)")
    report.add_argument("--only", nargs="+", default=None, metavar="FIGURE",
                        help="draw only these figures and print their numbers")
    report.add_argument("--max-panels", type=int, default=None, metavar="N",
                        help="panels (settings) one figure draws at most; the settings with "
                             "the most runs are drawn, every setting's numbers are tabled "
                             "(default: 12)")


def command(args: argparse.Namespace) -> int:
    from reinit_tune.analysis import report
    from reinit_tune.cli.costs import priced

    keys = {s.key for s in report.sections()}
    if args.only and not set(args.only) <= keys:
        print(f"error: --only {' '.join(sorted(set(args.only) - keys))}: no such figure; known: "
              f"{', '.join(sorted(keys))}", file=sys.stderr)
        return 2
    if args.max_panels is not None and args.max_panels < 1:
        print(f"error: --max-panels {args.max_panels}: give 1 or more", file=sys.stderr)
        return 2
    out = output_folder("--out", args.out) if args.out is not None else None
    tables = {(Path(args.results) / name).resolve() for name in ("trials", "epochs")}
    if out is not None and any(t == out.resolve() or t in out.resolve().parents
                               for t in tables):
        raise InputError(f"--out {args.out}: inside the store's own tables; give a folder "
                         f"outside them (the default is {Path(args.results) / 'report'})")
    if out is None:  # RESULTS/report: the store's own folder, checked as such
        output_folder("--results", Path(args.results))
    return report.run(Path(args.results), out, args.only, max_panels=args.max_panels,
                      priced=priced)
