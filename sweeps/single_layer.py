"""Single-layer reinitialization (S3, W3; 003 App. C, Fig. 5): reinitialize one layer at a
time, every layer 1..L, 3 seeds at 5k examples, plus the full model as reference."""

from __future__ import annotations

import sys

from reinit_tune import cli, spaces


def main(argv: list[str] | None = None) -> int:
    parser = cli.sweep_parser(__doc__, tasks=spaces.PAPER_TASKS, sizes=[spaces.DEFAULT_SIZE])
    parser.add_argument("--layers", type=int, nargs="+", default=None,
                        help="0-based layers to reinitialize one at a time (default: all)")
    args = parser.parse_args(argv)
    return cli.run(args, lambda: spaces.single_layer(
        args.model, args.tasks, args.sizes, layers=args.layers, **cli.grid_args(args)))


if __name__ == "__main__":
    sys.exit(main())
