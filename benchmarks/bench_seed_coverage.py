"""Seeds on demand: does the interval a stopped group reports hold its 95% level, per
contrast, whatever the per-seed differences look like, and how many seeds does it take?

    python -m benchmarks.bench_seed_coverage --groups 10000

Each simulated group is stopped by the product's own rule
(``reinit_tune.inference.sequential.stopping_points``, the batched ``decide``) and reports
``reported_half_widths`` (mean ± max(W, t·S/√n)) at its stop; coverage is the share of groups
whose interval holds the contrast's true mean, counted for every contrast on its own (never
pooled over contrasts or σ). W is ``--target-ci`` (1 here: σ is in units of W).

Groups: one contrast, or six correlated ones (the reference's per-seed noise is shared by
every contrast: correlation 0.5), the six with SDs σ · (1, 0.8, 0.6, 0.45, 0.3, 0.2) like
progressive k = 0..5 against k = L. σ (the widest contrast's SD of its ok seeds) runs from
0.2 W to 5 W. Per-seed differences, each scaled to SD σ around mean 0:

- ``normal``;
- ``heavy-tailed``: Student t with 3 degrees of freedom;
- ``skewed``: a lognormal of shape 0.8 (skewness 3.7), its long tail up;
- ``skewed-down``: the same, its long tail down;
- ``failed p``: a seed's condition fails with probability p (10%, 25%) and scores 5 σ below
  its mean (its run collapsed to a class prior); the reference never fails, so the mean
  difference the interval must hold is ``-5 σ p``;
- ``failed p, 8 W``: as ``failed p``, the failed seeds 8 W below whatever σ: a failure mode
  far below a quiet contrast, where a group that has not yet seen a failure stops early.

Targets: the worst contrast's coverage >= 0.94 for normal and heavy-tailed differences,
>= 0.90 for ``failed 10%``; seeds used <= 0.4 x 50 where σ <= 1.5 W.

**Collapsed runs, scores known** (``--collapse``): the groups a sweep runs know each run's
score and its task's majority-class score, so the rule adds the collapse allowance
(``reinit_tune.inference.collapse.contrast_allowances``): at small data from the first
seed (a mode no run has shown), elsewhere once a run collapsed. Simulated on
scores (W = 0.02, one contrast, a reference at 0.8 that never collapses, a condition whose
runs collapse with probability p to the majority rate m W below the others), by
``GroupState``'s own decision path (``sequential.decide`` with the allowance), against the
rule without it. The true contrast is the mean over all runs (-m W p).

``--smoke``: 300 groups per cell (CI runs it).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from benchmarks import common
from reinit_tune.inference import collapse
from reinit_tune.inference.sequential import (
    SeedRule,
    decide,
    reported_half_widths,
    stopping_points,
)

SIGMAS = (0.2, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0)
PROFILE = np.array([1.0, 0.8, 0.6, 0.45, 0.3, 0.2])  # the six contrasts' SDs, in σ
RHO = 0.5
SHAPE = 0.8  # the lognormal's σ
KINDS = ("normal", "heavy-tailed", "skewed", "skewed-down", "failed 10%", "failed 25%",
         "failed 10%, 8 W", "failed 25%, 8 W")


def standard(kind: str, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    """Draws of mean 0 and SD 1 of the kind's ok-seed distribution."""
    if kind == "heavy-tailed":
        return rng.standard_t(3, size) / np.sqrt(3.0)
    if kind.startswith("skewed"):
        x = (np.exp(SHAPE * rng.standard_normal(size)) - np.exp(SHAPE**2 / 2)) \
            / np.sqrt((np.exp(SHAPE**2) - 1) * np.exp(SHAPE**2))
        return -x if kind == "skewed-down" else x
    return rng.standard_normal(size)


