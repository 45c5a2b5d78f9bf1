"""Sequential transfer (T6, W7; 001 Exp 1, Fig. 2): finetune on an intermediate task, then on
the final task, for every (intermediate, final) pair of CoLA, MRPC, RTE and WNLI, plus the
direct-finetune baseline. Each intermediate model is trained once per seed and reused."""

from __future__ import annotations

import sys

from reinit_tune import cli, spaces
from reinit_tune.tasks import TASKS


def main(argv: list[str] | None = None) -> int:
    parser = cli.sweep_parser(__doc__, tasks=spaces.SEQUENTIAL_TASKS, sizes=[None])
    parser.add_argument("--intermediate-tasks", nargs="+", default=None, choices=sorted(TASKS),
                        help="intermediate tasks (default: the --tasks)")
    args = parser.parse_args(argv)
    return cli.run(args, lambda: spaces.sequential(
        args.model, args.tasks, args.sizes, intermediate_tasks=args.intermediate_tasks,
        **cli.grid_args(args)))


if __name__ == "__main__":
    sys.exit(main())
