"""The statistics of claims about probes (003 §3-4): what a linear probe of each hidden state
of the frozen encoder scores, against chance and against finetuning.

A probe group (the runs of the probing family for one task and model: full train, 10
epochs) is never the finetuning group (another size and number of epochs), so these
statistics take both: ``evaluate(finetune, probe, n_min)`` with ``finetune`` the group of
the finetuning runs of the same task, model and depth (None for a claim about probes alone).
The engine pairs them (scope "probe"). A probe's units are its seeds; the two groups are
independent, so a contrast between them is Welch's.

- ``ProbePeak``: 003-C6(a), the bootstrap probability that the best-probing hidden state is
  in the late region (l > 3L/4).
- ``ProbeNearChance``: 003-C6(b) / 003-C7(a), every probed state of a range is within
  ``margin`` of chance (the dev majority-class score), Bonferroni over the range.
- ``BestProbeBelowFinetuning``: 003-C7(b), the full finetuned model above the best probe.
- ``ProbedBlock``: 003-C4, the best-probing block H is neither sufficient (keeping only H:
  0.9F − P_H + 0.1E > 0) nor necessary (reinitializing only H: 0.9F − R_H + 0.1E < 0).
- ``WithProbes``: a conjunction of parts of either scope (003-C5: a finetuning contrast and
  the early probes near chance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reinit_tune.inference import (
    Interval,
    Verdict,
    bonferroni_level,
    cluster_bootstrap,
    conjunction,
    directional,
    unpaired_contrast,
)
from reinit_tune.verdicts.conditions import Block, Condition, Kept, Probe
from reinit_tune.verdicts.contrasts import Contrast
from reinit_tune.verdicts.curves import (
    BOOT_RESAMPLES,
    boot_group,
    first_reaching,
    resampled_means,
)
from reinit_tune.verdicts.depth import block_name, blocks, map_layer
from reinit_tune.verdicts.groups import Group
from reinit_tune.verdicts.rule import Finding, Rule, by_probability, delta_abs, lacking
from reinit_tune.wording import counted

RESAMPLES = BOOT_RESAMPLES


def _probe_missing(probe: Group, layers: range | list[int], n_min: int) -> tuple[str, ...]:
    return tuple(f"probing k={layer}"
                 + (f" ({counted(n, 'run')}, {n_min} needed)" if n else "")
                 for layer in layers if (n := len(probe.cell(Probe(layer)))) < n_min)


def _not_enough(missing: tuple[str, ...], where: Group, family: str = "probing") -> Finding:
    return lacking(missing, family, f" for {where.task}")


def probe_means(probe: Group, layers: range | list[int]) -> np.ndarray:
    return np.array([probe.cell(Probe(layer)).mean() for layer in layers])


@dataclass(frozen=True)
class ProbePeak:
    """003-C6(a): P(argmax_l p(l) > 3L/4) over a bootstrap of the probe seeds (resampled
    jointly across layers where the layers share their seeds); supported at P ≥ 0.95,
    contradicted at P ≤ 0.05 (claims.md)."""

    needs_finetune = False
    scope = "probe"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Probe(layer) for layer in range(num_layers + 1)]

    def evaluate(self, finetune: Group | None, probe: Group, n_min: int) -> Finding:
        layers = range(probe.num_layers + 1)
        if missing := _probe_missing(probe, layers, n_min):
            return _not_enough(missing, probe)
        late = 3 * probe.num_layers / 4
        cells = [probe.cell(Probe(layer)) for layer in layers]
        means = resampled_means(cells, np.random.default_rng(0))
        p_late = float((means.argmax(axis=1) > late).mean())
        best = int(np.argmax(probe_means(probe, layers)))
        n = tuple(len(c) for c in cells)
        return by_probability(p_late, 1 - p_late, n,
                              Interval(p_late, np.nan, np.nan, "bootstrap P", n),
                              f"the best probe is k={best} of {probe.num_layers}; "
                              f"P(best probe at k > {late:g}) = {p_late:.3f} over "
                              f"{RESAMPLES:,} resamples of the probe seeds (decides at "
                              ">= 0.95 / <= 0.05)", "probing")


@dataclass(frozen=True)
class ProbeNearChance:
    """Every probed hidden state of ``layers`` within ``margin`` of chance: each probe's
    upper bound (Bonferroni over the range) ≤ chance + margin supports, any lower bound
    above it contradicts. ``layers``: "early" (1..q, q the paper's first three mapped onto
    the model) or "all" (0..L). Chance: what predicting the dev majority class scores on
    the group's metric (0 for MCC)."""

    layers: str = "early"
    margin: float = 0.05
    needs_finetune = False
    scope = "probe"

    def probed(self, num_layers: int) -> list[int]:
        if self.layers == "early":
            return list(range(1, map_layer(3, num_layers).layers + 1))
        return list(range(num_layers + 1))

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Probe(layer) for layer in self.probed(num_layers)]

    def evaluate(self, finetune: Group | None, probe: Group, n_min: int) -> Finding:
        layers = self.probed(probe.num_layers)
        if missing := _probe_missing(probe, layers, n_min):
            return _not_enough(missing, probe)
        if probe.chance is None:
            return Finding(Verdict.NOT_ENOUGH_DATA, family="probing",
                           missing=("the dev majority-class score",),
                           reason="the probes recorded no majority-class score (chance)")
        bound = probe.chance + self.margin
        level = bonferroni_level(len(layers))
        # each probe's mean minus the bound: > 0 is a probe above chance + margin
        intervals = [unpaired_contrast([probe.cell(Probe(layer)).to_numpy() - bound], [1.0],
                                       level) for layer in layers]
        worst = max(intervals, key=lambda i: i.estimate)
        if all(i.defined and i.high <= 0 for i in intervals):
            verdict = Verdict.SUPPORTED
        elif any(i.defined and i.low > 0 for i in intervals):
            verdict = Verdict.CONTRADICTED
        else:
            verdict = Verdict.INCONCLUSIVE
        shown = ", ".join(f"k={layer} {probe.cell(Probe(layer)).mean():.3f}"
                          for layer in layers)
        return Finding(verdict, worst, rule=Rule("directional", -1), family="probing",
                       reason=(f"probes {shown} against chance {probe.chance:.3f} + "
                               f"{self.margin:g}; the highest probe minus that bound shown, "
                               f"Bonferroni level {level:.4f} over {len(layers)}"))


