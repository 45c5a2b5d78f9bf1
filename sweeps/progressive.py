"""Progressive reinitialization (S1, W1; 003 §2, Fig. 1): keep layers 1..k pretrained and
reinitialize layers k+1..L, for k = 0..L, per task, train size and seed."""

from __future__ import annotations

import sys

from reinit_tune import cli, spaces


def main(argv: list[str] | None = None) -> int:
    parser = cli.sweep_parser(__doc__, tasks=spaces.PAPER_TASKS, sizes=spaces.PAPER_SIZES)
    parser.add_argument("--k", type=int, nargs="+", default=None,
                        help="pretrained layers to keep (default: every k in 0..L)")
    args = parser.parse_args(argv)
    return cli.run(args, lambda: spaces.progressive(
        args.model, args.tasks, args.sizes, ks=args.k, **cli.grid_args(args)))


if __name__ == "__main__":
    sys.exit(main())
