"""The one engine that decides every declared claim on a store's runs.

For each claim (``catalog``) it finds the groups of runs its statistic needs
(``reinit_tune.verdicts.groups``): each group (task × size × protocol) for a within-group
statistic, the smallest and largest size at least 10× apart of each task and protocol for a
size comparison, each pair of tasks at one size and protocol for a correlation. Each gives
one ``VerdictRow``; a claim made across tasks adds an overall row per protocol and size
(claims.md §0.5: supported if more than half the tested tasks are and none contradicts). A
claim the store cannot test at all still gets a row saying what is missing, and an
inconclusive verdict says how many seeds per cell would decide it at the observed spread.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import shlex
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from reinit_tune.inference import (
    Verdict,
    across_tasks,
    bonferroni_level,
    collapse,
    conjunction,
    seeds_to_decide,
)
from reinit_tune.inference.sequential import DEFAULT_MAX_SEEDS
from reinit_tune.tasks import get_task
from reinit_tune.verdicts import epochs as epoch_scores
from reinit_tune.verdicts import layers
from reinit_tune.verdicts.catalog import CLAIMS
from reinit_tune.verdicts.claim import SIZES, Claim
from reinit_tune.verdicts.commands import sweep_command
from reinit_tune.verdicts.conditions import Kept
from reinit_tune.verdicts.depth import map_layer
from reinit_tune.verdicts.groups import Group, groups
from reinit_tune.verdicts.pairs import PairSet, pair_sets
from reinit_tune.verdicts.probes import ProbePeak
from reinit_tune.verdicts.rule import Finding, lacking


@dataclass(frozen=True)
class VerdictRow:
    """One verdict: a claim in one scope (``task`` None: the overall verdict across tasks)."""

    claim: str
    verdict: str
    task: str | None
    train_size: str | None
    model: str | None
    differs: dict[str, str] = field(default_factory=dict)
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n_min: int | None = None
    method: str | None = None  # the test that decided: "paired t", "bootstrap", ...
    level: float | None = None  # its interval's level (Bonferroni: above 95%)
    rule: str | None = None
    share: float | None = None
    share_low: float | None = None
    share_high: float | None = None
    share_method: str | None = None  # e.g. "delta (low n)" under 5 seeds a cell
    published: str = "figure only"
    published_value: float | None = None
    published_in_ci: bool | None = None
    reason: str = ""
    seeds_needed: int | None = None
    command: str | None = None
    mapping: str | None = None
    note: str | None = None  # e.g. "paper: plentiful data only" (left out of the overall)
    figure: str | None = None
    title: str = ""  # the claim's, e.g. "downstream reinit costs less than upstream reinit"
    # the claim's caveat (what of it is not evaluated, how a definition is ours), on a
    # decided verdict: what a reader must know before quoting it
    caveat: str = ""
    cost: str | None = None  # what ``command`` would add, as its dry run plans it
    # the cells it reads where runs collapsed to the majority rate: "k=0: 2 of 10 runs
    # collapsed (95% CI 3-56%)" (``reinit_tune.inference.collapse``)
    collapsed: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {k: (None if isinstance(v, float) and v != v else v)
                for k, v in self.__dict__.items()}


DECIDED = (str(Verdict.SUPPORTED), str(Verdict.CONTRADICTED))


def evaluate(trials: pd.DataFrame, claims: Iterable[Claim] = CLAIMS,
             results_dir: str = "DIR", similarity: pd.DataFrame | None = None,
             epochs: pd.DataFrame | None = None, pairs: pd.DataFrame | None = None
             ) -> list[VerdictRow]:
    """Every verdict of ``claims`` on the runs of ``trials`` (``store.load_trials``), their
    per-layer ``similarity`` rows (``store.load_similarity``), their per-epoch rows
    (``store.load_epochs``) and the comparisons of two of their models (``store.load_pairs``),
    where a claim reads them."""
    compared = pair_sets(pairs, trials)
    summaries = layers.per_trial(similarity)
    lengths = trials.set_index("trial_id")["epochs"] if "epochs" in trials else None
    study = epoch_scores.per_trial(epochs, lengths)
    values = (*layers.VALUES, *layers.layer_columns(summaries), *epoch_scores.columns(study))
    trials = trials.drop(columns=[v for v in values if v in trials])
    if len(trials):
        trials = trials.merge(summaries, on="trial_id", how="left").merge(
            study, on="trial_id", how="left")
    trials = trials.assign(**{v: pd.Series(dtype="float64") for v in values
                              if v not in trials})
    found = groups(trials, ("score", *values))
    rows: list[VerdictRow] = []
    for claim in claims:
        rows += [dataclasses.replace(r, title=claim.title, caveat=claim.caveat if r.verdict in
                                     DECIDED else "")
                 for r in _claim(claim, found, results_dir, compared)]
    return rows


def _claim(claim: Claim, found: list[Group], results_dir: str,
           compared: Sequence[PairSet] = ()) -> list[VerdictRow]:
    scope = claim.statistic.scope
    if scope == "pairs":  # two models compared: the pairs table, not a group of runs
        rows = [_row(claim, group, finding, results_dir, pair=other) for group, finding, other
                in claim.statistic.decide(list(compared), claim.n_min)]
        rows += _overall(claim, rows)
        return rows or [_nothing(claim, found, results_dir)]
    candidates = [g for g in found if not claim.only_tasks or g.task in claim.tasks]
    candidates = [g for g in candidates if _touches(claim, g)]
    if scope == "group" and claim.overall == "all":  # every group at once: Bonferroni
        level = bonferroni_level(max(1, len(candidates)))
        rows = [_row(claim, g, claim.statistic.evaluate(g, claim.n_min, level), results_dir)
                for g in candidates]
    elif scope == "group":
        rows = [_row(claim, g, claim.statistic.evaluate(g, claim.n_min), results_dir)
                for g in candidates]
    elif scope == "sizes":
        rows = _sizes(claim, candidates, results_dir)
    elif scope == "probe":
        probed = _probe_groups(found)
        rows = _probes(claim, candidates, [g for g in probed if not claim.only_tasks
                                           or g.task in claim.tasks], results_dir,
                       any_probes=bool(probed))
    elif scope == "probe sizes":
        rows = _probe_sizes(claim, candidates, found, results_dir)
    elif scope == "task set":
        rows = _task_sets(claim, candidates, results_dir)
    else:
        rows = _tasks(claim, candidates, results_dir)
    rows += _overall(claim, rows)
    if not any(r.note is None for r in rows):  # nothing in the claim's own scope
        rows.append(_nearest(claim, found, results_dir) or _nothing(claim, found, results_dir))
    return rows


def _nearest(claim: Claim, found: list[Group], results_dir: str) -> VerdictRow | None:
    """Where a per-group claim has no group of its own in scope but the store has runs of
    one of its tasks at its sizes (only the full and embeddings-only models, say): the row
    of the largest such group of the claim's own experiments, naming the cells it lacks
    (for a claim of two sizes: the size ``ratio``x from it), whose command trains them at
    that group's protocol (its model, learning rate, epochs) rather than the defaults."""
    scope = claim.statistic.scope
    if scope not in ("group", "sizes") or getattr(claim.statistic, "touched", None):
        return None  # values of runs of their own (similarity, the epochs study)
    near = [g for g in found if (scope == "sizes" or claim.in_scope(g.examples))
            and (not claim.tasks or g.task in claim.tasks)
            and (not g.experiments or g.experiments & _cells_of(claim, g.num_layers)[1])]
    if not near:
        return None

    group = max(near, key=lambda g: (sum(len(v[0]) for v in g.surgeries.values()),
                                     g.examples))  # the most runs, then the largest
    if scope == "sizes":
        ratio = claim.statistic.ratio
        for part in _by(near, lambda g: (g.task, g.protocol)):  # two sizes stored already
            small, large = min(part, key=lambda g: g.examples), max(part,
                                                                   key=lambda g: g.examples)
            if large.examples >= ratio * small.examples:
                finding = claim.statistic.evaluate(small, large, claim.n_min)
                if finding.verdict is Verdict.NOT_ENOUGH_DATA:
                    return _row(claim, small, finding, results_dir, large=large)
        other = _other_size(group.examples, ratio, get_task(group.task).train_rows)
        if other is None:
            return None
        # every k the claim reads, at the new size: it has no run of any
        finding = lacking([f"{claim.figure} runs at {other} examples"], claim.figure,
                          f" ({ratio:g}x from the {group.size} group's) for {group.task}")
        finding = dataclasses.replace(finding, sizes_flag=f"--sizes {other}")
    else:
        finding = claim.statistic.evaluate(group, claim.n_min)
    if finding.verdict is not Verdict.NOT_ENOUGH_DATA:
        return None
    return _row(claim, group, finding, results_dir)


