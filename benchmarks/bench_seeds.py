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
``reinit_tune.inference.sequential.stopping_points`` says, the fixed design of n seeds takes
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
    stopping_points,
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


def plain_stops(diffs: np.ndarray, rule: SeedRule) -> np.ndarray:
    """The purely sequential rule with the sample SD (no upper limit), for comparison: the
    seeds each of ``diffs``' groups (groups, seeds, contrasts) stops at."""
    stop = np.full(diffs.shape[0], rule.max_seeds)
    open_ = np.ones(diffs.shape[0], dtype=bool)
    for n in range(rule.min_seeds, rule.max_seeds):
        closes = half_widths(diffs[open_, :n], rule.level).max(axis=-1) <= rule.target_ci
        where = np.flatnonzero(open_)[closes]
        stop[where], open_[where] = n, False
    return stop


def prefix_widths(diffs: np.ndarray, rule: SeedRule) -> np.ndarray:
    """(groups, max_seeds + 1): the widest contrast's t half-width over each group's first n
    seeds (inf below two)."""
    out = np.full((diffs.shape[0], rule.max_seeds + 1), np.inf)
    for n in range(2, rule.max_seeds + 1):
        out[:, n] = half_widths(diffs[:, :n], rule.level).max(axis=-1)
    return out


def simulate(cells, rule: SeedRule, sweeps: int, plain: bool, seed: int = 0) -> dict:
    """``sweeps`` simulated sweeps of ``cells``, every sweep's groups drawn at once and
    stopped by the product's rule (``stopping_points``) or the plain one."""
    rng = np.random.default_rng(seed)
    covered = {}
    trials = np.zeros(sweeps)
    worst = np.zeros(sweeps)
    widths = []
    for label, means, sds in cells:
        scores = means + rng.normal(0, 1, size=(sweeps, rule.max_seeds, len(means))) * sds
        diffs = scores[:, :, :-1] - scores[:, :, -1:]
        truth = means[:-1] - means[-1]
        stop = plain_stops(diffs, rule) if plain else stopping_points(diffs, rule)
        hit = np.zeros((sweeps, len(truth)), dtype=bool)
        for n in np.unique(stop):
            at = stop == n
            seen = diffs[at, :n]
            hw = half_widths(seen, rule.level)
            reported = hw if plain else reported_half_widths(seen, rule)
            hit[at] = np.abs(seen.mean(axis=1) - truth) <= reported
            worst[at] = np.maximum(worst[at], hw.max(axis=-1))
        covered[label] = hit.ravel()
        trials += stop * len(means)
        widths.append(prefix_widths(diffs, rule))
    # the smallest fixed seed count whose worst half-width over the sweep's groups is at most
    # the adaptive design's worst (--max-seeds where none is)
    fixed_worst = np.max(widths, axis=0)  # (sweeps, max_seeds + 1)
    meets = fixed_worst <= worst[:, None]
    capped = ~meets.any(axis=1)
    n_fixed = np.where(capped, rule.max_seeds, meets.argmax(axis=1))
    fixed = n_fixed * sum(len(m) for _, m, _ in cells)
    every = np.concatenate(list(covered.values()))
    return {"ratio": trials.sum() / fixed.sum(), "coverage": float(every.mean()),
            "per_group": {k: float(v.mean()) for k, v in covered.items()},
            "adaptive": float(trials.mean()), "fixed": float(fixed.mean()),
            "capped": int(capped.sum())}


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
        for name in ["ours", *(["plain"] if contrasts else [])]:
            result = simulate(cells, rule, sweeps, plain=name == "plain")
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
