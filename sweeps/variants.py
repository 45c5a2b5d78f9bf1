"""Variants of progressive reinitialization (003 App. D-F): a 5x learning rate
for reinitialized layers, preserved LayerNorm parameters (both at 5k with the reference
curve), and 10 epochs for k in {0, L/2, L} at 500 and 5k examples.

The same as `reinit-tune sweep variants`; `--help` lists the flags."""

import sys

from reinit_tune.cli import sweep_main

if __name__ == "__main__":
    sys.exit(sweep_main("variants", prog="python sweeps/variants.py"))