def _touches(claim: Claim, group: Group) -> bool:
    """Whether ``group`` has runs of a cell that is this claim's own (of its family, other
    than the full and the embeddings-only model, which most families run): a store of other
    experiments gets no row per group, only the claim's one "not enough data" row."""
    if (touched := getattr(claim.statistic, "touched", None)) is not None:
        return touched(group)  # a per-trial value the statistic reads (similarity)
    conditions, families, touching = _cells_of(claim, group.num_layers)
    if group.experiments and not group.experiments & families:
        # runs another study wrote alike (the epochs study's k = 0, 3, 6 at 10 epochs)
        # decide the claim where they hold every cell it reads, and are not its group else
        return all(group.has(c) for c in conditions if c.family != "probing")
    return any(group.has(c) for c in touching)


@functools.cache
def _cells_of(claim: Claim, layers: int) -> tuple[tuple, frozenset[str], tuple]:
    """Of ``claim`` on an L-layer model: the cells its statistic reads, the families that
    run them (and the claim's figure's), and the cells whose runs make a group the claim's:
    its own, other than the full and the embeddings-only model, with their siblings at every
    other k (a group lacking the claim's own k gets its row, naming that k); every cell
    where it has none of its own. Once per claim and depth, not per group."""
    common = {Kept("E").describe(layers), Kept("F").describe(layers)}
    conditions = tuple(claim.statistic.conditions(layers))
    own = [c for c in conditions
           if c.family == claim.figure and c.describe(layers) not in common]
    siblings = [dataclasses.replace(c, k=k) for c in own if isinstance(c, Kept)
                for k in range(1, layers)]
    return (conditions, frozenset({claim.figure, *(c.family for c in conditions)}),
            tuple(dict.fromkeys([*own, *siblings])) or conditions)


