"""Small-data progressive reinitialization (003 App. B, Fig. 4): every k = 0..L at 500
examples with 50 seeds (5 epochs), each run a point of the scatter."""

from __future__ import annotations

import sys

from reinit_tune import cli, spaces


def main(argv: list[str] | None = None) -> int:
    parser = cli.sweep_parser(__doc__, tasks=spaces.PAPER_TASKS, sizes=[spaces.SMALL_DATA])
    parser.add_argument("--k", type=int, nargs="+", default=None,
                        help="pretrained layers to keep (default: every k in 0..L)")
    args = parser.parse_args(argv)
    return cli.run(args, lambda: spaces.small_data(
        args.model, args.tasks, args.sizes, ks=args.k, **cli.grid_args(args)))


if __name__ == "__main__":
    sys.exit(main())
