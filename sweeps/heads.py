"""Attention-head reinitialization (S4, W4; 001 Exp 3): reinitialize one head at a time, each
head of layers 1, 2, L-1 and L (0-based 0, 1, L-2, L-1), on CoLA and STS-B, plus the
no-reinit baseline."""

from __future__ import annotations

import sys

from reinit_tune import cli, spaces


def main(argv: list[str] | None = None) -> int:
    parser = cli.sweep_parser(__doc__, tasks=spaces.HEAD_TASKS, sizes=[None])
    parser.add_argument("--layers", type=int, nargs="+", default=None,
                        help="0-based layers whose heads are reinitialized one at a time "
                             "(default: 0 1 L-2 L-1)")
    args = parser.parse_args(argv)
    return cli.run(args, lambda: spaces.heads(
        args.model, args.tasks, args.sizes, layers=args.layers, **cli.grid_args(args)))


if __name__ == "__main__":
    sys.exit(main())
