"""Draw the progressive-reinitialization figure (003 Fig. 1/4) from a results store and print
the numbers it plots."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reinit_tune.analysis.progressive import format_table, plot_progressive
from reinit_tune.store import load_trials


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", default="results", help="results store folder")
    p.add_argument("--out", default=None, help="figure folder (default: RESULTS/figures)")
    args = p.parse_args(argv)
    trials = load_trials(args.results)
    try:
        _, paths, table = plot_progressive(trials, args.out or Path(args.results) / "figures")
    except ValueError as e:
        print(f"error: {e} ({args.results})", file=sys.stderr)
        return 2
    print(format_table(table))
    print("figure: " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