@dataclass(frozen=True)
class BestProbeBelowFinetuning:
    """003-C7(b): s̄_ft(L) − p̄(l*) > 0, l* the best-probing hidden state, by Welch (the
    probe and finetuning groups are independent)."""

    needs_finetune = True
    scope = "probe"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept("F")]

    def evaluate(self, finetune: Group, probe: Group, n_min: int) -> Finding:
        layers = range(probe.num_layers + 1)
        missing = _probe_missing(probe, layers, n_min)
        full = finetune.cell(Kept("F"))
        if len(full) < n_min:
            missing += (Kept("F").describe(finetune.num_layers),)
        if missing:
            return _not_enough(missing, finetune, "probing" if len(full) >= n_min
                               else "progressive")
        best = int(np.argmax(probe_means(probe, layers)))
        interval = unpaired_contrast([full.to_numpy(), probe.cell(Probe(best)).to_numpy()],
                                     [1.0, -1.0])
        return Finding(directional(interval), interval, rule=Rule(), family="progressive",
                       reason=f"the full finetuned model minus the best probe (k={best})")


@dataclass(frozen=True)
class ProbedBlock:
    """003-C4 by 003 §4's own definitions: H, the block whose probes score highest (mean
    over its layers' probes), must be neither sufficient, (a) c_a = 0.9F − P_H + 0.1E > 0
    (keeping only H recovers less than 90% of the pretraining gain), nor necessary, (b)
    c_b = 0.9F − R_H + 0.1E < 0 (reinitializing only H loses less than 10% of it): a
    conjunction of two [LIN] contrasts in the finetuning group. H must be stable: it wins
    in ≥ 80% of the probe-seed bootstraps or beats the runner-up by more than δ_abs;
    otherwise inconclusive ("H unstable")."""

    threshold: float = 0.9
    stable: float = 0.8
    needs_finetune = True
    scope = "probe"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept("F"), Kept("E"), *(Block(b, kept) for b in range(len(blocks(num_layers)))
                                        for kept in (True, False))]

    def best_block(self, probe: Group) -> tuple[int, float, float]:
        """H, the share of bootstrap resamples it wins, and its lead over the runner-up."""
        parts = blocks(probe.num_layers)
        cells = [[probe.cell(Probe(i + 1)) for i in part] for part in parts]
        means = np.array([np.mean([c.mean() for c in part]) for part in cells])
        order = np.argsort(means)[::-1]
        rng = np.random.default_rng(0)
        draws = np.column_stack([
            np.mean([c.to_numpy()[rng.integers(0, len(c), size=(RESAMPLES, len(c)))]
                     .mean(axis=1) for c in part], axis=0) for part in cells])
        wins = float((draws.argmax(axis=1) == order[0]).mean())
        lead = float(means[order[0]] - means[order[1]]) if len(order) > 1 else np.inf
        return int(order[0]), wins, lead

    def evaluate(self, finetune: Group, probe: Group, n_min: int) -> Finding:
        missing = _probe_missing(probe, range(1, probe.num_layers + 1), n_min)
        if missing:
            return _not_enough(missing, probe)
        h, wins, lead = self.best_block(probe)
        name = block_name(blocks(probe.num_layers)[h])
        t = self.threshold
        full, none = Kept("F"), Kept("E")
        parts = (("a: not sufficient", Contrast(((full, t), (Block(h, True), -1.0),
                                                 (none, 1 - t)))),
                 ("b: not necessary", Contrast(((full, t), (Block(h, False), -1.0),
                                                (none, 1 - t)), rule=Rule("directional", -1))))
        found = [(label, part.evaluate(finetune, n_min)) for label, part in parts]
        missing = tuple(m for _, f in found for m in f.missing)
        if missing:
            return lacking(missing, "localized", f" at {finetune}")
        margin = delta_abs(finetune.metric)
        stable = wins >= self.stable or lead > margin
        verdict = conjunction([f.verdict for _, f in found])
        if not stable and verdict is not Verdict.NOT_ENOUGH_DATA:
            verdict = Verdict.INCONCLUSIVE
        shown = next((f for _, f in found if f.verdict is verdict), found[0][1])
        named = "; ".join(
            f"({label}) {f.verdict} {f.interval.estimate:+.4f} [{f.interval.low:+.4f}, "
            f"{f.interval.high:+.4f}]" for label, f in found if f.interval is not None)
        return Finding(verdict, shown.interval, rule=shown.rule, family="localized",
                       reason=(f"H = block {name} (best probes; wins {wins:.0%} of probe "
                               f"resamples, lead {lead:+.3f}"
                               + ("" if stable else ": H unstable") + f"); {named}"))


