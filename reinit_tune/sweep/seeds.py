"""Seeds on demand (``--seeds auto``): the groups of a sweep, what is known of each as its
seeds finish (``GroupState``), and what a sweep reports of them (``SeedReport``). The Tune
searcher that gives each group another seed only while its paired contrasts are wider than
``--target-ci`` is ``reinit_tune.sweep.searcher.SeedSearcher``.

A group is every trial of a grid that shares all fields but the seed and the surgery (task,
train size, epochs, learning rate, ... : one experiment setting); its conditions are its
surgeries, and its reference is the unmodified model (no layer or head reinitialized, the
original layer order). A seed of a group is one trial per condition, all with that seed:
the same train subset and batch order, so every contrast is paired by seed. The contrasts
are each condition minus the reference (progressive: s(k) - s(L) for each k; localized:
each block against the full model; permutations: the permuted order against the original
one; ``Family.contrasts`` says it per family).

A group's seeds are handed out in order, one seed at a time past ``--min-seeds``, and each
decision (``reinit_tune.inference.sequential.decide``) reads only the group's complete seeds
0..n-1 as the store holds them: rerunning the command, resuming after a crash or a second
driver on the same store reaches the same seeds per group, and the stored seeds of every
group are 0..n-1 with every condition present. Groups decide independently as their seeds
finish, so a sweep of many groups keeps its cluster busy; a group waits for its seed to
finish before it decides on the next one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from reinit_tune import store
from reinit_tune.config import LABEL_FIELDS, REPLICATE_FIELDS, TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.inference import collapse
from reinit_tune.inference.sequential import SeedDecision, SeedRule, decide
from reinit_tune.tasks import get_task
from reinit_tune.train_size import TrainSize
from reinit_tune.wording import counted

# The fields that make a trial's condition within its group (its surgery); every other
# field, but the seed, makes the group.
CONDITION_FIELDS = ("reinit_layers", "reinit_heads", "layer_order")
REFERENCE = ((), (), None)
# The families whose ``contrasts`` are declared (``--seeds auto``): what the claim verdicts'
# commands may name without importing the families
ON_DEMAND_FAMILIES = ("progressive", "localized", "single_layer", "heads", "permutations",
                      "variants")  # the unmodified model: nothing reinitialized, original order


def condition_of(config: TrialConfig) -> tuple:
    """A trial's condition in its group: its surgery. Every permuted order is one condition
    ("permuted"): permutation n runs with seed n (003 §5), so the order is the replicate."""
    return (config.reinit_layers, config.reinit_heads,
            None if config.layer_order is None else "permuted")


def group_key(config: TrialConfig) -> tuple:
    """What a trial's group shares: every field but its condition, seed and label."""
    skip = {*CONDITION_FIELDS, *REPLICATE_FIELDS, *LABEL_FIELDS}
    return tuple((f.name, getattr(config, f.name)) for f in dataclasses.fields(config)
                 if f.name not in skip)


@dataclass(frozen=True)
class SeedGroup:
    """One experiment setting of a sweep: ``trials[seed][condition]`` is a trial id."""

    label: str
    conditions: tuple[tuple, ...]  # the reference first
    trials: tuple[Mapping[tuple, str], ...]  # by seed 0..max_seeds-1
    metric: str = "accuracy"  # its task's primary metric (what a trial's score is)
    small: bool = False  # it trains on small data (``collapse.SMALL_DATA``)

    def contrasts(self) -> int:
        return len(self.conditions) - 1


def unseen_collapse_note(groups: Iterable[SeedGroup], rule: SeedRule) -> str | None:
    """What seeds on demand costs in a plan's small-data groups: each allows for a collapse
    mode no run has shown (``collapse.possible``), so it closes only once the rate its runs
    leave possible, times its gap to the majority score, fits within ``--target-ci`` too;
    the seeds that takes at two gaps. None where no group is small."""
    small = [g for g in groups if g.small]
    if not small:
        return None
    need = {gap: collapse.unseen_seeds(gap, rule.target_ci) for gap in (0.1, 0.3)}
    cost = ", ".join(f"a gap of {gap:g} at least {n} seeds" + (
        f" (beyond --max-seeds {rule.max_seeds}: that group reports the wider interval)"
        if n > rule.max_seeds else "") for gap, n in need.items())
    return (f"seeds on demand: small data (at most {collapse.SMALL_DATA:,} examples) in "
            f"{counted(len(small), 'group')}, where 10-30% of runs can collapse to the "
            "majority class (Mosbach et al. 2021): each group's intervals allow for a collapse "
            "mode its runs have not shown (0 of n runs leaves up to 1 - 0.025^(1/n)), so it "
            "closes once that rate times its gap to the majority score fits within "
            f"--target-ci {rule.target_ci:g} too: {cost}")


