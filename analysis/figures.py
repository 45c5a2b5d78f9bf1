"""Draw chosen figures from a results store and print the numbers they plot, e.g.
`python analysis/figures.py permutations heads --results results`; without names, every
figure the store supports. The same as `reinit-tune report --only ... --out RESULTS/figures`."""

import argparse
import sys
from pathlib import Path

from reinit_tune.analysis import report

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("figures", nargs="*", help="figure names (reinit-tune report --help)")
    p.add_argument("--results", default="results", help="results store folder")
    p.add_argument("--out", default=None, help="figure folder (default: RESULTS/figures)")
    args = p.parse_args()
    results = Path(args.results)
    sys.exit(report.run(results, Path(args.out) if args.out else results / "figures",
                        args.figures or None))
