"""Seeds on demand in simulation: the trials ``--seeds auto`` runs against the smallest fixed
design that reaches the same worst-case half-width, and the coverage of the 95% intervals it
leaves, over many simulated progressive sweeps.

    python -m benchmarks.bench_seeds --sweeps 2000 --target-ci 0.02

A sweep is SST-2 and RTE at 500, 5k and 50k examples (six groups), progressive with k = 0..L
on the 6-layer MiniLM (six contrasts s(k) - s(L) per group). Each cell's score is its mean
plus normal noise of the cell's SD:

- at 500 examples, means and SDs per k are those of the committed MiniLM store
  (``examples/embedded-minilm``: SST-2 over its 10 seeds, RTE over its complete seeds), read
  when the benchmark runs;
- no store holds 5k or 50k runs yet: there the SDs are the 500-example ones scaled by
  sqrt(500 / n) (an assumption: the spread of a subset mean), which gives 003's shape, large
  at 500 examples and low k, small at 50k.

Each simulated group draws ``--max-seeds`` seeds; the adaptive design stops where
``reinit_tune.inference.sequential.stopping_seeds`` says, the fixed design of n seeds takes
the first n of the same draws. The fixed design compared is the smallest n whose worst
half-width over all groups and contrasts is at most the adaptive design's worst one
(``--max-seeds`` where none is). Coverage counts the contrasts whose reported interval
(``reported_half_widths``; the plain rule's: its t-interval) holds the true difference.
``--contrasts 1 2`` adds groups of one and two
contrasts (RTE's noisiest k), where the purely sequential rule covers least, and the plain
rule (the sample SD, no upper limit) beside ours.

``--smoke``: 40 sweeps (CI runs it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import common
from reinit_tune import store
from reinit_tune.inference.sequential import (
    SeedRule,
    half_widths,
    reported_half_widths,
    stopping_seeds,
)

REPO = Path(__file__).resolve().parent.parent
STORE = REPO / "examples" / "embedded-minilm"
SIZES = (500, 5_000, 50_000)


def profile() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """task -> (means, SDs) per k = 0..L at 500 examples, from the committed store."""
    trials = store.load_trials(STORE, status="ok")
    rows = trials[(trials["experiment"] == "progressive") & (trials["train_size"] == 500)]
    out = {}
    for task, runs in rows.groupby("task"):
        layers = max(len(r) for r in runs["reinit_layers"])
        k = layers - runs["reinit_layers"].map(len)
        table = runs.assign(k=k).pivot_table(index="seed", columns="k", values="score")
        table = table.dropna()  # seeds with every k
        out[str(task)] = (table.mean().to_numpy(), table.std(ddof=1).to_numpy())
    return out


def groups(base: dict[str, tuple[np.ndarray, np.ndarray]], contrasts: int | None
           ) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, means, SDs) per group; the reference condition is the last (k = L)."""
    out = []
    for task, (means, sds) in sorted(base.items()):
        for size in SIZES:
            scale = np.sqrt(500 / size)
            m, s = means, sds * scale
            if contrasts is not None:  # RTE's noisiest k's against the full model
                keep = [*np.argsort(s[:-1])[::-1][:contrasts], len(s) - 1]
                m, s = m[keep], s[keep]
            out.append((f"{task} {size}", m, s))
    return out


def plain_stop(diffs: np.ndarray, rule: SeedRule) -> int:
    """The purely sequential rule with the sample SD (no upper limit), for comparison."""
    for n in range(rule.min_seeds, rule.max_seeds + 1):
        if half_widths(diffs[:n], rule.level).max() <= rule.target_ci:
            return n
    return rule.max_seeds


def simulate(cells, rule: SeedRule, sweeps: int, stop, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    covered = {label: [] for label, _, _ in cells}
    adaptive = fixed = 0
    capped = 0
    for _ in range(sweeps):
        draws = []
        worst = 0.0
        trials = 0
        for label, means, sds in cells:
            scores = means + rng.normal(0, 1, size=(rule.max_seeds, len(means))) * sds
            diffs = scores[:, :-1] - scores[:, -1:]
            truth = means[:-1] - means[-1]
            n = stop(diffs, rule)
            hw = half_widths(diffs[:n], rule.level)
            reported = reported_half_widths(diffs[:n], rule) if stop is stopping_seeds else hw
            covered[label].extend(np.abs(diffs[:n].mean(axis=0) - truth) <= reported)
            worst = max(worst, float(hw.max()))
            trials += n * len(means)
            draws.append(diffs)
        adaptive += trials
        n_fixed = next((n for n in range(2, rule.max_seeds + 1)
                        if max(half_widths(d[:n], rule.level).max() for d in draws) <= worst),
                       None)
        if n_fixed is None:
            capped += 1
            n_fixed = rule.max_seeds
        fixed += n_fixed * sum(len(m) for _, m, _ in cells)
    every = [c for values in covered.values() for c in values]
    return {"ratio": adaptive / fixed, "coverage": float(np.mean(every)),
            "per_group": {k: float(np.mean(v)) for k, v in covered.items()},
            "adaptive": adaptive / sweeps, "fixed": fixed / sweeps, "capped": capped}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sweeps", type=int, default=2000)
    p.add_argument("--target-ci", type=float, default=0.02)
    p.add_argument("--min-seeds", type=int, default=3)
    p.add_argument("--max-seeds", type=int, default=50)
    p.add_argument("--contrasts", type=int, nargs="*", default=[],
                   help="also groups of this many contrasts each")
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    sweeps = 40 if args.smoke else args.sweeps
    rule = SeedRule(args.target_ci, args.min_seeds, args.max_seeds)
    began = time.perf_counter()
    base = profile()
    for task, (means, sds) in sorted(base.items()):
        print(f"{task} 500 (from {STORE.name}): means {np.round(means, 4).tolist()}, "
              f"SDs {np.round(sds, 4).tolist()}")
    rows = []
    for contrasts in [None, *args.contrasts]:
        cells = groups(base, contrasts)
        rules = [("ours", stopping_seeds)] + ([("plain", plain_stop)] if contrasts else [])
        for name, stop in rules:
            result = simulate(cells, rule, sweeps, stop)
            low = min(result["per_group"].items(), key=lambda kv: kv[1])
            rows.append([contrasts or len(cells[0][1]) - 1, name, sweeps,
                         round(result["adaptive"], 1), round(result["fixed"], 1),
                         round(result["ratio"], 3), round(result["coverage"], 4),
                         f"{low[0]}: {low[1]:.3f}", result["capped"]])
    print(common.table(["contrasts per group", "rule", "sweeps", "adaptive trials",
                        "fixed trials", "ratio", "coverage", "lowest group", "fixed capped"],
                       rows))
    print(f"(--target-ci {rule.target_ci:g}, --min-seeds {rule.min_seeds}, --max-seeds "
          f"{rule.max_seeds}; {common.load_average()}; {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