def _by(candidates: list[Group], key) -> list[list[Group]]:
    """``candidates`` split by ``key(group)``, in a stable order."""
    by = defaultdict(list)
    for g in candidates:
        by[key(g)].append(g)
    return [part for _, part in sorted(by.items(), key=lambda kv: str(kv[0]))]


def _sizes(claim: Claim, candidates: list[Group], results_dir: str) -> list[VerdictRow]:
    """The scarcest size of each protocol against its most plentiful one; where the
    protocol has no size ``ratio`` times larger, against the most plentiful size of the
    task trained otherwise (003 trains 500 examples for 5 epochs and larger sizes for 3),
    the row naming each difference (``_trained_apart``), so no group is left without a
    row."""
    rows = []
    ratio = claim.statistic.ratio
    for part in _by(candidates, lambda g: (g.task, g.protocol)):
        part.sort(key=lambda g: g.examples)
        small, large = part[0], part[-1]
        if large.examples < ratio * small.examples:
            apart = [g for g in candidates if g.task == small.task
                     and g.protocol[1:] == small.protocol[1:]
                     and g.examples >= ratio * small.examples]
            if not apart:
                continue
            large = max(apart, key=lambda g: (g.examples, g.setting))
        finding = claim.statistic.evaluate(small, large, claim.n_min)
        rows.append(_row(claim, small, finding, results_dir, large=large))
    return rows


def _probes(claim: Claim, candidates: list[Group], probes: list[Group],
            results_dir: str, any_probes: bool) -> list[VerdictRow]:
    """Each finetuning group with the probe groups of its task, model and depth (any size:
    probes train on the full split for 10 epochs) whose protocol is closest to its own; a
    claim about probes alone takes each probe group by itself. Where the store has probes
    (``any_probes``), a finetuning group of the claim's tasks without probes of its own
    gets a "not enough data" row naming them; a store without any probe gets the claim's
    one row instead."""
    statistic = claim.statistic
    rows = []
    if not statistic.needs_finetune:
        for probe in probes:
            rows.append(_row(claim, probe, statistic.evaluate(None, probe, claim.n_min),
                             results_dir))
        return rows
    by_model = defaultdict(list)
    for probe in probes:
        by_model[probe.task, probe.model, probe.num_layers].append(probe)
    probed = {id(p) for p in probes}
    for group in candidates:
        if id(group) in probed:
            continue
        mine = _closest(group, by_model.get((group.task, group.model, group.num_layers), []))
        if not mine and any_probes and group.task in claim.tasks:
            need = f"probing k=0..{group.num_layers} (full train, 10 epochs)"
            rows.append(_row(claim, group, Finding(
                Verdict.NOT_ENOUGH_DATA, missing=(need,), family="probing",
                reason=f"missing: {need} for {group.task}"), results_dir))
        for probe in mine:
            rows.append(_row(claim, group, statistic.evaluate(group, probe, claim.n_min),
                             results_dir, probe=probe))
    return rows


