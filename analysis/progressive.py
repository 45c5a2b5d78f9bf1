"""Draw the progressive-reinitialization figure (003 Fig. 1/4) from a results store and print
the numbers it plots: `python analysis/progressive.py --results DIR` (figure in
DIR/figures/). The same as `reinit-tune report --results DIR --out DIR/figures --only
progressive`."""

import argparse
import sys
from pathlib import Path

from reinit_tune.analysis import report

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", default="results", help="results store folder")
    p.add_argument("--out", default=None, help="figure folder (default: RESULTS/figures)")
    args = p.parse_args()
    results = Path(args.results)
    sys.exit(report.run(results, Path(args.out) if args.out else results / "figures",
                        ["progressive"]))
