"""Attention-head reinitialization (001 Exp 3): reinitialize one head at a time, each
head of layers 1, 2, L-1 and L (0-based 0, 1, L-2, L-1), on CoLA and STS-B, plus the
no-reinit baseline.

The same as `reinit-tune sweep heads`; `--help` lists the flags."""

import sys

from reinit_tune.cli import sweep_main

if __name__ == "__main__":
    sys.exit(sweep_main("heads", prog="python sweeps/heads.py"))
