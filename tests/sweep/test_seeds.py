"""Seeds on demand without Ray's cluster: the groups a grid pairs by seed (and the grids it
refuses, naming the flag), and ``SeedSearcher`` driven as Tune drives it, with scores planted
per group: a quiet group stops at --min-seeds, a noisy one at --max-seeds, one in between
where its interval reaches --target-ci; seeds go out in order, stored seeds stay paired, and
a searcher rebuilt from what is stored at any point reaches the same seeds."""

from __future__ import annotations

import numpy as np
import pytest
from ray.tune.search import Searcher

from reinit_tune import EMBEDDED_MODEL, families
from reinit_tune.errors import InputError
from reinit_tune.families import Grid
from reinit_tune.inference.sequential import SeedRule
from reinit_tune.model.shape import ModelShape
from reinit_tune.sweep.searcher import SeedSearcher
from reinit_tune.sweep.seeds import REFERENCE, Stored, groups_of

SHAPE = ModelShape(num_layers=4, num_heads=4, hidden_size=32)
RULE = SeedRule(0.02, min_seeds=3, max_seeds=12)


def grid(**changes) -> Grid:
    values = dict(model=EMBEDDED_MODEL, shape=SHAPE, tasks=("rte", "sst2", "cola"),
                  sizes=(200,), seeds=RULE.max_seeds, epochs=1)
    return Grid(**{**values, **changes})


def test_groups_pair_every_surgery_with_the_full_model_by_seed():
    configs = families.get("progressive").configs(grid())
    groups = groups_of(configs, RULE, "progressive")
    assert [g.label for g in groups] == ["cola n=200", "rte n=200", "sst2 n=200"]
    for group in groups:
        assert group.conditions[0] == REFERENCE and group.contrasts() == 4  # k = 0..3 vs L
        assert len(group.trials) == RULE.max_seeds
        assert all(set(s) == set(group.conditions) for s in group.trials)
    localized = groups_of(families.get("localized").configs(grid(tasks=("rte",))), RULE,
                          "localized")
    # 3-layer blocks 1-3, 2-4 and the verdicts' one-layer blocks 1..4 (claims.md §0.2),
    # reinitialized or preserved, as 10 distinct layer sets, + embeddings only
    assert localized[0].contrasts() == 9
    permuted = groups_of(families.get("permutations").configs(grid(tasks=("rte",)),
                                                              permutations=RULE.max_seeds),
                         RULE, "permutations")
    assert permuted[0].contrasts() == 2  # the permuted order, all reinitialized


def test_grids_that_pair_nothing_are_refused_naming_the_flag():
    progressive = families.get("progressive")
    with pytest.raises(InputError, match="k = L in --k"):
        groups_of(progressive.configs(grid(), k=[0, 1]), RULE, "progressive")
    permutations = families.get("permutations")
    with pytest.raises(InputError, match="--permutations equal to --max-seeds"):
        groups_of(permutations.configs(grid(tasks=("rte",)), permutations=4), RULE,
                  "permutations")
    with pytest.raises(InputError, match="one condition only"):
        groups_of(progressive.configs(grid(), k=[4]), RULE, "progressive")


class Simulated:
    """Tune's side: trials suggested, then finished with planted scores, a few at a time."""

    def __init__(self, groups, scores, stored=None, slots: int = 5, majority=None,
                 rule=RULE):
        self.groups, self.scores, self.slots = groups, scores, slots
        self.stored: dict[str, float] = dict(stored or {})
        self.order: list[str] = []
        self.majority, self.rule = majority, rule

    def searcher(self) -> SeedSearcher:
        todo = [t for g in self.groups for s in g.trials for t in s.values()
                if t not in self.stored]
        known = {} if self.majority is None else {t: self.majority for t in self.stored}
        return SeedSearcher(self.groups, self.rule, {t: {"seed": 0} for t in todo},
                            {t: [t] for t in todo}, "/nonexistent",
                            Stored(dict(self.stored), known))

    def run(self, searcher: SeedSearcher, stop_after: int | None = None) -> bool:
        """Run until the searcher finishes (True) or ``stop_after`` trials were stored."""
        running: list[str] = []
        while True:
            while len(running) < self.slots:
                suggestion = searcher.suggest("tune-id")
                if suggestion == Searcher.FINISHED:
                    assert not running
                    return True
                if suggestion is None:
                    break
                running.append(suggestion["trial"]["trial_id"])
            assert running, "the searcher waits on nothing"
            trial = running.pop(0)
            self.order.append(trial)
            self.stored[trial] = self.scores[trial]
            searcher.record(trial, "ok", self.scores[trial], self.majority)
            if stop_after is not None and len(self.order) >= stop_after:
                return False


def planted(groups, noise: dict[str, float]) -> dict[str, float]:
    """Per group (by task) a score per trial: condition means plus a per-seed shift and
    independent noise of the given SD."""
    rng = np.random.default_rng(5)
    scores = {}
    for group in groups:
        sd = noise[group.label.split()[0]]
        for per_seed in group.trials:
            shift = rng.normal(0, 0.05)
            for i, (_, trial) in enumerate(sorted(per_seed.items(), key=repr)):
                scores[trial] = 0.6 + 0.01 * i + shift + rng.normal(0, sd)
    return scores