def group_and_seed(groups: Iterable[SeedGroup]) -> Callable[[TrialConfig], tuple | None]:
    """A trial's (group, seed) position among ``groups`` (None outside them): what packs
    are split by under seeds on demand, so a pack holds one group's trials of one seed."""
    where = {t: (i, seed) for i, group in enumerate(groups)
             for seed, per_seed in enumerate(group.trials) for t in per_seed.values()}
    return lambda config: where.get(config.trial_id)


def _label(config: TrialConfig, differing: set[str]) -> str:
    size = "full" if config.train_size is None else f"{config.train_size:g}"
    parts = [config.task, f"n={size}"]
    parts += [f"{k}={getattr(config, k)}" for k in sorted(differing - {"task", "train_size"})]
    return " ".join(parts)


def groups_of(configs: Iterable[TrialConfig], rule: SeedRule, family: str) -> list[SeedGroup]:
    """The groups of a ``--seeds auto`` grid (built with ``rule.max_seeds`` seeds). Raises
    ``InputError`` where a group cannot be paired: no unmodified model to contrast with, one
    condition only, or a seed missing a condition."""
    by_group: dict[tuple, dict[int, dict[tuple, str]]] = {}
    first: dict[tuple, TrialConfig] = {}
    for config in configs:
        key = group_key(config)
        first.setdefault(key, config)
        seeds = by_group.setdefault(key, {})
        seeds.setdefault(config.seed, {})[condition_of(config)] = config.trial_id
    # what tells groups apart, besides task and size, names them
    values = [dict(k) for k in by_group]
    differing = {name for name in (values[0] if values else {})
                 if len({repr(v.get(name)) for v in values}) > 1}
    groups = []
    for key, seeds in by_group.items():
        label = _label(first[key], differing)
        conditions = sorted({c for per_seed in seeds.values() for c in per_seed}, key=repr)
        if REFERENCE not in conditions:
            raise InputError(
                f"--seeds auto: {family} {label} has no run of the unmodified model (nothing "
                "reinitialized, the original layer order) to contrast each surgery with; "
                "include it (progressive: k = L in --k) or use a fixed --seeds N")
        if len(conditions) < 2:
            raise InputError(f"--seeds auto: {family} {label} runs one condition only, so "
                             "it has no contrast to make precise; use a fixed --seeds N")
        wanted = list(range(rule.max_seeds))
        if sorted(seeds) != wanted or any(len(s) != len(conditions) for s in seeds.values()):
            raise InputError(
                f"--seeds auto: {family} {label} does not run every condition with every "
                f"seed 0..{rule.max_seeds - 1}: "
                + ("pass --permutations equal to --max-seeds (run n: permutation n, seed n; "
                   "the authors' protocol pairs no seeds)" if "permutations" in family
                   else "its protocol pairs no seeds; use a fixed --seeds N"))
        conditions.remove(REFERENCE)
        task = get_task(first[key].task)
        examples = TrainSize.of(first[key].train_size).wanted(task.train_rows, task.name)
        groups.append(SeedGroup(label, (REFERENCE, *conditions),
                                tuple(seeds[s] for s in wanted), task.primary,
                                examples <= collapse.SMALL_DATA))
    return sorted(groups, key=lambda g: g.label)


@dataclass(frozen=True)
class Stored:
    """The ok scores of stored trials, and their task's majority-class score (what a
    collapsed run scores at most), by trial id."""

    scores: dict[str, float] = field(default_factory=dict)
    majority: dict[str, float] = field(default_factory=dict)


@dataclass
class GroupState:
    """What a ``SeedSearcher`` knows of one group: scores by trial id (ok runs only), the
    trials that failed, the seeds handed out so far, and its task's majority-class score
    once a run has told it."""

    group: SeedGroup
    scores: dict[str, float] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    released: int = 0
    decision: SeedDecision | None = None
    majority: float | None = None

    @classmethod
    def of(cls, group: SeedGroup, stored: Stored) -> GroupState:
        """The state ``stored`` gives ``group``."""
        ids = [t for per_seed in group.trials for t in per_seed.values()]
        majority = next((stored.majority[t] for t in ids if t in stored.majority), None)
        return cls(group, {t: stored.scores[t] for t in ids if t in stored.scores},
                   majority=majority)

    def decide(self, rule: SeedRule) -> SeedDecision:
        """``sequential.decide`` on the complete seeds, with the collapse allowance."""
        n = self.complete()
        return decide(self.diffs(n), rule, self.allowance(n))

    def allowance(self, n: int) -> np.ndarray | None:
        """Per contrast, how far the collapse rates the first ``n`` seeds' runs leave possible
        could move it (``collapse.contrast_allowances``; at small data whether or not a run
        collapsed); None where none may."""
        if self.majority is None or n < 1:
            return None
        return collapse.contrast_allowances(
            [np.array([self.scores[s[c]] for s in self.group.trials[:n]])
             for c in self.group.conditions], self.majority, self.group.metric,
            unseen=self.group.small)

    def complete(self) -> int:
        """Seeds 0..n-1 with every condition scored."""
        n = 0
        for per_seed in self.group.trials:
            if not all(t in self.scores for t in per_seed.values()):
                break
            n += 1
        return n

    def diffs(self, n: int) -> np.ndarray:
        ref = self.group.conditions[0]
        return np.array([[self.scores[s[c]] - self.scores[s[ref]]
                          for c in self.group.conditions[1:]]
                         for s in self.group.trials[:n]]).reshape(n, len(self.group.conditions) - 1)

    def touched(self) -> int:
        """One past the last seed with any condition scored (0: none)."""
        return max((s + 1 for s, per_seed in enumerate(self.group.trials)
                    if any(t in self.scores for t in per_seed.values())), default=0)

    def stuck(self, n: int) -> bool:
        """Seed n has a trial that failed in this run: the group cannot complete it."""
        return n < len(self.group.trials) and any(
            t in self.failed for t in self.group.trials[n].values())