def _probe_groups(found: list[Group]) -> list[Group]:
    """The groups with a probe of any hidden state."""
    return [g for g in found if any(g.has(c) for c in ProbePeak().conditions(g.num_layers))]


def _probe_sizes(claim: Claim, candidates: list[Group], found: list[Group],
                 results_dir: str) -> list[VerdictRow]:
    """Each probe group with the smallest and the largest finetuning size (at least the
    statistic's ratio apart) of its task, model and depth."""
    rows = []
    probes = [g for g in _probe_groups(found)
              if not claim.only_tasks or g.task in claim.tasks]
    probed = {id(p) for p in probes}
    by_model = defaultdict(list)
    for group in candidates:
        if id(group) not in probed:
            by_model[group.task, group.model, group.num_layers].append(group)
    for probe in probes:
        mine = sorted(by_model.get((probe.task, probe.model, probe.num_layers), []),
                      key=lambda g: g.examples)
        if len(mine) < 2 or mine[-1].examples < claim.statistic.ratio * mine[0].examples:
            continue
        small, large = mine[0], mine[-1]
        rows.append(_row(claim, small, claim.statistic.evaluate(small, large, probe,
                                                                claim.n_min),
                         results_dir, large=large, probe=probe))
    return rows


def _task_sets(claim: Claim, candidates: list[Group], results_dir: str) -> list[VerdictRow]:
    """One verdict per size and protocol from the groups of every task run there (a claim
    comparing tasks' profiles: 003-C11, C12), labelled by its tasks."""
    rows = []
    for part in _by(candidates, lambda g: (g.size, g.protocol)):
        part = sorted(part, key=lambda g: g.task)
        finding = claim.statistic.evaluate(part, claim.n_min)
        tasks = tuple(dict.fromkeys(g.task for g in part))
        if finding.verdict is Verdict.NOT_ENOUGH_DATA and not finding.tasks and len(tasks) < 2:
            # a set of one task: the paper's other tasks would make it a comparison
            finding = dataclasses.replace(finding, tasks=(*tasks, *(
                t for t in claim.tasks if t not in tasks)))
        row = _row(claim, part[0], finding, results_dir, tasks=tasks)
        rows.append(dataclasses.replace(row, task=" / ".join(tasks)))
    return rows


def _closest(group: Group, probes: list[Group]) -> list[Group]:
    """The probe groups whose protocol agrees with ``group``'s in the most fields (a store
    of many protocols pairs each finetuning group with its own probes, not with all)."""
    if not probes:
        return []
    own = set(group.differs)
    agree = [len(own & set(p.differs)) for p in probes]
    best = max(agree)
    return [p for p, a in zip(probes, agree, strict=True) if a == best]


def _tasks(claim: Claim, candidates: list[Group], results_dir: str) -> list[VerdictRow]:
    rows = []
    for part in _by(candidates, lambda g: (g.size, g.protocol)):
        for a, b in itertools.combinations(sorted(part, key=lambda g: g.task), 2):
            for method in claim.statistic.methods:
                finding = claim.statistic.evaluate(a, b, method)
                value = claim.statistic.published_for(a.task, b.task, method)
                rows.append(_row(claim, a, finding, results_dir, pair=b, method=method,
                                 published_value=value))
    return rows


