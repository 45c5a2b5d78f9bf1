"""How a statistic's interval becomes a verdict (``Rule``, claims.md §0.5, with the
margins of δ_abs per metric) and what a statistic found in its groups (``Finding``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from reinit_tune.inference import (
    Interval,
    Verdict,
    directional,
    equivalence,
    non_superiority,
    threshold,
)
from reinit_tune.inference.bootstrap import MIN_BOOTSTRAP_N
from reinit_tune.tasks import LOOSE_METRICS


def delta_abs(metric: str) -> float:
    """claims.md §0.5's δ_abs: 0.02 on a correlation-like scale, 0.01 for accuracy, F1, EM."""
    return 0.02 if metric in LOOSE_METRICS else 0.01


@dataclass(frozen=True)
class Rule:
    """How an interval decides (claims.md §0.5): ``directional`` (θ > 0, or < 0 with
    ``value`` −1), ``threshold`` (θ ≥ value), ``equivalence`` (|θ| ≤ value),
    ``non-superiority`` (θ ≤ value)."""

    kind: str = "directional"
    value: float = 0.0
    # "abs": ``value`` is δ_abs of the group's metric (§0.5); "against-abs": ``against`` is
    margin: str | None = None
    against: float | None = None  # a threshold's own contradiction boundary, if not value

    def at(self, metric: str) -> Rule:
        """This rule with a metric-dependent margin resolved: δ_abs = 0.01 for accuracy,
        F1 and EM, 0.02 for MCC and correlations."""
        delta = delta_abs(metric)
        if self.margin == "abs":
            return Rule(self.kind, delta, None, self.against)
        if self.margin == "against-abs":
            return Rule(self.kind, self.value, None, delta)
        return self

    def decide(self, interval: Interval) -> Verdict:
        if self.kind == "directional":
            return directional(interval, positive=self.value >= 0)
        if self.kind == "threshold" and self.against is not None:
            if not interval.defined:
                return Verdict.NOT_ENOUGH_DATA
            return (Verdict.SUPPORTED if interval.low > self.value else
                    Verdict.CONTRADICTED if interval.high < self.against else
                    Verdict.INCONCLUSIVE)
        if self.kind == "threshold":
            return threshold(interval, self.value)
        if self.kind == "equivalence":
            return equivalence(interval, self.value)
        if self.kind == "non-superiority":
            return non_superiority(interval, self.value)
        raise ValueError(f"unknown rule {self.kind!r}")

    def boundary(self, interval: Interval) -> float:
        """The value the interval must clear to decide, for "seeds needed"."""
        if self.kind == "directional":
            return 0.0
        if self.kind == "equivalence":
            return math.copysign(self.value, interval.estimate)
        return self.value

    def __str__(self) -> str:
        return {"directional": "> 0" if self.value >= 0 else "< 0",
                "threshold": f">= {self.value:g}", "equivalence": f"|.| <= {self.value:g}",
                "non-superiority": f"<= {self.value:g}"}[self.kind]


@dataclass(frozen=True)
class Finding:
    """What a statistic found in its groups."""

    verdict: Verdict
    interval: Interval | None = None
    reason: str = ""
    rule: Rule | None = None
    share: Interval | None = None  # the displayed share, where the claim is about one
    missing: tuple[str, ...] = ()  # cells without enough runs: "progressive k=2 (1 run)"
    family: str | None = None  # the family whose runs would decide it
    # what the command that runs them says instead of ``--sizes N`` (a family's own flags)
    sizes_flag: str | None = None
    # the runs per cell the statistic needs to decide at all (a bootstrap probability: 5),
    # where more than the claim's n_min: what the command's --seeds asks for
    min_runs: int | None = None
    # what is undecided and must clear which value, where it is not ``interval`` against
    # ``rule`` (a failed precondition: the pretraining gain against 0): what "seeds
    # needed" is computed on
    undecided: tuple[Interval, float] | None = None
    # the tasks whose runs would decide it, where they are not the groups' own (a task set
    # short of a task, or of a second one): what the command's --tasks names
    tasks: tuple[str, ...] = ()

    def to_decide(self) -> tuple[Interval, float] | None:
        """The interval that must clear a value for this finding to be decided, and that
        value (``undecided``, else ``interval`` against its rule's boundary)."""
        if self.undecided is not None:
            return self.undecided
        return None if self.boundary is None else (self.interval, self.boundary)

    @property
    def boundary(self) -> float | None:
        return None if self.rule is None or self.interval is None \
            else self.rule.boundary(self.interval)


def lacking(missing, family: str | None, where: str = "", tasks=()) -> Finding:
    """"Not enough data": the cells (or runs) ``missing``, the family that would run them,
    where they are missing (" at 500 for sst2"), and the ``tasks`` to run where they are
    not the groups' own."""
    missing = tuple(missing)
    return Finding(Verdict.NOT_ENOUGH_DATA, missing=missing, family=family,
                   reason="missing: " + ", ".join(missing) + where,
                   tasks=tuple(dict.fromkeys(tasks)))


def by_probability(p_for: float, p_against: float, n: tuple[int, ...], interval: Interval,
                   reason: str, family: str, level: float = 0.95) -> Finding:
    """A verdict decided by bootstrap probabilities (a knee, a probe peak: statistics with
    no delta-method fallback): supported at ``P(for) >= level``, contradicted at
    ``P(against) >= level``. Under ``MIN_BOOTSTRAP_N`` seeds in a cell the resamples of a
    few seeds are not a test (claims.md §0.4): inconclusive, marked "low n"."""
    if min(n) < MIN_BOOTSTRAP_N:
        interval = dataclasses.replace(interval, method=interval.method + " (low n)")
        return Finding(Verdict.INCONCLUSIVE, interval, family=family, min_runs=MIN_BOOTSTRAP_N,
                       reason=(f"low n: {min(n)} seeds in a cell, under the "
                               f"{MIN_BOOTSTRAP_N} a bootstrap probability needs to decide "
                               f"(claims.md §0.4); {reason}"))
    verdict = (Verdict.SUPPORTED if p_for >= level else
               Verdict.CONTRADICTED if p_against >= level else Verdict.INCONCLUSIVE)
    return Finding(verdict, interval, reason=reason, family=family)
