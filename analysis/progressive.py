"""Draw the progressive-reinitialization figure (003 Fig. 1/4) from a results store and print
the numbers it plots: `python analysis/progressive.py --results DIR` (figure and report.html
in DIR/report/, where `reinit-tune report` writes them). The same as `reinit-tune report
--results DIR --only progressive`."""

import argparse
import sys

from reinit_tune.cli import main

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", default="results", help="results store folder")
    p.add_argument("--out", default=None, help="report folder (default: RESULTS/report)")
    args = p.parse_args()
    sys.exit(main(["report", "--results", args.results,
                   *(["--out", args.out] if args.out is not None else []),
                   "--only", "progressive"]))
