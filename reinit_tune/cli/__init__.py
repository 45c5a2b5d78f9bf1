"""The ``reinit-tune`` command: one entry point with a subcommand per job.

    reinit-tune sweep <family> [flags]     expand a family's grid and run it on Ray Tune
    reinit-tune families [--markdown]      list the families, their sources and trial counts
    reinit-tune report [--results DIR]     every figure and table the store supports, as HTML
    reinit-tune compare MODEL_A MODEL_B    two models compared layer by layer
    reinit-tune consistency                every pair of seeds and of tasks of a store (002)
    reinit-tune verdicts [--results DIR]   every claim of the papers decided on a store

Each subcommand is a module here with its parser (``add_parser``) and its ``command``; this
module puts them together (``parser``) and runs one (``main``). ``sweeps/<family>.py``
scripts call ``sweep_main`` with their family's name, so ``python sweeps/progressive.py ...``
and ``reinit-tune sweep progressive ...`` are the same command. Exit status: 0 done, 1 some
trials failed or did not finish (or a figure failed to draw), 2 bad input found before
anything started (the message says what to change), 128 + the signal when interrupted (130
Ctrl+C, 143 SIGTERM, 129 SIGHUP; the summary is printed). Neither ``--help`` nor
``families`` imports torch or Ray: each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import errno
import sys

from reinit_tune.cli import compare, consistency, listing, report, store, sweep, verdicts
from reinit_tune.cli.formatting import Help, Parser, positive_int
from reinit_tune.cli.listing import DEFAULT_MODEL, family_table
from reinit_tune.cli.sweep import (
    add_sweep_flags,
    configs_of,
    grid_of,
    run_options,
    run_sweep_command,
    sweep_main,
    sweep_parser,
)
from reinit_tune.errors import InputError

__all__ = ["DEFAULT_MODEL", "add_sweep_flags", "configs_of", "family_table", "grid_of", "main",
           "parser", "positive_int", "run_options", "run_sweep_command", "sweep_main",
           "sweep_parser"]

# in the order `reinit-tune --help` lists them
COMMANDS = {"sweep": sweep, "families": listing, "report": report, "compare": compare,
            "consistency": consistency, "verdicts": verdicts, "store": store}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("reinit-tune")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def parser() -> argparse.ArgumentParser:
    """The ``reinit-tune`` parser with every subcommand's."""
    p = Parser(prog="reinit-tune", formatter_class=Help,
                                description=__doc__.split("\n\n")[0].replace("``", ""))
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(commands)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "sweep":  # it tells bad input from a failure once trials ran
            return COMMANDS[args.command].command(args)
        try:
            return COMMANDS[args.command].command(args)
        except InputError as e:  # bad input a command found before it did anything
            print(f"error: {e}", file=sys.stderr)
            return 2
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            raise
        # a path given on the command line that no file system accepts: one line
        print(f"error: {e.filename}: a name in this path is too long for the file system "
              "(255 bytes each); give a shorter path", file=sys.stderr)
        return 2
