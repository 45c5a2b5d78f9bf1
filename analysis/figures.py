"""Draw chosen figures from a results store and print the numbers they plot, e.g.
`python analysis/figures.py permutations heads --results results`; without names, every
figure the store supports. The same as `reinit-tune report --only ...`: figures and
report.html in RESULTS/report/."""

import argparse
import sys

from reinit_tune.cli import main

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("figures", nargs="*", help="figure names (reinit-tune report --help)")
    p.add_argument("--results", default="results", help="results store folder")
    p.add_argument("--out", default=None, help="report folder (default: RESULTS/report)")
    args = p.parse_args()
    # the command's own checks: an unknown figure or an unwritable --out is one line, exit 2
    sys.exit(main(["report", "--results", args.results,
                   *(["--out", args.out] if args.out is not None else []),
                   *(["--only", *args.figures] if args.figures else [])]))