@dataclass(frozen=True)
class GroupResult:
    """One group's seeds at the end of a sweep, for its summary."""

    label: str
    seeds: int
    half_width: float | None  # of the widest interval it reports (``reported_half_widths``)
    reason: str
    trials_per_seed: int


@dataclass(frozen=True)
class SeedReport:
    """What ``--seeds auto`` did: each group's seeds and final half-width, and the trials a
    fixed design of ``--max-seeds`` seeds would have run."""

    rule: SeedRule
    groups: tuple[GroupResult, ...]

    @property
    def trials(self) -> int:
        return sum(g.seeds * g.trials_per_seed for g in self.groups)

    @property
    def fixed_trials(self) -> int:
        return sum(self.rule.max_seeds * g.trials_per_seed for g in self.groups)

    def __str__(self) -> str:
        shown = 20
        lines = [f"seeds on demand (--target-ci {self.rule.target_ci:g}): {self.trials} trials "
                 f"in {counted(len(self.groups), 'group')}; a fixed --seeds "
                 f"{self.rule.max_seeds} design "
                 f"runs {self.fixed_trials}"]
        width = max((len(g.label) for g in self.groups[:shown]), default=0)
        for g in self.groups[:shown]:
            hw = "-" if g.half_width is None else f"±{g.half_width:.4f}"
            lines.append(f"  {g.label:<{width}}  {g.seeds:>3} seeds  widest {hw}  ({g.reason})")
        lines.append("  (widest: the widest contrast's 95% interval, mean ± max(--target-ci, "
                     "t·S/√n): the rule's fixed-width interval)")
        if len(self.groups) > shown:
            lines.append(f"  ... and {counted(len(self.groups) - shown, 'more group')}")
        return "\n".join(lines)


def seed_report(states: Iterable[GroupState], rule: SeedRule) -> SeedReport:
    """Each group's complete seeds, widest half-width and why it has that many."""
    results = []
    for s in states:
        n = s.complete()
        d = s.decide(rule)
        reason = (d.reason.value if d.closed
                  else f"a trial of seed {n} did not finish ok" if s.stuck(n)
                  else "not finished")
        results.append(GroupResult(s.group.label, n, d.reported, reason,
                                   len(s.group.conditions)))
    return SeedReport(rule, tuple(results))


def stored_report(groups: Iterable[SeedGroup], stored: Stored, rule: SeedRule) -> SeedReport:
    """``seed_report`` of what the store holds."""
    return seed_report([GroupState.of(g, stored) for g in groups], rule)


def closed_seeds(group: SeedGroup, stored: Stored, rule: SeedRule) -> int | None:
    """The seeds ``group`` has in all if the runs ``stored`` already close it (its seeds
    past the decision that are partly stored are finished, to stay paired), else None."""
    state = GroupState.of(group, stored)
    if not state.decide(rule).closed:
        return None
    return max(state.complete(), state.touched())


def stored_scores(results_dir: str, trial_ids: set[str]) -> Stored:
    """The scores of the ok trials of ``trial_ids`` the store holds, and their tasks'
    majority-class scores."""
    rows = store.load_trials(results_dir, status="ok",
                             columns=["trial_id", "score", "majority_score"])
    rows = rows[rows["trial_id"].isin(trial_ids)]
    majority = rows.dropna(subset=["majority_score"]) if "majority_score" in rows else rows[:0]
    return Stored(dict(zip(rows["trial_id"], rows["score"].astype(float), strict=True)),
                  dict(zip(majority["trial_id"], majority["majority_score"].astype(float),
                           strict=True)))
