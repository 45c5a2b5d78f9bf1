"""Layer permutations (003 §5, Fig. 3, Table 1): run n finetunes the pretrained layers
in the order numpy.random.RandomState(n).permutation(L), the same for every task, at 5k
examples, plus the original-order and all-reinitialized baselines.

The same as `reinit-tune sweep permutations`; `--help` lists the flags."""

import sys

from reinit_tune.cli import sweep_main

if __name__ == "__main__":
    sys.exit(sweep_main("permutations", prog="python sweeps/permutations.py"))
