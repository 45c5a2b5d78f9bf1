"""How often each kind of verdict statistic decides falsely, and how often it decides at all.

Null stores (true effect 0: the statistic sits exactly at its rule's boundary) and stores at
an effect of 3 sigma, simulated per kind of statistic with the verdicts' own functions
(``reinit_tune.inference``, ``reinit_tune.verdicts``), under normal and t(3) run noise and
under mixtures where a share of runs collapses to the majority rate m sigma below the
others (claims.md §0.6; Mosbach et al. 2021: 10-30% of runs on RTE, MRPC and CoLA):

- **paired**: a paired t of one contrast s(a) − s(b) (003-C1's kind), the seed shifting both
  cells alike;
- **Welch**: the same contrast between independent groups (two sizes: 003-C3's kind);
- **share**: the seed bootstrap of a difference of shares G = (s(k) − s(0)) / (s(L) −
  s(0)) between two sizes (003-C2's kind), 2,000 resamples;
- **F**: the variance ratio's F interval over three cells of each arm (003-C22's kind);
- **Holm**: 001-C4 (a), Holm over 6 one-sided step tests at 2.5%;
- **Hotelling**: 001-C4 (b), the steps' repeated-measures test (Hotelling's T²) at 5%;
- **trend**: Spearman's rho of k and a 7-cell curve's means, the paired seed bootstrap's
  interval ([TREND]; null: a flat curve);
- **knee**: 000-C5's k*_0.8 at two sizes, decided at a bootstrap P of 0.95 ([KNEE]; null:
  one curve shape at both sizes).

A mixture collapses runs in one arm ("one") or in every arm ("every"), each run on its own,
or whole seeds: every cell's run of a seed ("seeds").
The task's majority rate is where collapsed runs sit, else 0.5 (30 sigma below the
contrasts' cells). Under the null of a mixture the arms' means over all runs are equal
(the collapsing arm's other runs sit higher by rate x gap): the papers' estimand. The F
interval's claim is about spread, which collapsing one arm changes: only its "every"
mixtures are nulls. Each row: the
false-decision rate as the verdicts decide (``reinit_tune.inference.collapse``: at small
data, ``--examples`` 500 by default, a linear contrast widened by the collapse bound for
every cell that trains, a mode no run has shown included, and any other statistic left
undecided on a mixture or below 29 runs a cell; above, the bound only where a collapse
shows), the nominal level, whether that rate stays within nominal +
2 SE, the plain test's false-decision rate, and the verdicts' power at the effect.

``--published`` reports each kind's power at the effect its paper published instead (a
number where the paper gives one, else "figure only" with power at 1, 3 and 5 sigma), under
normal noise, at small data and above:

    python -m benchmarks.bench_verdict_levels                  # 400 stores a cell, ~25 min
    python -m benchmarks.bench_verdict_levels --published --n 3 5 10 30
    python -m benchmarks.bench_verdict_levels --stores 40 --smoke
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

KINDS = ("paired", "Welch", "share", "F", "Holm", "Hotelling", "trend", "knee")
NOISES = (("normal", 0.0, 0, "-"), ("t3", 0.0, 0, "-"),
          ("collapse", 0.10, 8, "one"), ("collapse", 0.15, 8, "one"),
          ("collapse", 0.25, 8, "one"), ("collapse", 0.30, 8, "one"),
          ("collapse", 0.15, 8, "every"), ("collapse", 0.15, 30, "one"),
          ("collapse", 0.30, 30, "every"), ("collapse", 0.15, 8, "seeds"))
SIGMA = 0.01
MAJORITY = 0.5
# The per-run spread the published effects are read against: the embedded MiniLM on SST-2 at
# 500 examples (examples/embedded-minilm, 7 cells of 10 runs: sd 0.009-0.014 a cell).
RUN_SD = 0.011
# kind -> (the claim it decides, the effect in the bench's units, what the paper says). The
# bench's units (``one_store``'s effect e): a paired/Welch contrast e sigma of one run, a share
# difference 0.05 e, a spread ratio 1 + e/3, a Holm/Hotelling dip 2 e sigma, a trend's rise e
# sigma over the curve; any e > 0 moves the knee one layer. None: a figure, no number.
PUBLISHED = {
    "paired": ("000-C7 (a)", 0.05 / RUN_SD,
               "s(2L/3) - s(L/3) about 5 points on SST-2 at ~670 examples (000 §6.1.3)"),
    "Welch": ("003-C3", None, "M(500) - M(50k): figure only (003 Fig. 1)"),
    "share": ("003-C2", None, "G_50k(q) - G_500(q): figure only (003 Figs 1, 4)"),
    "F": ("003-C22", None,
          "5x LR 'appears to increase the variance': figure only (003 App. E, Fig. 6)"),
    "Holm": ("001-C4 (a)", None, "a step down in the progressive curve: figure only (001)"),
    "Hotelling": ("001-C4 (b)", None, "uneven steps: figure only (001)"),
    "trend": ("000-C13", None, "weight change grows with depth: figure only (000)"),
    "knee": ("000-C5", 1.0,
             "QNLI's knee k*_0.8 one layer later as data shrinks: 3, 4, 5 (000 §6.1.2)"),
}
NOMINAL = {"paired": 0.025, "Welch": 0.025, "share": 0.025, "F": 0.025, "Holm": 0.025,
           "Hotelling": 0.05, "trend": 0.025, "knee": 0.05}


def runs(rng, n: int, mean: float, noise: str, rate: float, gap: float, collapses: bool,
         seeds: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """``n`` runs of one cell, and the majority rate its collapsed runs sit at (-inf where
    it does not collapse): ``mean`` over all runs; a collapsing cell's runs collapse with
    probability ``rate`` to ``gap`` sigma below the others (which sit higher, so the mean
    over all runs stays ``mean``), or, given ``seeds`` (a mask), the runs of those seeds."""
    if noise == "t3":
        values = mean + SIGMA * rng.standard_t(3, n) / math.sqrt(3)  # sd sigma
    else:
        values = mean + SIGMA * rng.standard_normal(n)
    if noise != "collapse" or not collapses:
        return values, -math.inf
    level = mean + rate * gap * SIGMA - gap * SIGMA
    values = values + rate * gap * SIGMA  # the trained runs carry the collapses' share
    values[rng.random(n) < rate if seeds is None else seeds] = level
    return values, level


def one_store(kind: str, rng, n: int, effect: float, noise: str, rate: float, gap: float,
              where: str, examples: int = 500) -> tuple[bool, bool]:
    """Whether one simulated store is decided on the claimed side: by the plain test, and
    as the verdicts decide (a linear contrast with the collapse bound where collapse is a
    mode of its cells; any other statistic not at all on a mixture)."""
    from reinit_tune.inference import (
        cluster_bootstrap,
        collapse,
        directional,
        holm_rejects,
        paired_contrast,
        unpaired_contrast,
        variance_ratio,
    )
    from reinit_tune.inference.bootstrap import Group as BootGroup
    from reinit_tune.inference.interval import Interval
    from reinit_tune.inference.rules import Verdict
    from reinit_tune.verdicts.curves import steps_differ
    from reinit_tune.verdicts.spreads import confirmed

    levels: list[tuple[np.ndarray, float]] = []

    seeds = rng.random(n) < rate if where == "seeds" else None  # whole seeds collapse

    def cell(mean: float, arm: int) -> np.ndarray:
        collapses = where in ("every", "seeds") or (where == "one" and arm == 0)
        values, level = runs(rng, n, mean, noise, rate, gap, collapses, seeds)
        levels.append((values, level))
        return values

    def majority() -> float:  # the task's: where collapsed runs sit, else MAJORITY
        return max((level for _, level in levels), default=-math.inf) \
            if any(math.isfinite(level) for _, level in levels) else MAJORITY

    def mixed() -> bool:  # what the verdicts withhold (engine._unbounded_mixture)
        cells = [collapse.count("", v, majority(), "accuracy") for v, _ in levels]
        return collapse.unbounded_at(cells, collapse.possible(examples, majority())) \
            is not None

    def bounded(interval, weights) -> Verdict:  # the verdicts' collapse bound (lin)
        if not (collapse.possible(examples, majority()) or collapse.collapses_in(
                [v for v, _ in levels], majority(), "accuracy")):
            return directional(interval)
        return directional(collapse.bound(
            interval, [(v, w, majority()) for (v, _), w in zip(levels, weights, strict=True)],
            "accuracy"))

    base = 0.8
    if kind in ("paired", "Welch"):
        a, b = cell(base + effect * SIGMA, 0), cell(base, 1)
        if kind == "paired":  # the seed moves both cells alike
            shift = SIGMA * rng.standard_normal(n)
            # a collapsed run sits at the majority rate whatever its seed
            a, b = (np.where(v == lv, v, v + shift) for v, lv in ((a, levels[0][1]),
                                                                  (b, levels[1][1])))
            levels[:] = [(a, levels[0][1]), (b, levels[1][1])]
            interval = paired_contrast(np.column_stack([a, b]), [1.0, -1.0])
        else:
            interval = unpaired_contrast([a, b], [1.0, -1.0])
        plain = directional(interval) is Verdict.SUPPORTED
        return plain, bounded(interval, [1.0, -1.0]) is Verdict.SUPPORTED
    if kind == "share":  # G(q) at two sizes, E = 0.5 and F = 0.9 at both
        cells = []
        for arm, g in ((0, 0.5 + effect * 0.05), (1, 0.5)):
            e, f = cell(0.5, 1), cell(0.9, 1)
            q = cell(0.5 + 0.4 * g, arm)
            cells.append(BootGroup.of([e, q, f], paired=True))

        def statistic(means):
            g = [(m[1] - m[0]) / (m[2] - m[0]) for m in means]
            return g[0] - g[1]

        interval = cluster_bootstrap(cells, statistic, resamples=2000,
                                     seed=int(rng.integers(2**31)))
        plain = directional(interval) is Verdict.SUPPORTED
        return plain, plain and not mixed()
    if kind == "F":  # sigma(a) / sigma(b) > 1 (the claimed side); null: equal sigma
        scale = 1.0 + effect / 3
        a = [base + scale * (cell(base, 0) - base) for _ in range(3)]
        b = [cell(base, 1) for _ in range(3)]
        interval, brown_forsythe = variance_ratio(a, b)
        plain = interval.defined and interval.low > 1.0
        kept, _ = confirmed(Verdict.SUPPORTED if plain else Verdict.INCONCLUSIVE,
                            brown_forsythe)
        return plain, kept is Verdict.SUPPORTED and not mixed()
    if kind == "trend":  # Spearman's rho of k and the means; null: a flat curve
        import pandas as pd

        from reinit_tune.inference import trend

        shift = SIGMA * rng.standard_normal(n)
        curve = [pd.Series(cell(base + effect * SIGMA * k / 6, k % 2) + shift)
                 for k in range(7)]
        interval = trend(list(range(7)), [c.to_numpy() for c in curve], paired=True,
                         seed=int(rng.integers(2**31)))
        plain = n >= 5 and directional(interval) is Verdict.SUPPORTED  # low n: undecided
        return plain, plain and not mixed()
    if kind == "knee":  # k*_0.8 at two sizes; null: one curve shape at both
        import pandas as pd

        from reinit_tune.verdicts.curves import first_reaching, resampled_means
        from reinit_tune.verdicts.rule import by_probability

        shape = [0, 0.1, 0.3, 0.6, 0.85, 0.95, 1]
        later = [0, 0.05, 0.15, 0.35, 0.6, 0.85, 1]  # the effect: the knee one layer later
        arms = []
        for arm, g in ((0, later if effect else shape), (1, shape)):
            shift = SIGMA * rng.standard_normal(n)
            arms.append([pd.Series(cell(0.5 + 0.3 * v, arm) + shift) for v in g])
        boot = np.random.default_rng(int(rng.integers(2**31)))
        k_small, k_large = (first_reaching(resampled_means(c, boot), 0.8) for c in arms)
        found = by_probability(float((k_small > k_large).mean()),
                               float((k_small < k_large).mean()), (n,) * 14,
                               Interval(0.0, math.nan, math.nan, "bootstrap P", (n,)), "",
                               "progressive")
        plain = found.verdict is Verdict.SUPPORTED
        return plain, plain and not mixed()
    # a progressive curve of 7 cells, one seed shift per seed. Holm's null: a flat step
    # (k = 2 to 3), none going down; Hotelling's: every step alike (0.05)
    means = [0.5 + 0.05 * k for k in range(7)]
    if kind == "Holm":
        means[3] = means[2]
    means[3] -= effect * SIGMA * 2  # the effect: a dip at k = 3, uneven steps
    shift = SIGMA * rng.standard_normal(n)
    curve = np.column_stack([cell(m, k % 2) + shift for k, m in enumerate(means)])
    steps = np.diff(curve, axis=1)
    if kind == "Holm":
        from scipy import stats

        down = [float(stats.ttest_1samp(d, 0.0, alternative="less").pvalue) for d in steps.T]
        plain = any(holm_rejects(down))
        return plain, plain and not mixed()
    p = steps_differ(steps)
    plain = p is not None and p < 0.05
    return plain, plain and not mixed()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stores", type=int, default=400, help="simulated stores per cell")
    p.add_argument("--n", type=int, nargs="+", default=[3, 5, 10], help="runs per cell")
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    p.add_argument("--published", action="store_true",
                   help="power at each kind's published effect (normal noise; 500 and "
                        "50,000 examples)")
    p.add_argument("--smoke", action="store_true", help="two noises, n = 5: the code path")
    p.add_argument("--examples", type=int, default=500,
                   help="the stores' train size: at most 10,000 (small data) the verdicts "
                        "allow for a collapse mode no run has shown")
    args = p.parse_args(argv)
    if args.published:
        return published(args.kinds, args.n, args.stores)
    noises = NOISES[:3] if args.smoke else NOISES
    if args.smoke:
        args.n = [5]
    print(f"{args.stores} stores a cell; effect 0 (false decisions) and 3 sigma (power)")
    print("| kind | noise | rate | gap (sigma) | where | n | false (verdicts) | nominal | "
          "within nominal + 2 SE | false (plain test) | power (verdicts) |")
    print("|---|---|---:|---:|---|---:|---:|---:|---|---:|---:|")
    start = time.perf_counter()
    for kind in args.kinds:
        for noise, rate, gap, where in noises:
            if kind == "F" and where == "one":
                continue  # one arm collapsing changes the spread the claim is about
            for n in args.n:
                rng = np.random.default_rng([KINDS.index(kind), n, int(100 * rate), gap,
                                             len(where), len(noise)])
                null = [one_store(kind, rng, n, 0.0, noise, rate, gap, where, args.examples)
                        for _ in range(args.stores)]
                power = [one_store(kind, rng, n, 3.0, noise, rate, gap, where, args.examples)[1]
                         for _ in range(args.stores)]
                false = float(np.mean([d for _, d in null]))
                plain = float(np.mean([d for d, _ in null]))
                nominal = NOMINAL[kind]
                se = math.sqrt(nominal * (1 - nominal) / args.stores)
                ok = "yes" if false <= nominal + 2 * se else "**no**"
                print(f"| {kind} | {noise} | {rate:g} | {gap:g} | {where} | {n} | "
                      f"{false:.3f} | {nominal:g} | {ok} | {plain:.3f} | "
                      f"{float(np.mean(power)):.2f} |", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


def published(kinds: list[str], ns: list[int], stores: int) -> int:
    """Each kind's power at its paper's published effect, else at 1, 3 and 5 sigma, under
    normal noise: at small data (500 examples: every cell that trains carries the bound of a
    mode no run has shown) and above it (50,000)."""
    print(f"{stores} stores a cell, normal noise; effects in sigma of one run "
          f"(published numbers read against sigma = {RUN_SD}, the embedded MiniLM's on SST-2 "
          "at 500 examples)")
    print("| kind | claim | published | effect (sigma) | examples | "
          + " | ".join(f"power n = {n}" for n in ns) + " |")
    print("|---|---|---|---:|---:|" + "---:|" * len(ns))
    start = time.perf_counter()
    for kind in kinds:
        claim, effect, said = PUBLISHED[kind]
        effects = (effect,) if effect is not None else (1.0, 3.0, 5.0)
        for e in effects:
            for examples in (500, 50_000):
                power = []
                for n in ns:
                    rng = np.random.default_rng([KINDS.index(kind), n, examples, int(10 * e)])
                    power.append(np.mean([one_store(kind, rng, n, e, "normal", 0.0, 0, "-",
                                                    examples)[1] for _ in range(stores)]))
                print(f"| {kind} | {claim} | {said} | {e:.1f} | {examples:,} | "
                      + " | ".join(f"{x:.2f}" for x in power) + " |", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
