"""Variants of progressive reinitialization (S7, S8, W8; 003 App. D-F): a 5x learning rate
for reinitialized layers, preserved LayerNorm parameters (both at 5k with the reference
curve), and 10 epochs for k in {0, L/2, L} at 500 and 5k examples."""

from __future__ import annotations

import sys

from reinit_tune import cli, spaces


def main(argv: list[str] | None = None) -> int:
    parser = cli.sweep_parser(__doc__, tasks=spaces.PAPER_TASKS, sizes=[spaces.DEFAULT_SIZE])
    parser.add_argument("--variants", nargs="+", choices=spaces.VARIANTS,
                        default=list(spaces.VARIANTS), help="which variants to run")
    parser.add_argument("--lr-multiplier", type=float, default=spaces.LR_MULTIPLIER,
                        help="learning-rate factor of the reinitialized layers ('lr')")
    parser.add_argument("--k", type=int, nargs="+", default=None,
                        help="k of the 'lr' and 'layernorm' curves (default: every k in 0..L)")
    parser.add_argument("--epoch-sizes", nargs="+", type=cli.parse_size,
                        default=list(spaces.EPOCH_STUDY_SIZES),
                        help="train sizes of the 'epochs' study")
    parser.add_argument("--max-epochs", type=int, default=spaces.EPOCH_STUDY_EPOCHS,
                        help="epochs of the 'epochs' study (k in {0, L/2, L})")
    args = parser.parse_args(argv)
    return cli.run(args, lambda: spaces.variants(
        args.model, args.tasks, args.sizes, which=args.variants,
        lr_multiplier=args.lr_multiplier, ks=args.k, epoch_sizes=args.epoch_sizes,
        max_epochs=args.max_epochs, **cli.grid_args(args)))


if __name__ == "__main__":
    sys.exit(main())