def seeds_stored(groups, stored) -> dict[str, int]:
    out = {}
    for group in groups:
        complete = [all(t in stored for t in s.values()) for s in group.trials]
        touched = [any(t in stored for t in s.values()) for s in group.trials]
        n = sum(complete)
        assert complete[:n] == [True] * n and not any(touched[n:]), group.label  # paired
        out[group.label.split()[0]] = n
    return out


def test_each_group_gets_the_seeds_its_noise_needs_and_no_more():
    groups = groups_of(families.get("progressive").configs(grid()), RULE, "progressive")
    scores = planted(groups, {"rte": 0.0005, "sst2": 0.1, "cola": 0.008})
    sim = Simulated(groups, scores)
    searcher = sim.searcher()
    assert sim.run(searcher)
    seeds = seeds_stored(groups, sim.stored)
    assert seeds["rte"] == RULE.min_seeds  # almost no noise in the contrasts
    assert seeds["sst2"] == RULE.max_seeds  # far wider than --target-ci
    assert RULE.min_seeds < seeds["cola"] < RULE.max_seeds  # reached it on the way
    report = {g.label.split()[0]: g for g in searcher.report().groups}
    assert report["cola"].reason == "reached --target-ci"
    assert report["cola"].half_width <= RULE.target_ci
    assert report["sst2"].reason == "stopped at --max-seeds"
    assert searcher.report().trials == sum(seeds.values()) * 5
    assert searcher.report().fixed_trials == 3 * RULE.max_seeds * 5
    # past --min-seeds a group's seed n+1 is handed out only once seed n is decided
    where = {t: (g.label, s) for g in groups for s, per in enumerate(g.trials)
             for t in per.values()}
    for label in {g.label for g in groups}:
        seen = [where[t][1] for t in sim.order if where[t][0] == label]
        assert seen == sorted(seen) or max(seen) < RULE.min_seeds


def test_a_group_whose_seeds_all_give_one_difference_stays_open():
    """Runs predicting one class on every seed score the same on every seed: no spread to
    plan with, so the group is not closed at --min-seeds."""
    groups = groups_of(families.get("progressive").configs(grid(tasks=("rte",))), RULE,
                       "progressive")
    sim = Simulated(groups, {t: 0.5271 for g in groups for s in g.trials for t in s.values()})
    searcher = sim.searcher()
    assert sim.run(searcher)
    assert seeds_stored(groups, sim.stored) == {"rte": RULE.max_seeds}
    (only,) = searcher.report().groups
    assert only.reason == "stopped at --max-seeds" and only.half_width == RULE.target_ci


@pytest.mark.parametrize("crash_after", [7, 23, 40])
def test_a_searcher_rebuilt_from_the_store_reaches_the_same_seeds(crash_after):
    groups = groups_of(families.get("progressive").configs(grid()), RULE, "progressive")
    scores = planted(groups, {"rte": 0.0, "sst2": 0.1, "cola": 0.008})
    whole = Simulated(groups, scores)
    assert whole.run(whole.searcher())
    crashed = Simulated(groups, scores)
    assert not crashed.run(crashed.searcher(), stop_after=crash_after)
    resumed = Simulated(groups, scores, stored=crashed.stored)  # what the store holds
    assert resumed.run(resumed.searcher())
    assert seeds_stored(groups, resumed.stored) == seeds_stored(groups, whole.stored)
    assert set(resumed.stored) == set(whole.stored)


def _collapsing(groups, rate: float, seed: int = 3) -> dict[str, float]:
    """RTE scores 0.65 + 0.01 i (condition i) with small noise; each run of a reinitialized
    condition collapses to the majority rate (0.527) with probability ``rate``."""
    rng = np.random.default_rng(seed)
    scores = {}
    for group in groups:
        for per_seed in group.trials:
            for i, (condition, trial) in enumerate(sorted(per_seed.items(), key=repr)):
                score = 0.65 + 0.01 * i + rng.normal(0, 0.002)
                if condition != REFERENCE and rng.random() < rate:
                    score = 0.527
                scores[trial] = score
    return scores


