"""Layer permutations (S5, W5; 003 §5, Fig. 3, Table 1): run n finetunes the pretrained layers
in the order numpy.random.RandomState(n).permutation(L), the same for every task, at 5k
examples, plus the original-order and all-reinitialized baselines."""

from __future__ import annotations

import sys

from reinit_tune import cli, spaces


def main(argv: list[str] | None = None) -> int:
    parser = cli.sweep_parser(__doc__, tasks=spaces.PAPER_TASKS, sizes=[spaces.DEFAULT_SIZE])
    parser.add_argument("--permutations", type=int, default=spaces.PERMUTATIONS,
                        help="number N of permutations (runs 0..N-1); --seeds sets the runs "
                             "of each baseline")
    args = parser.parse_args(argv)
    return cli.run(args, lambda: spaces.permutations(
        args.model, args.tasks, args.sizes, n_permutations=args.permutations,
        **cli.grid_args(args)))


if __name__ == "__main__":
    sys.exit(main())
