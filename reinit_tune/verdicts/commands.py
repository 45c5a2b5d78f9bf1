"""The sweep command an undecided verdict prints: the family that adds the cells short of
runs (or of seeds), at the group's own size and protocol (model, learning rate, batch,
epochs, sequence length, precision), with only the k's, tasks, permutations or seeds that
would decide it: run as printed, its dry run plans the missing trials and nothing else."""

from __future__ import annotations

import shlex

from reinit_tune.inference import Verdict
from reinit_tune.inference.interval import Interval
from reinit_tune.inference.sequential import DEFAULT_MAX_SEEDS
from reinit_tune.sweep.seeds import ON_DEMAND_FAMILIES
from reinit_tune.verdicts.claim import Claim
from reinit_tune.verdicts.conditions import Kept, Permuted
from reinit_tune.verdicts.groups import Group
from reinit_tune.verdicts.rule import Finding


def sweep_command(claim: Claim, group: Group, finding: Finding, results_dir: str, *,
                  seeds: int | None, target: tuple[Interval, float] | None,
                  large: Group | None = None, pair: Group | None = None,
                  probe: Group | None = None, tasks: tuple[str, ...] | None = None) -> str:
    """The command that adds what ``finding`` (undecided, of ``group``; ``large``: the other
    size compared, ``pair``: the other task, ``probe``: the probes read) lacks: ``seeds``
    per cell where seeds would decide it (seeds on demand to the width ``target`` asks
    for, where its family runs them), else the runs its short cells need."""
    sizes = " ".join(_size_arg(g) for g in (group, large) if g is not None)
    trained = group  # whose protocol the new runs take
    if finding.family == "probing":  # more probes at the probes' size, else the paper's
        trained = probe or (group if claim.statistic.scope == "probe"
                            and not claim.statistic.needs_finetune else None)
        sizes = _size_arg(trained) if trained is not None else "full"
    n = max(seeds or claim.n_min, claim.n_min, finding.min_runs or 0)
    how = f"--seeds {n}"
    if finding.family == "permutations":  # orders are the permuted cell's runs
        how = f"--permutations {max(n, Permuted.min_runs)} --seeds {claim.n_min}"
    elif seeds is not None and target is not None and finding.family in ON_DEMAND_FAMILIES:
        # seeds on demand: each cell's seeds until its interval's half-width is half the
        # distance d from the estimate to the rule's boundary. A half-width of d itself
        # decides only where the new estimate lands on the far side of the old one (74.5%
        # of the time with the estimate exactly true); d/2 leaves the estimate d/2 to move
        # (97.5%)
        width = float(f"{abs(target[0].estimate - target[1]) / 2:.2g}")
        how = (f"--seeds auto --target-ci {width:g} --min-seeds {max(3, claim.n_min)} "
               f"--max-seeds {max(n, DEFAULT_MAX_SEEDS)}")
    ks = _k_flag(claim, finding, [g for g in (group, large) if g is not None],
                 reference=how.startswith("--seeds auto"))
    tasks = finding.tasks or tasks or tuple(t for t in (group.task, pair.task if pair else None)
                                            if t)
    return (f"reinit-tune sweep {finding.family} --model {shlex.quote(group.model)} --tasks "
            f"{' '.join(tasks)} "
            f"{finding.sizes_flag or f'--sizes {sizes}'} "
            f"{_run_flags(trained, finding)}"
            f"{ks}{how}{_data_flag(trained or group)} --results {shlex.quote(results_dir)}")


def _data_flag(group: Group) -> str:
    """`` --data-dir DIR`` where the group's runs read one local data folder: the new runs
    read the same data (and a pasted command finds it whatever ``REINIT_TUNE_DATA`` says)."""
    return f" --data-dir {shlex.quote(group.data_dir)}" if group.data_dir else ""


def _k_flag(claim: Claim, finding: Finding, groups: list[Group], reference: bool) -> str:
    """``--k`` of a progressive command: the k's whose cells are short of runs where the
    verdict lacks data, else the k's the claim's statistic reads (with k = L, the
    reference of seeds on demand, where it asks for them); nothing where that is every k."""
    if finding.family != "progressive" or not groups or claim.statistic.scope == "pairs":
        return ""
    layers = groups[0].num_layers
    kept = [c for c in claim.statistic.conditions(layers)
            if isinstance(c, Kept) and c.family == "progressive"]
    ks = {c.layers(layers) for c in kept}
    if finding.verdict is Verdict.NOT_ENOUGH_DATA and not finding.tasks \
            and not _new_size(finding):  # a new size has no run of any k
        short = {c.layers(layers) for c in kept for g in groups
                 if len(g.cell(c)) < max(claim.n_min, c.min_runs)}
        ks = short or ks  # a new task or size: all
    if reference:
        ks.add(layers)
    if not ks or len(ks) == layers + 1:
        return ""
    return "--k " + " ".join(map(str, sorted(ks))) + " "


def _run_flags(group: Group | None, finding: Finding) -> str:
    """The flags that train new runs as the group's were trained (its learning rate, batch,
    epochs, sequence length, precision), each followed by a space; the epochs study takes
    its epochs from its own flag (``--epoch-sizes``); none without a group (probes not run
    yet: the probing family's defaults)."""
    if group is None:
        return ""
    flags = []
    for name, value in group.run:
        if name == "epochs" and finding.sizes_flag and not _new_size(finding):
            continue
        if name in ("lr", "batch_size", "epochs", "max_seq_length"):
            value = f"{float(value):g}"
        flags.append(f"--{name.replace('_', '-')} {value} ")
    return "".join(flags)


def _new_size(finding: Finding) -> bool:
    """Whether the finding asks for runs at a size the store has none of (``--sizes N`` as
    its own flag), rather than a family's own size flags (the epochs study's)."""
    return (finding.sizes_flag or "").startswith("--sizes ")


def _size_arg(group: Group) -> str:
    """A group's size as ``--sizes`` takes it: a count, a fraction or 'full'."""
    if group.size.endswith("%"):
        return f"{float(group.size.split('%')[0].split()[0]) / 100:g}"
    return group.size.split()[0]