def draws(kind: str, sigma: float, contrasts: int, groups: int, seeds: int, w: float,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per-seed differences (groups, seeds, contrasts) and each contrast's true mean."""
    scale = sigma * (PROFILE[:contrasts] if contrasts > 1 else np.ones(1))
    shared = standard(kind, rng, (groups, seeds, 1))
    own = standard(kind, rng, (groups, seeds, contrasts))
    diffs = (np.sqrt(RHO) * shared + np.sqrt(1 - RHO) * own) * scale
    truth = np.zeros(contrasts)
    if kind.startswith("failed"):
        p = 0.25 if "25%" in kind else 0.10
        drop = np.full(contrasts, 8.0 * w) if kind.endswith("8 W") else 5.0 * scale
        diffs = diffs - drop * (rng.random((groups, seeds, contrasts)) < p)
        truth = -drop * p
    return diffs, truth


def cell(kind: str, sigma: float, contrasts: int, rule: SeedRule, groups: int,
         rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Per-contrast coverage of the reported intervals, and the mean seeds a group used."""
    diffs, truth = draws(kind, sigma * rule.target_ci, contrasts, groups, rule.max_seeds,
                         rule.target_ci, rng)
    stop = stopping_points(diffs, rule)
    covered = np.zeros((groups, contrasts), dtype=bool)
    for n in np.unique(stop):
        at = stop == n
        seen = diffs[at, :n]
        hw = reported_half_widths(seen, rule)
        covered[at] = np.abs(seen.mean(axis=1) - truth) <= hw
    return covered.mean(axis=0), float(stop.mean())


COLLAPSES = ((0.0, 14.5), (0.10, 8), (0.10, 12), (0.10, 24), (0.25, 8), (0.15, 14.5))
MODES = ("plain", "seen", "small")  # no allowance; once a run collapsed; at small data


def collapse_cell(p: float, m: float, sigma: float, rule: SeedRule, groups: int, mode: str,
                  rng: np.random.Generator) -> tuple[float, float]:
    """Coverage of the reported interval of a contrast whose condition collapses with
    probability ``p`` to ``m`` W below, and the mean seeds, by ``mode``: without the
    collapse allowance, with it once a run collapsed, or with it from the first seed (a
    small-data group, ``collapse.possible``); W = ``rule.target_ci`` in score units."""
    w = rule.target_ci
    majority = 0.8 - m * w
    covered, used = 0, 0
    for _ in range(groups):
        shift = rng.normal(0, sigma * w / np.sqrt(2), rule.max_seeds)
        ref = 0.8 + shift + rng.normal(0, sigma * w / 2, rule.max_seeds)
        cond = 0.8 + shift + rng.normal(0, sigma * w / 2, rule.max_seeds)
        cond[rng.random(rule.max_seeds) < p] = majority
        for n in range(rule.min_seeds, rule.max_seeds + 1):
            extra = collapse.contrast_allowances([ref[:n], cond[:n]], majority, "accuracy",
                                                 unseen=mode == "small") \
                if mode != "plain" else None
            decision = decide((cond[:n] - ref[:n])[:, None], rule, extra)
            if decision.closed:
                break
        covered += abs(float((cond[:n] - ref[:n]).mean()) + m * w * p) <= decision.reported
        used += n
    return covered / groups, used / groups


def collapse_table(groups: int, rule: SeedRule, rng: np.random.Generator) -> str:
    rows = []
    for p, m in COLLAPSES:
        for sigma in (0.5, 1.0):
            row = [f"{100 * p:g}%", f"{m:g} W", f"{sigma:g}"]
            for mode in MODES:
                coverage, seeds = collapse_cell(p, m, sigma, rule, groups, mode, rng)
                row += [f"{coverage:.3f}", f"{seeds:.1f}"]
            rows.append(row)
    return common.table(["collapse rate", "below", "σ / W", "coverage (plain rule)",
                         "mean seeds", "allowance once seen", "mean seeds",
                         "small data (the rule)", "mean seeds"], rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=10_000, help="simulated groups per cell")
    p.add_argument("--min-seeds", type=int, default=3)
    p.add_argument("--max-seeds", type=int, default=50)
    p.add_argument("--sigma-confidence", type=float, default=SeedRule.sigma_confidence,
                   help="γ of the upper limit of σ the rule plans with")
    p.add_argument("--kinds", nargs="*", default=list(KINDS), choices=KINDS)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--collapse", type=int, default=0, metavar="GROUPS",
                   help="also the collapse table, this many groups a cell (W = 0.02)")
    args = p.parse_args(argv)
    groups = 300 if args.smoke else args.groups
    rule = SeedRule(1.0, args.min_seeds, args.max_seeds,
                    sigma_confidence=args.sigma_confidence)
    rng = np.random.default_rng(0)
    began = time.perf_counter()
    rows, worst = [], {}
    for kind in args.kinds:
        for contrasts in (1, 6):
            for sigma in SIGMAS:
                coverage, seeds = cell(kind, sigma, contrasts, rule, groups, rng)
                low = int(np.argmin(coverage))
                rows.append([kind, contrasts, f"{sigma:g}", f"{coverage.min():.3f}",
                             f"{low}" if contrasts > 1 else "-",
                             " ".join(f"{c:.3f}" for c in coverage), f"{seeds:.1f}"])
                key = (kind, "σ <= 1.5 W" if sigma <= 1.5 else "σ > 1.5 W")
                cov, most = worst.get(key, (1.0, 0.0))
                worst[key] = (min(cov, float(coverage.min())), max(most, seeds))
    print(common.table(["differences", "contrasts", "σ / W", "worst coverage",
                        "worst contrast", "coverage per contrast", "mean seeds"], rows))
    print()
    print(common.table(["differences", "σ", "worst coverage", "most mean seeds"],
                       [[k, s, f"{c:.3f}", f"{n:.1f}"] for (k, s), (c, n) in worst.items()]))
    print(f"({groups} groups per cell; --min-seeds {rule.min_seeds}, --max-seeds "
          f"{rule.max_seeds}; standard error of a coverage near 0.95: "
          f"{np.sqrt(0.95 * 0.05 / groups):.4f}; {common.load_average()}; "
          f"{time.perf_counter() - began:.0f} s)")
    if args.collapse:
        began = time.perf_counter()
        scored = SeedRule(0.02, args.min_seeds, args.max_seeds,
                          sigma_confidence=args.sigma_confidence)
        print()
        print(collapse_table(args.collapse, scored, rng))
        print(f"({args.collapse} groups per cell; {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
