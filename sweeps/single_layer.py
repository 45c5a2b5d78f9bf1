"""Single-layer reinitialization (003 App. C, Fig. 5): reinitialize one layer at a
time, every layer 1..L, 3 seeds at 5k examples, plus the full model as reference.

The same as `reinit-tune sweep single_layer`; `--help` lists the flags."""

import sys

from reinit_tune.cli import sweep_main

if __name__ == "__main__":
    sys.exit(sweep_main("single_layer", prog="python sweeps/single_layer.py"))
