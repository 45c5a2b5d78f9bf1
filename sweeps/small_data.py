"""Small-data progressive reinitialization (003 App. B, Fig. 4): every k = 0..L at 500
examples with 50 seeds (5 epochs), each run a point of the scatter.

The same as `reinit-tune sweep small_data`; `--help` lists the flags."""

import sys

from reinit_tune.cli import sweep_main

if __name__ == "__main__":
    sys.exit(sweep_main("small_data", prog="python sweeps/small_data.py"))