def _row(claim: Claim, group: Group, finding: Finding, results_dir: str, *,
         large: Group | None = None, pair: Group | None = None, method: str | None = None,
         published_value: float | None = None, probe: Group | None = None,
         tasks: tuple[str, ...] | None = None) -> VerdictRow:
    finding = _spreadless(finding)
    compared = [g for g in (group, large, pair) if g is not None]
    counted = _collapses(claim, compared)
    refused = _unbounded_mixture(finding, counted,
                                 unseen=any(g.unseen_collapse for g in compared))
    refused, finding = refused is not finding, refused
    interval, share = finding.interval, finding.share
    value = published_value if published_value is not None else claim.published_value
    seeds = None
    undecidable = False  # not by --max-seeds' default seeds per cell at the observed spread
    target = finding.to_decide()
    if finding.verdict is Verdict.INCONCLUSIVE and target is not None and not refused and \
            target[0] is not None and finding.min_runs is None:
        seeds = seeds_to_decide(*target, limit=DEFAULT_MAX_SEEDS)
        undecidable = seeds is None and target[0].defined and target[0].n_min >= 2
    size = group.size if large is None else f"{group.size} vs {large.size}"
    differs = dict(group.differs)
    if probe is not None:  # the probes' own size and protocol, where they differ
        size += f" (probes: {probe.size})"
        differs.update({f"probe {k}": v for k, v in probe.differs})
    other = large or pair
    apart = _trained_apart(group, other) if other is not None else {}
    differs.update(apart)
    in_scope = large is not None or claim.in_scope(group.examples)
    reason = finding.reason
    if apart:
        reason = ("compares groups trained differently: "
                  + "; ".join(f"{k} {v}" for k, v in apart.items())
                  + (f"; {reason}" if reason else ""))
    if not reason and finding.rule is not None and interval is not None:
        reason = {Verdict.SUPPORTED: "the 95% interval meets the claim's rule",
                  Verdict.CONTRADICTED: "the 95% interval lies against the claim's rule",
                  Verdict.INCONCLUSIVE: "the 95% interval crosses the rule's boundary"
                  }.get(finding.verdict, "") + f" (estimate {finding.rule})"
    if method:  # one of the claim's sub-statistics (Spearman, Pearson): say which
        reason = f"{method}: {reason}" if reason else method
    bounded = interval is not None and interval.method.endswith(collapse.BOUND)
    if bounded:
        n = interval.n_min
        seen = any(c.mixed for c in counted)
        allows = ("the interval allows for every collapse rate its cells' runs leave "
                  "possible" + ("" if seen else
                                f", a mode none has shown included (0 of {n} leaves up to "
                                f"{100 * collapse.rate_interval(0, n)[1]:.0f}% at small "
                                "data)") + " (95% Clopper-Pearson; claims.md §0.6)")
        reason = (reason + "; " if reason else "") + (
            allows if finding.verdict in DECIDED else
            f"not decidable at n = {n} {'with collapsed runs' if seen else 'at small data'}: "
            + allows)
    if seeds is not None:
        reason = (reason + "; " if reason else "") + (
            f"about {seeds} seeds per cell would decide it at the observed spread "
            "(an estimate)")
    if undecidable:
        distance = abs(target[0].estimate - target[1])
        reason = (reason + "; " if reason else "") + (
            f"not decidable below {DEFAULT_MAX_SEEDS} seeds per cell at the observed spread "
            f"(the estimate sits {distance:.2g} from the value it must clear)")
    command = None
    if finding.verdict in (Verdict.INCONCLUSIVE, Verdict.NOT_ENOUGH_DATA) and finding.family \
            and not undecidable:
        command = sweep_command(claim, group, finding, results_dir, seeds=seeds,
                                target=target, large=large, pair=pair, probe=probe,
                                tasks=tasks)
    return VerdictRow(
        claim=claim.id, verdict=str(finding.verdict),
        task=group.task if pair is None else f"{group.task} / {pair.task}",
        train_size=size, model=group.model, differs=differs,
        estimate=None if interval is None else interval.estimate,
        ci_low=None if interval is None or not interval.defined else interval.low,
        ci_high=None if interval is None or not interval.defined else interval.high,
        n_min=None if interval is None else interval.n_min,
        method=": ".join(m for m in (method, interval.method if interval else None) if m)
        or None,
        level=None if interval is None else interval.level,
        rule=str(finding.rule) if finding.rule else None,
        share=None if share is None else share.estimate,
        share_low=None if share is None or not share.defined else share.low,
        share_high=None if share is None or not share.defined else share.high,
        share_method=None if share is None else share.method,
        published=claim.published, published_value=value,
        published_in_ci=(None if value is None or interval is None or not interval.defined
                         else interval.contains(value)),
        reason=reason, seeds_needed=seeds, command=command,
        mapping=str(map_layer(3, group.num_layers)) if claim.uses_q else None,
        note=None if in_scope else f"paper: {claim.sizes} data only",
        figure=claim.figure,
        collapsed=tuple(str(c) for c in counted if c.collapsed),
    )


