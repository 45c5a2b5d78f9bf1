"""Planning a sweep: a grid of configs, checked and compared with the store, before Ray starts.

``make_plan`` collapses identical configs, looks up each model's shape, runs every pre-flight
check (``reinit_tune.sweep.preflight``) and skips the trials the store already holds "ok";
a trial whose configuration the store holds under another experiment name (``small_data``'s
runs are ``progressive``'s at 500 examples) is copied from it, not run again;
a stored trial whose data fingerprint differs from the data found now is never skipped
silently: the plan stops (``--data-changed stop``) or runs it again (``rerun``);
the resulting ``Plan`` is what ``reinit_tune.sweep.cost`` estimates and
``reinit_tune.sweep.launch`` launches. The store is the only resume state: planning the same
grid again after an interruption leaves exactly the unfinished trials to run.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from reinit_tune import data, env, store
from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.hardware import emulated_bf16_warning
from reinit_tune.model.fingerprint import model_fingerprint, short
from reinit_tune.model.shape import ModelShape, model_shape
from reinit_tune.sweep import seeds
from reinit_tune.sweep.options import AUTO_GPUS, RunOptions
from reinit_tune.sweep.preflight import preflight
from reinit_tune.sweep.seeds import SeedGroup
from reinit_tune.wording import counted

log = logging.getLogger("reinit_tune")


@dataclass(frozen=True)
class Plan:
    """A checked grid: every unique config, the ones still to run, where things go."""

    name: str
    configs: tuple[TrialConfig, ...]
    todo: tuple[TrialConfig, ...]
    # trial id → id of a stored trial of the same configuration under another experiment
    # name: copied into the store instead of run again
    reuse: dict[str, str]
    shapes: dict[str, ModelShape]
    options: RunOptions
    results_dir: Path
    data_dir: str  # a local data folder, or env.HUB
    storage: str
    # seeds on demand (``options.seeds``): the grid's groups, each paired by seed
    groups: tuple[SeedGroup, ...] = ()

    # seeds on demand: trials of groups the store already closes, which need not run
    not_needed: int = 0

    @property
    def skipped(self) -> int:
        return len(self.configs) - len(self.todo) - len(self.reuse) - self.not_needed


def _shapes(configs: list[TrialConfig], given: dict[str, ModelShape] | None
            ) -> dict[str, ModelShape]:
    shapes = dict(given or {})
    problems = []
    for model in sorted({c.model for c in configs} - set(shapes)):
        try:
            shapes[model] = model_shape(model)
        except InputError as e:
            problems.append(str(e))
    if problems:
        raise InputError("cannot start the sweep:\n  - " + "\n  - ".join(problems))
    return shapes


def resolved(options: RunOptions, gpus_per_trial: float | None = None) -> RunOptions:
    """``options`` with ``--gpus-per-trial auto`` resolved (``cluster.resolve_gpus``, or
    ``gpus_per_trial`` where the caller has)."""
    if options.resources.gpus_per_trial != AUTO_GPUS:
        return options
    if gpus_per_trial is None:
        from reinit_tune.sweep.cluster import resolve_gpus

        gpus_per_trial = resolve_gpus(AUTO_GPUS).gpus_per_trial
    return dataclasses.replace(options, resources=dataclasses.replace(
        options.resources, gpus_per_trial=gpus_per_trial))


def make_plan(configs: list[TrialConfig], options: RunOptions,
              shapes: dict[str, ModelShape] | None = None, *, dry_run: bool = False) -> Plan:
    """Check ``configs`` (pre-flight) and find which of them the store lacks. ``shapes``
    gives the shape of models that cannot be inspected here; others are looked up.
    ``--gpus-per-trial auto`` is resolved first (``resolved``). A ``dry_run`` plan changes
    nothing in the store."""
    options = resolved(options)
    results = Path(options.results_dir).expanduser().resolve()
    storage = env.storage(options.storage, results)
    data_root = env.data_dir(options.data_dir)
    data_dir = str(data_root) if data_root else env.HUB  # what the driver resolved, for all
    unique = list({c.trial_id: c for c in configs}.values())  # identical configs: one trial
    name = options.name or (unique[0].experiment if unique else "sweep")
    groups = tuple(seeds.groups_of(unique, options.seeds, name)) if options.seeds else ()
    shapes = _shapes(unique, shapes)
    preflight(unique, shapes, options, results_dir=results, data_dir=data_dir, storage=storage)
    for precision in sorted({c.precision for c in unique}):
        warning = emulated_bf16_warning(precision, options.resources.gpus_per_trial > 0)
        if warning:
            log.warning("%s", warning)
    would_rerun = check_damaged(results, options.rerun_damaged, dry_run=dry_run)
    stored = store.finished_data(results)
    done = set(stored) - would_rerun
    if options.similarity is not None:
        done &= store.similarity_ids(results)
    if options.save_model:
        done = {i for i in done if (results / "models" / i / "config.json").is_file()}
    equivalents = store.equivalent_ids(results)
    done -= data_changes(unique, done, stored, equivalents, options, results, data_dir)
    done -= model_changes(unique, done, stored, equivalents, options, results)
    missing = [c for c in unique if c.trial_id not in done]
    reuse = {c.trial_id: equivalents[store.equivalence_key(c)] for c in missing
             if store.equivalence_key(c) in equivalents
             and equivalents[store.equivalence_key(c)] in done}
    todo = [c for c in missing if c.trial_id not in reuse]
    unneeded = _not_needed(groups, options.seeds, results) if groups else set()
    return Plan(name, tuple(unique), tuple(c for c in todo if c.trial_id not in unneeded),
                reuse, shapes, options, results, data_dir, storage, groups,
                sum(c.trial_id in unneeded for c in todo))


def _not_needed(groups: tuple[SeedGroup, ...], rule, results: Path) -> set[str]:
    """Trials of ``groups`` past the seeds their stored runs already settle (the rest are
    the searcher's to decide as seeds finish)."""
    ids = {t for g in groups for per_seed in g.trials for t in per_seed.values()}
    stored = seeds.stored_scores(str(results), ids)
    out = set()
    for group in groups:
        closed = seeds.closed_seeds(group, stored, rule)
        if closed is not None:
            out |= {t for per_seed in group.trials[closed:] for t in per_seed.values()}
    return out


def data_changes(configs: list[TrialConfig], done: set[str],
                 stored: dict[str, tuple[str | None, str | None, int | None]],
                 equivalents: dict[str, str], options: RunOptions, results: Path,
                 data_dir: str) -> set[str]:
    """Stored "ok" trials of ``configs`` (or the stored runs they would be copied from) that
    were trained on other data than ``data_dir`` holds now: their data fingerprint differs,
    or, for rows written before fingerprints, the examples they trained on differ from what
    their size means now (a fraction of a local subset file used to be a share of the file,
    not of the official split; QA rows count windows and are not compared). With
    ``options.data_changed`` "stop" any such trial raises ``InputError`` naming both data
    sources and the ways on; with "rerun" their ids are returned, to run again."""
    identities: dict[tuple[str, str | None], tuple[str, str]] = {}
    changed: dict[tuple, list[str]] = defaultdict(list)
    resized: dict[tuple, list[str]] = defaultdict(list)
    for config in configs:
        ids = [config.trial_id, equivalents.get(store.equivalence_key(config))]
        for trial_id in dict.fromkeys(i for i in ids if i in done):
            before, before_source, before_examples = stored.get(trial_id,
                                                                (None, None, None, None))[:3]
            if before is None:
                now_examples = _trained_examples(config, data_dir, options.allow_subset)
                if None not in (before_examples, now_examples) and \
                        before_examples != now_examples:
                    resized[(config.task, config.train_size, before_examples,
                             now_examples)].append(trial_id)
                continue
            key = (config.task, config.intermediate_task)
            if key not in identities:
                try:
                    identities[key] = data.data_identity(config.task, data_dir,
                                                         config.intermediate_task)
                except InputError:  # missing data: pre-flight has said so already
                    identities[key] = (before, before_source or "")
            now, now_source = identities[key]
            if now != before:
                changed[(config.task, before, before_source, now, now_source)].append(trial_id)
    if not changed and not resized:
        return set()
    rerun = {i for ids in (*changed.values(), *resized.values()) for i in ids}
    if options.data_changed == "rerun":
        log.warning("%d stored trials were trained on other data than found now: "
                    "--data-changed rerun runs them again and replaces their rows", len(rerun))
        return rerun
    lines = [f"{task}: {len(ids)} trials in {results} were trained on {src or '?'} (data "
             f"fingerprint {fp[:12]}), but the data now is {now_src} ({now_fp[:12]})"
             for (task, fp, src, now_fp, now_src), ids in sorted(changed.items())]
    lines += [f"{task}: {len(ids)} trials in {results} trained on {was:,} examples, but train "
              f"size {'full' if size is None else size} now means {now:,} (a fraction is a "
              "share of the official split; these rows predate that and the data fingerprint)"
              for (task, size, was, now), ids in sorted(resized.items(), key=str)]
    lines.append("the stored results would mix two datasets: pass a new --results to keep "
                 "both, or --data-changed rerun to retrain those trials and replace their rows")
    raise InputError("cannot start the sweep: the data changed since these trials "
                     "ran:\n  - " + "\n  - ".join(lines))


def check_damaged(results: Path, rerun: bool, *, dry_run: bool = False) -> set[str]:
    """Stop before any trial where the store's trial or epoch files are broken: their
    checksums fail (values may read wrong) or they have no readable footer (cut short: no
    row reads). Their trials would otherwise silently train again. Names each file and how
    many trials it held; with ``rerun`` (``--rerun-damaged``) moves them to
    ``RESULTS/damaged/`` instead, so their trials train again (a ``dry_run`` says it would,
    moves nothing, and returns the trial ids those files hold: what its plan runs again)."""
    found = store.broken_files(results)
    if not found:
        return set()
    lines, held_ids = [], set()
    for path, why in found.items():
        held = store.key_count(path)
        count = "trials unknown" if held is None else counted(held, "trial")
        if rerun and dry_run:
            ids = store.trials_in(path)  # a per-trial file is named by its trial
            held_ids.update(ids if ids is not None else [path.stem])
            log.warning("damaged results file %s (%s, %s) would be moved to %s/; its trials "
                        "would train again", path, count, why, results / store.DAMAGED)
        elif rerun:
            moved = store.set_aside(results, path)
            log.warning("damaged results file %s (%s, %s) moved to %s; its trials train "
                        "again", path, count, why, moved)
        lines.append(f"{path} ({count}): {why}")
    if not rerun:
        raise InputError(
            "cannot start the sweep: damaged results files:\n  - "
            + "\n  - ".join(lines) + "\n  - restore them from a backup, or pass "
            "--rerun-damaged to move them to " + str(results / store.DAMAGED)
            + "/ (never deleted) and train their trials again")
    return held_ids


def model_changes(configs: list[TrialConfig], done: set[str],
                  stored: dict[str, tuple], equivalents: dict[str, str],
                  options: RunOptions, results: Path) -> set[str]:
    """Stored "ok" trials of ``configs`` (or the runs they would be copied from) whose model
    fingerprint differs from the model's now (``reinit_tune.model.fingerprint``: re-saved
    weights at the same path). Rows without a fingerprint (older versions) never differ.
    With ``options.model_changed`` "stop" any such trial raises ``InputError`` naming both
    fingerprints; with "rerun" their ids are returned, to run again."""
    now: dict[str, str] = {}
    changed: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for config in configs:
        ids = [config.trial_id, equivalents.get(store.equivalence_key(config))]
        for trial_id in dict.fromkeys(i for i in ids if i in done):
            before = stored.get(trial_id, (None,) * 4)[3]
            if before is None:
                continue
            if config.model not in now:
                now[config.model] = model_fingerprint(config.model)
            if now[config.model] != before:
                changed[(config.model, before, now[config.model])].append(trial_id)
    if not changed:
        return set()
    rerun = {i for ids in changed.values() for i in ids}
    if options.model_changed == "rerun":
        log.warning("%d stored trials were trained on other weights than %s holds now: "
                    "--model-changed rerun runs them again and replaces their rows",
                    len(rerun), ", ".join(sorted({m for m, _, _ in changed})))
        return rerun
    lines = [f"{model}: {len(ids)} trials in {results} were trained on weights with "
             f"fingerprint {short(before)}, but the model now has {short(now_fp)} (re-saved or "
             "replaced)" for (model, before, now_fp), ids in sorted(changed.items())]
    lines.append("the stored results would mix two models: pass a new --results to keep "
                 "both, or --model-changed rerun to retrain those trials and replace their rows")
    raise InputError("cannot start the sweep: the model changed since these trials "
                     "ran:\n  - " + "\n  - ".join(lines))


def _trained_examples(config: TrialConfig, data_dir: str, allow_subset: bool) -> int | None:
    """The training examples ``config`` draws from ``data_dir`` now (None for QA, whose rows
    count windows, or where pre-flight refuses the size)."""
    if config.task_spec.is_qa:
        return None
    try:
        return data.train_count(config.task, config.train_size, data_dir).used(allow_subset)
    except InputError:
        return None


def _examples(config: TrialConfig, data_dir: str | None, allow_subset: bool) -> str:
    """The training examples a config's size resolves to on ``data_dir``'s split: what the
    paper meant, and what the file can give where that is less."""
    try:
        count = data.train_count(config.task, config.train_size, data_dir)
    except InputError:
        return "?"
    if not count.short:
        return f"{count.wanted:,}"
    return (f"{count.available:,}/{count.wanted:,}" + (" subset" if allow_subset
                                                       else " short"))


def describe(configs: tuple[TrialConfig, ...] | list[TrialConfig],
             data_dir: str | None = None, allow_subset: bool = False) -> str:
    """A short table of the grid: trials per experiment, task and train size; with
    ``data_dir``, also the training examples each size resolves to (a fraction is a share of
    the official split; "used/wanted subset" where a subset file holds fewer)."""
    groups: dict[tuple, list[TrialConfig]] = defaultdict(list)
    for c in configs:
        groups[(c.experiment, c.model, c.task, c.train_size)].append(c)
    counts = data_dir is not None
    header = ["experiment", "task", "size", *(["examples"] if counts else []), "trials",
              "seeds", "epochs", "model"]
    rows = []
    for (exp, model, task, size), cs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        rows.append([exp, task, "full" if size is None else str(size),
                     *([_examples(cs[0], data_dir, allow_subset)] if counts else []),
                     str(len(cs)), str(len({c.seed for c in cs})),
                     ",".join(str(e) for e in sorted({c.epochs for c in cs})), model])
    # text columns to the left, numbers to the right, each as wide as its widest cell
    left = {"experiment", "task", "model"}
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if name in left else cell.rjust(w)
                       for name, cell, w in zip(header, row, widths, strict=True)).rstrip()
             for row in [header, *rows]]
    if counts and any("/" in row[3] for row in rows):
        lines.append("examples used/wanted: the local train file is a subset of the official "
                     "split and holds fewer than the size asks for"
                     + ("" if allow_subset else " (needs --allow-subset)"))
    lines.append(f"total: {counted(len(configs), 'trial')}")
    return "\n".join(lines)
