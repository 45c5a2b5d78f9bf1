"""Compare two models layer by layer (002 §5: seed vs seed, task vs task): weight distances,
attention Jensen-Shannon divergence, SVCCA distance and linear CKA on the dev examples of one
or more tasks. The same as `reinit-tune compare`; `--help` lists the flags."""

import sys

from reinit_tune.cli import main

if __name__ == "__main__":
    sys.exit(main(["compare", *sys.argv[1:]]))