@dataclass(frozen=True)
class ProbeContrast:
    """A [LIN] contrast of probe cells, evaluated in the probe group (paired by probe
    seed): ``contrast``'s terms are ``Probe`` conditions."""

    contrast: Contrast
    needs_finetune = False
    scope = "probe"

    def conditions(self, num_layers: int) -> list[Condition]:
        return self.contrast.conditions(num_layers)

    def evaluate(self, finetune: Group | None, probe: Group, n_min: int) -> Finding:
        return self.contrast.evaluate(probe, n_min)


def _curves(finetune: Group, probe: Group, n_min: int) -> tuple[list, Finding | None]:
    """The progressive cells k = 0..L, and a "not enough data" finding where they or the
    probes of every hidden state are short of runs."""
    ft = [finetune.cell(Kept(k)) for k in range(finetune.num_layers + 1)]
    missing = _probe_missing(probe, range(probe.num_layers + 1), n_min) + tuple(
        Kept(k).describe(finetune.num_layers) for k, c in enumerate(ft) if len(c) < n_min)
    if not missing:
        return ft, None
    return ft, lacking(missing, _family_of(missing), f" for {probe.task}")


def _family_of(missing: tuple[str, ...]) -> str:
    """The family that runs the first missing cell: probes or progressive runs."""
    return "probing" if missing[0].startswith("probing") else "progressive"


def halfway(curve: np.ndarray) -> np.ndarray:
    """The first index where each row of ``curve`` reaches half its way from its first
    value to its last; rows without a rise give −1."""
    return first_reaching(curve, 0.5)