def _collapses(claim: Claim, compared: list[Group]) -> list[collapse.CellCollapse]:
    """The collapsed runs of each cell the claim's statistic reads in ``compared``."""
    if claim.statistic.scope == "pairs":
        return []
    out = []
    for g in compared:
        for condition in claim.statistic.conditions(g.num_layers):
            cell = g.cell(condition)
            if len(cell):
                where = f" for {g.task}" if len(compared) > 1 else ""
                at = f" at {g.size}" if len(compared) > 1 else ""
                out.append(collapse.count(f"{condition.describe(g.num_layers)}{at}{where}",
                                          cell.to_numpy(), g.chance, g.metric))
    return list({c.cell: c for c in out}.values())


def _unbounded_mixture(finding: Finding, counted: list[collapse.CellCollapse],
                       unseen: bool = False) -> Finding:
    """A decision on cells that mix collapsed and trained runs by a statistic the collapse
    bound does not cover (a bootstrap, an F ratio, Holm's p values, a correlation): those
    tests do not hold their level on such a mixture (``benchmarks/bench_verdict_levels``),
    so the row is not decided and says so. Where a mode no run has shown may exist
    (``unseen``: small data), the same holds until every cell that trains has
    ``collapse.seeds_to_show()`` runs (a 10% mode then shows with probability 0.95)."""
    interval = finding.interval
    if finding.verdict not in DECIDED or (
            interval is not None and interval.method.endswith(collapse.BOUND)):
        return finding
    method = interval.method if interval is not None else "its test"
    n = collapse.unbounded_at(counted, unseen)
    if n is None:
        return finding
    if collapse.mixed_cells(counted):
        why = (f"not decidable at n = {n} with collapsed runs: {method} does not hold its "
               f"level on cells that mix collapsed and trained runs ({finding.verdict} "
               "before this; claims.md §0.6)")
    else:
        upper = collapse.rate_interval(0, n)[1]
        why = (f"not decidable at n = {n} at small data: a collapse mode none of the runs "
               f"has shown may exist (0 of {n} leaves up to {100 * upper:.0f}%), and {method} "
               f"does not hold its level on such a mixture ({finding.verdict} before this); "
               f"{collapse.seeds_to_show()} runs per cell would show a "
               f"{100 * collapse.UNSEEN_RATE:g}% mode with probability "
               f"{1 - collapse.UNSEEN_MISS:g} (claims.md §0.6)")
    return dataclasses.replace(finding, verdict=Verdict.INCONCLUSIVE, family=None,
                               undecided=None, reason=f"{finding.reason}; {why}"
                               if finding.reason else why)


def _spreadless(finding: Finding) -> Finding:
    """A finding whose runs did not vary at all decides nothing and asks for no seeds:
    identical runs are no sample of a trial's noise (runs that all collapsed to one score,
    a training that does not depend on its seed), so no interval can be drawn from them."""
    interval = finding.undecided[0] if finding.undecided else finding.interval
    if interval is None or not interval.spreadless:
        return finding
    why = (f"not decidable: no spread: the {interval.n_min} runs of each cell it reads "
           "scored alike, which says nothing of their noise (runs collapsed to one score? "
           "a training that ignores its seed?)")
    # a precondition's reason ("no significant gain") is about an interval it never drew
    keep = finding.reason and finding.undecided is None
    return dataclasses.replace(
        finding, verdict=Verdict.INCONCLUSIVE, undecided=None, family=None, share=None,
        reason=f"{finding.reason}; {why}" if keep else why)