def test_a_group_where_runs_collapse_stops_only_once_unseen_rates_fit_the_target():
    """A quiet RTE group at 200 examples (small data), once without collapses and once with
    a run at the majority rate. Without, it still allows for a mode no run has shown: the
    upper limit of 0 of n (Clopper-Pearson) times each cell's gap to the majority rate must
    fit within --target-ci, so it stops at the first n where that does, not at
    --min-seeds. With one, the rates its runs leave possible (upper limit less 1/n) times
    the gap must fit as well, so it runs on (reason: the collapse rates), and a searcher
    rebuilt from the store decides the same."""
    from statsmodels.stats.proportion import proportion_confint

    rule = SeedRule(0.05, min_seeds=3, max_seeds=40)
    groups = groups_of(families.get("progressive").configs(
        grid(tasks=("rte",), seeds=rule.max_seeds)), rule, "progressive")
    assert groups[0].small
    calm = Simulated(groups, _collapsing(groups, 0.0), majority=0.527, rule=rule)
    assert calm.run(calm.searcher())
    quiet = seeds_stored(groups, calm.stored)["rte"]
    # 0 of n moves a cell's mean only down, by the upper limit times its gap: a contrast
    # down by its condition's, up by its reference's; the widest is the largest gap
    scores = _collapsing(groups, 0.0)
    conditions = sorted(groups[0].trials[0], key=repr)
    widest = max(np.mean([scores[s[c]] for s in groups[0].trials[:quiet]]) - 0.527
                 for c in conditions)
    unseen = [m for m in range(2, 41)
              if proportion_confint(0, m, 0.05, "beta")[1] * widest < rule.target_ci]
    assert quiet >= unseen[0] > rule.min_seeds + 3, (quiet, unseen[0])
    first = next(t for c, t in sorted(groups[0].trials[0].items(), key=repr)
                 if c != REFERENCE)
    scores[first] = 0.527  # seed 0's first reinitialized run collapsed
    hit = Simulated(groups, scores, majority=0.527, rule=rule)
    searcher = hit.searcher()
    assert hit.run(searcher)
    n = seeds_stored(groups, hit.stored)["rte"]
    # one collapse in n runs: its upper limit less 1/n, times the gap (~0.13), is under
    # --target-ci only from n on, and the t part of the interval is tiny
    gap = 0.66 - 0.527
    fits = [m for m in range(2, 41)
            if (proportion_confint(1, m, 0.05, "beta")[1] - 1 / m) * gap < rule.target_ci]
    assert n >= fits[0] > rule.min_seeds, (n, fits[0])
    (only,) = searcher.report().groups
    assert only.reason in ("reached --target-ci", "stopped at --max-seeds")
    partial = Simulated(groups, scores, majority=0.527, rule=rule)
    partial.stored = {t: v for t, v in hit.stored.items()
                      if any(t in s.values() for s in groups[0].trials[:fits[0] - 2])}
    rebuilt = partial.searcher()
    state = rebuilt.states[0]
    assert state.majority == 0.527
    assert not state.decision.closed and state.allowance(state.complete()) is not None
    # without its task's majority-class score a group cannot tell a collapse: plain rule
    blind = Simulated(groups, scores, rule=rule)
    assert blind.run(blind.searcher())
    assert seeds_stored(groups, blind.stored)["rte"] < quiet


def test_the_families_that_declare_contrasts_are_the_on_demand_ones():
    from reinit_tune.sweep.seeds import ON_DEMAND_FAMILIES

    declared = {f.name for f in families.all_families() if f.contrasts}
    assert declared == set(ON_DEMAND_FAMILIES)


def test_small_data_groups_are_told_what_an_unseen_collapse_mode_costs(capsys, tmp_path,
                                                                       tiny_bert):
    """A --seeds auto plan of groups at 200 examples (small data) says each allows for a
    collapse mode its runs have not shown, and what that costs: the fewest seeds at which
    0 of n leaves a rate (Clopper-Pearson upper limit) that, times a gap of 0.1 or 0.3 to
    the majority score, fits --target-ci; a plan at the full 67k SST-2 split says nothing."""
    from statsmodels.stats.proportion import proportion_confint

    from reinit_tune.inference.collapse import seeds_to_show, unseen_seeds
    from reinit_tune.sweep.seeds import unseen_collapse_note
    from tests.helpers import cli

    assert seeds_to_show() == 29 and 0.9**29 <= 0.05 < 0.9**28
    for gap, width in ((0.1, 0.02), (0.3, 0.02), (0.13, 0.05)):
        n = unseen_seeds(gap, width)
        upper = [proportion_confint(0, m, 0.05, "beta")[1] for m in (n - 1, n)]
        assert upper[1] * gap <= width < upper[0] * gap, (gap, width, n)
    small = groups_of(families.get("progressive").configs(grid()), RULE, "progressive")
    assert all(g.small for g in small)
    note = unseen_collapse_note(small, RULE)
    assert "small data (at most 10,000 examples) in 3 groups" in note
    assert f"a gap of 0.1 at least {unseen_seeds(0.1, RULE.target_ci)} seeds" in note
    full = groups_of(families.get("progressive").configs(grid(tasks=("sst2",), sizes=(None,))),
                     RULE, "progressive")
    assert not any(g.small for g in full) and unseen_collapse_note(full, RULE) is None
    code, out = cli(capsys, "sweep", "progressive", "--seeds", "auto", "--target-ci", "0.01",
                    "--max-seeds", "5", "--model", tiny_bert, "--tasks", "rte",
                    "--sizes", "200", "--k", "0", "4", "--results", str(tmp_path / "r"),
                    "--dry-run")
    assert code == 0, out
    assert "small data (at most 10,000 examples) in 1 group," in out, out
    assert "beyond --max-seeds 5: that group reports the wider interval" in out, out