@dataclass(frozen=True)
class ProbesNeedMoreLayers:
    """000-C9(b): the normalized probe curve reaches half its rise at a later hidden state
    than the progressive curve, k50_probe > k50_ft. Probe curve: p(l) over l = 0..L
    normalized between p(0) and its maximum; progressive: G(k) = (s(k) − s(0)) / (s(L) −
    s(0)). The probe seeds and the finetuning seeds are resampled separately (each paired
    across its own cells); P(k50_probe > k50_ft) ≥ 0.95 supports, ≤ 0.05 contradicts."""

    needs_finetune = True
    scope = "probe"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in range(num_layers + 1)]

    def evaluate(self, finetune: Group, probe: Group, n_min: int) -> Finding:
        layers = range(probe.num_layers + 1)
        ft, short = _curves(finetune, probe, n_min)
        if short is not None:
            return short
        rng = np.random.default_rng(0)
        probes = resampled_means([probe.cell(Probe(layer)) for layer in layers], rng)
        # the probe curve rises to its maximum, wherever that is: normalize up to it
        peak = np.maximum.accumulate(probes, axis=1)
        k_probe, k_ft = halfway(peak), halfway(resampled_means(ft, rng))
        valid = (k_probe >= 0) & (k_ft >= 0)
        if valid.mean() < 0.99:
            return Finding(Verdict.INCONCLUSIVE, family="progressive",
                           reason="no rise to halve in the probe or the progressive curve "
                                  f"in {1 - valid.mean():.0%} of the resamples")
        p_later = float((k_probe > k_ft).mean())
        observed = [halfway(np.maximum.accumulate(probe_means(probe, layers)[None, :],
                                                  axis=1))[0],
                    halfway(np.array([[c.mean() for c in ft]]))[0]]
        n = tuple(len(c) for c in ft)
        probed = tuple(len(probe.cell(Probe(layer))) for layer in layers)
        # where the seeds are short, the family that adds them: the probes' or the curve's
        short_of = "probing" if min(probed) <= min(n) else "progressive"
        return by_probability(p_later, 1 - p_later, (*n, *probed),
                              Interval(p_later, np.nan, np.nan, "bootstrap P", n),
                              f"k50: probes {observed[0]}, finetuning {observed[1]}; "
                              f"P(k50_probe > k50_ft) = {p_later:.3f} over {RESAMPLES:,} "
                              "resamples (decides at >= 0.95 / <= 0.05)", short_of)


