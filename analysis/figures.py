"""Draw chosen figure families from a results store and print the numbers they plot, e.g.
`python analysis/figures.py permutations heads --results results`.
`python -m reinit_tune.report --results results` draws every family into one HTML report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reinit_tune import report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("families", nargs="+", choices=[s.key for s in report.sections()])
    p.add_argument("--results", default="results", help="results store folder")
    p.add_argument("--out", default=None, help="figure folder (default: RESULTS/figures)")
    args = p.parse_args(argv)
    out = args.out or str(Path(args.results) / "figures")
    return report.main(["--results", args.results, "--out", out, "--only", *args.families])


if __name__ == "__main__":
    sys.exit(main())
