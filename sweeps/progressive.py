"""Progressive reinitialization (003 §2, Fig. 1): keep layers 1..k pretrained and
reinitialize layers k+1..L, for k = 0..L, per task, train size and seed.

The same as `reinit-tune sweep progressive`; `--help` lists the flags."""

import sys

from reinit_tune.cli import sweep_main

if __name__ == "__main__":
    sys.exit(sweep_main("progressive", prog="python sweeps/progressive.py"))