def curve_gap(finetuning: np.ndarray, probes: np.ndarray) -> np.ndarray:
    """D, the mean over k = 0..L of |G(k) − P̃(k)| per row: G(k) = (s(k) − s(0)) / (s(L) −
    s(0)), the progressive curve's share of the gain, and P̃ the probe curve min–max
    normalized, (p(k) − min p) / (max p − min p), the probed state k aligned with k kept
    layers (claims.md 003-C8)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = (finetuning - finetuning[:, :1]) / (finetuning[:, -1:] - finetuning[:, :1])
        low, high = probes.min(axis=1, keepdims=True), probes.max(axis=1, keepdims=True)
        probe = (probes - low) / (high - low)
    return np.abs(gain - probe).mean(axis=1)


def _stacked(means: list) -> np.ndarray:
    """Cell means (floats, or arrays of resamples) as rows of curves, one column per cell."""
    return np.atleast_2d(np.stack([np.asarray(x, dtype=np.float64) for x in means], axis=-1))


def _gap(finetune: list, probes: list) -> np.ndarray:
    return curve_gap(_stacked(finetune), _stacked(probes)).squeeze()


def _gap_interval(curves: list[list], probe: Group) -> Interval:
    """[BOOT] of a statistic of D over ``curves`` (each one group's progressive cells, its
    seeds resampled jointly where its cells share them) and the probe curve (its seeds
    apart): ``cluster_bootstrap``, so a cell under 5 seeds falls back to the delta method,
    marked "low n" (claims.md §0.4). One curve: D; two: D(second) − D(first)."""
    layers = range(probe.num_layers + 1)
    boot = [boot_group(cells) for cells in curves]
    boot.append(boot_group([probe.cell(Probe(layer)) for layer in layers]))
    if len(curves) == 1:
        return cluster_bootstrap(boot, lambda m: _gap(m[0], m[1]),
                                 resamples=BOOT_RESAMPLES)
    return cluster_bootstrap(boot, lambda m: _gap(m[1], m[2]) - _gap(m[0], m[2]),
                             resamples=BOOT_RESAMPLES)


_FLAT = ("the gain s(L) - s(0) or the probe curve is flat in more than 1% of the resamples: "
         "D undefined there")


@dataclass(frozen=True)
class CurveGap:
    """004-C2: D (``curve_gap``) between the progressive and the probe curve, by [BOOT]
    over the finetuning seeds and the probe seeds (each resampled jointly across its own
    cells; the delta method, marked "low n", where a cell has under 5 seeds); decided
    against ``threshold`` (δ_norm = 0.1: the curves' mean gap is more than 10% of their
    range)."""

    threshold: float = 0.1
    needs_finetune = True
    scope = "probe"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in range(num_layers + 1)]

    def evaluate(self, finetune: Group, probe: Group, n_min: int) -> Finding:
        ft, short = _curves(finetune, probe, n_min)
        if short is not None:
            return short
        interval = _gap_interval([ft], probe)
        if not interval.defined:  # no gain (or a flat probe) in some resamples
            return Finding(Verdict.INCONCLUSIVE, interval, family="progressive", reason=_FLAT)
        rule = Rule("threshold", self.threshold, against=self.threshold)
        return Finding(rule.decide(interval), interval, rule=rule, family="progressive",
                       reason=f"D = mean |G(k) - P(k)| over k, both curves normalized to "
                              f"[0, 1]; decides against {self.threshold:g}")


@dataclass(frozen=True)
class CurveGapShift:
    """003-C8: the progressive curve is closer to the probe curve with scarce data, D(large)
    − D(small) > 0 (``curve_gap``), by [BOOT] over each size's seeds and the probe seeds
    apart (the delta method, marked "low n", where a cell has under 5 seeds); directional."""

    ratio: float = 10.0
    scope = "probe sizes"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [Kept(k) for k in range(num_layers + 1)]

    def evaluate(self, small: Group, large: Group, probe: Group, n_min: int) -> Finding:
        (fs, short), (fl, short_large) = (_curves(g, probe, n_min) for g in (small, large))
        if short is not None or short_large is not None:
            missing = tuple(dict.fromkeys((*(short.missing if short else ()),
                                           *(short_large.missing if short_large else ()))))
            return lacking(missing, _family_of(missing), f" for {probe.task}")
        interval = _gap_interval([fs, fl], probe)
        if not interval.defined:
            return Finding(Verdict.INCONCLUSIVE, interval, family="progressive",
                           reason="a flat curve in more than 1% of the resamples: D undefined")
        p_mean = probe_means(probe, range(probe.num_layers + 1))[None, :]
        gaps = [float(curve_gap(np.array([[c.mean() for c in cells]]), p_mean)[0])
                for cells in (fs, fl)]
        return Finding(directional(interval), interval, rule=Rule(), family="progressive",
                       reason=f"D {gaps[0]:.3f} at {small.size}, {gaps[1]:.3f} at "
                              f"{large.size} (mean |G(k) - P(k)|, both normalized)")


@dataclass(frozen=True)
class WithProbes:
    """A conjunction of parts, each a finetuning ``Contrast`` (evaluated in the finetuning
    group) or a probe statistic: supported if every part is, contradicted if any is."""

    parts: tuple[tuple[str, object], ...]
    needs_finetune = True
    scope = "probe"

    def conditions(self, num_layers: int) -> list[Condition]:
        return [c for _, part in self.parts for c in part.conditions(num_layers)]

    def evaluate(self, finetune: Group, probe: Group, n_min: int) -> Finding:
        found = [(label, part.evaluate(finetune, n_min) if isinstance(part, Contrast)
                  else part.evaluate(finetune, probe, n_min)) for label, part in self.parts]
        missing = tuple(m for _, f in found for m in f.missing)
        verdict = conjunction([f.verdict for _, f in found])
        if missing:
            first = next(f for _, f in found if f.missing)
            return lacking(missing, first.family, f" for {finetune.task}")
        shown = next((f for _, f in found if f.verdict is verdict), found[0][1])
        named = "; ".join(
            f"({label}) {f.verdict}" + (f" {f.interval.estimate:+.4f}"
                                        if f.interval is not None else "")
            + (f" ({f.reason})" if f.reason else "") for label, f in found)
        return Finding(verdict, shown.interval, rule=shown.rule, share=shown.share,
                       family=shown.family, reason=named, min_runs=shown.min_runs,
                       undecided=shown.undecided)
