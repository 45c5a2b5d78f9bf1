"""Probing (T5, W6; 003 §3, App. D; 000 §4.4): a linear classifier on the mean-pooled hidden
states of layer k of the frozen pretrained encoder, k = 0 (embeddings) .. L, trained 10
epochs on the full train split."""

from __future__ import annotations

import sys

from reinit_tune import cli, spaces


def main(argv: list[str] | None = None) -> int:
    parser = cli.sweep_parser(__doc__, tasks=spaces.PAPER_TASKS, sizes=[None],
                              epochs=spaces.PROBE_EPOCHS)
    parser.add_argument("--k", type=int, nargs="+", default=None,
                        help="hidden states to probe (default: every k in 0..L)")
    args = parser.parse_args(argv)
    return cli.run(args, lambda: spaces.probing(
        args.model, args.tasks, args.sizes, ks=args.k, **cli.grid_args(args)))


if __name__ == "__main__":
    sys.exit(main())
