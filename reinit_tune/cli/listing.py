"""``reinit-tune families``: every experiment family with its paper source and the trial
count of its default grid (``--markdown``: the README's table)."""

from __future__ import annotations

import argparse
import logging
import sys

from reinit_tune import families
from reinit_tune.env import HUB
from reinit_tune.errors import InputError
from reinit_tune.families.base import Grid

DEFAULT_MODEL = "bert-base-uncased"


def family_table(markdown: bool = False) -> str:
    """Every family with its paper source and the trial count of its default grid on its
    default model with the official split sizes."""
    rows = []
    quiet = logging.getLogger("reinit_tune")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the grids' "skipping train sizes" notes are expected here
    try:
        for family in families.all_families():
            count = len(family.configs(Grid(data_dir=HUB)))
            rows.append((family.name, family.source, family.title, family.fields, count,
                         family.model))
    finally:
        quiet.setLevel(level)
    if markdown:
        lines = ["| family | what | source | config fields | default trials (model) |",
                 "|---|---|---|---|---|"]
        lines += [f"| `{n}` | {t} | {s} | {f} | {c:,} ({m}) |" for n, s, t, f, c, m in rows]
        return "\n".join(lines)
    width = max(len(r[0]) for r in rows)
    lines = [f"{'family':<{width}}  {'trials':>6}  source / what"]
    lines += [f"{n:<{width}}  {c:>6}  {s}: {t}" + ("" if m == DEFAULT_MODEL else f" [{m}]")
              for n, s, t, _, c, m in rows]
    lines.append(f"trials: the default grid on the family's model ({DEFAULT_MODEL} unless "
                 "named) with the official split sizes; `reinit-tune sweep <family> "
                 "--dry-run` shows a grid")
    return "\n".join(lines)


def add_parser(commands: argparse._SubParsersAction) -> None:
    listing = commands.add_parser("families", help="list the experiment families",
                                  description=family_table.__doc__)
    listing.add_argument("--markdown", action="store_true", help="as the README's table")


def command(args: argparse.Namespace) -> int:
    try:
        print(family_table(args.markdown))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
