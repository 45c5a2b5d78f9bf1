"""Localized reinitialization (S2, W2; 003 §4, Fig. 2): every block of 3 consecutive layers
either reinitialized or preserved while all other layers are reinitialized, at 5k examples,
plus the full-model and embeddings-only baselines."""

from __future__ import annotations

import sys

from reinit_tune import cli, spaces


def main(argv: list[str] | None = None) -> int:
    parser = cli.sweep_parser(__doc__, tasks=spaces.PAPER_TASKS, sizes=[spaces.DEFAULT_SIZE])
    args = parser.parse_args(argv)
    return cli.run(args, lambda: spaces.localized(
        args.model, args.tasks, args.sizes, **cli.grid_args(args)))


if __name__ == "__main__":
    sys.exit(main())