def _overall(claim: Claim, rows: Sequence[VerdictRow]) -> list[VerdictRow]:
    """One verdict across tasks per protocol and size, from the in-scope task rows (with
    ``overall="all"``: one per protocol over every task and size, all must hold)."""
    by = defaultdict(list)
    for r in rows:
        if r.note is None and r.task is not None and "/" not in r.task:
            size = "every size" if claim.overall == "all" else r.train_size
            by[(size, r.model, tuple(sorted(r.differs.items())))].append(r)
    out = []
    for (size, model, differs), part in sorted(by.items(), key=lambda kv: str(kv[0])):
        if len(part) < 2 or all(r.verdict == str(Verdict.NOT_ENOUGH_DATA) for r in part):
            continue
        verdicts = [Verdict(r.verdict) for r in part]
        overall = (conjunction(verdicts) if claim.overall == "all"
                   else across_tasks(verdicts))
        counts = ", ".join(f"{sum(v is x for v in verdicts)} {x}" for x in Verdict
                           if any(v is x for v in verdicts))
        mixed = (" (mixed across tasks)" if overall is Verdict.INCONCLUSIVE
                 and len(set(verdicts)) > 1 else "")
        what = "tasks and sizes" if claim.overall == "all" else "tasks"
        out.append(VerdictRow(claim=claim.id, verdict=str(overall), task=None,
                              train_size=size, model=model, differs=dict(differs),
                              published=claim.published,
                              reason=f"{len(part)} {what}: {counts}{mixed}",
                              mapping=part[0].mapping, figure=claim.figure))
    return out


def _nothing(claim: Claim, found: list[Group], results_dir: str) -> VerdictRow:
    """The row of a claim the store has no in-scope runs for."""
    low, _ = SIZES[claim.sizes]
    where = f" at >= {low:,} examples" if low > 1_000 else (
        " at <= 1,000 examples" if claim.sizes == "scarce" else "")
    tasks = " ".join(claim.tasks)
    have = sorted({g.task for g in found})
    what = {"sizes": f"{claim.figure} runs at two sizes at least "
                     f"{getattr(claim.statistic, 'ratio', 10):g}x apart of one task",
            "tasks": f"{claim.figure} runs of the same permutations on two tasks",
            "probe": f"probes of every hidden state and {claim.figure} runs of one task",
            "probe sizes": f"probes of every hidden state and {claim.figure} runs at two "
                           "sizes at least 10x apart of one task",
            "task set": f"{claim.figure} runs of several tasks at one size",
            "pairs": f"pairs of {claim.figure} models (sweep with --save-model, then "
                     "`reinit-tune consistency`)"
            }.get(claim.statistic.scope, f"{claim.figure} runs{where}")
    family = "probing" if claim.statistic.scope.startswith("probe") else claim.figure
    models = {g.model for g in found}  # the store's one model, else the family's default
    model = f" --model {shlex.quote(models.pop())}" if len(models) == 1 else ""
    return VerdictRow(claim=claim.id, verdict=str(Verdict.NOT_ENOUGH_DATA), task=None,
                      train_size=None, model=None, published=claim.published,
                      reason=(f"missing: {what} (the paper's tasks: "
                              f"{tasks or 'any'}); the store has ok runs of "
                              f"{', '.join(have) if have else 'no task'}"),
                      command=(f"reinit-tune sweep {family}{model}"
                               + (f" --tasks {tasks}" if tasks else "")
                               + ({"plentiful": " --sizes 50000", "scarce": " --sizes 500"}
                                  .get(claim.sizes, "") if family != "probing" else "")
                               + f" --seeds {claim.n_min} --results "
                               f"{shlex.quote(results_dir)}"),
                      figure=claim.figure)


def _other_size(examples: float, ratio: float, train_rows: int) -> int | None:
    """A train size ``ratio``x from ``examples`` that the task's train split can supply:
    below it where that leaves at least 500 examples (003's scarcest size), else above it,
    else below it down to 32; None where neither exists."""
    down, up = int(examples / ratio), int(examples * ratio)
    for size, fits in ((down, down >= 500), (up, up <= train_rows), (down, down >= 32)):
        if fits:
            return size
    return None


def _trained_apart(a: Group, b: Group) -> dict[str, str]:
    """The training flags (``groups.RUN_FLAGS``) two compared groups (two sizes, two tasks)
    ran with differently, each as "value at a vs value at b": a comparison of sizes that
    also changed the learning rate is not the size's effect alone (003's own protocol
    changes the epochs with the size: 5 at 500 examples, 3 above)."""
    ours, theirs = dict(a.run), dict(b.run)
    where = (a.size, b.size) if a.size != b.size else (a.task, b.task)
    return {name: f"{ours.get(name, 'default')} at {where[0]} vs "
                  f"{theirs.get(name, 'default')} at {where[1]}"
            for name in dict.fromkeys([*ours, *theirs])
            if ours.get(name) != theirs.get(name)}
