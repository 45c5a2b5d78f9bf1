"""Sequential transfer (001 Exp 1, Fig. 2): finetune on an intermediate task, then on
the final task, for every (intermediate, final) pair of CoLA, MRPC, RTE and WNLI, plus the
direct-finetune baseline. Each intermediate model is trained once per seed and reused.

The same as `reinit-tune sweep sequential`; `--help` lists the flags."""

import sys

from reinit_tune.cli import sweep_main

if __name__ == "__main__":
    sys.exit(sweep_main("sequential", prog="python sweeps/sequential.py"))
