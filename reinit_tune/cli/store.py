"""``reinit-tune store compact|check``: merge a results store's per-trial files, or name what
its readers skip."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reinit_tune.cli.formatting import Help, results_folder


def add_parser(commands: argparse._SubParsersAction) -> None:
    maintain = commands.add_parser(
        "store", help="compact or check a results store", formatter_class=Help,
        description="Maintain a results store. Sweeps write one small Parquet file per trial "
                    "(and per table); `compact` merges them into a few large files, which "
                    "every reader loads in a fraction of a second (safe while sweeps write "
                    "and reports read; sweeps compact by themselves past "
                    "2,000 small files). `check` reads every table and names what readers "
                    "skip: unreadable or foreign files, malformed rows, trials whose epoch "
                    "rows are unreadable (the next sweep runs those again).")
    maintain.add_argument("--results", default=None, help=argparse.SUPPRESS)
    actions = maintain.add_subparsers(dest="action", required=False, metavar="ACTION")
    for action, text in (("compact", "merge the per-trial files into compacted files"),
                         ("check", "report unreadable files, malformed rows and trials whose "
                                   "epoch rows are unreadable (exit status 1 if any)")):
        sub = actions.add_parser(action, help=text, description=text, formatter_class=Help)
        sub.add_argument("--results", default="results", type=results_folder,
                         help="results store folder")


def command(args: argparse.Namespace) -> int:
    import time

    from reinit_tune import store

    if args.action is None:
        where = f" --results {args.results}" if args.results else ""
        print(f"error: reinit-tune store needs an action: `reinit-tune store check{where}` "
              f"(what readers skip) or `reinit-tune store compact{where}` (merge the "
              "per-trial files)", file=sys.stderr)
        return 2
    results = Path(args.results)
    if (problem := store.not_a_store(results)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.action == "check":
        check = store.check_store(results)
        print(check)
        return 0 if check.clean else 1
    from reinit_tune.sweep.preflight import check_folder

    if unwritable := check_folder(results, "--results", tuple(
            p.name for p in results.iterdir() if p.is_dir() and not p.name.startswith("."))):
        print(f"error: {'; '.join(unwritable)}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    merged = store.compact(results)
    files = ", ".join(f"{n} {name}" for name, n in merged.items() if n)
    print(f"compacted {results} in {time.perf_counter() - start:.1f} s: " + (
        f"merged {files} per-trial files" if files else "no per-trial files to merge")
        + f"; {store.small_file_count(results)} per-trial files left")
    return 0
