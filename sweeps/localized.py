"""Localized reinitialization (003 §4, Fig. 2): every block of 3 consecutive layers
either reinitialized or preserved while all other layers are reinitialized, at 5k examples,
plus the full-model and embeddings-only baselines.

The same as `reinit-tune sweep localized`; `--help` lists the flags."""

import sys

from reinit_tune.cli import sweep_main

if __name__ == "__main__":
    sys.exit(sweep_main("localized", prog="python sweeps/localized.py"))
