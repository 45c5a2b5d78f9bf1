"""Planning a sweep: a grid of configs, checked and compared with the store, before Ray starts.

``make_plan`` collapses identical configs, looks up each model's shape, runs every pre-flight
check (``reinit_tune.sweep.preflight``) and skips the trials the store already holds "ok";
a trial whose configuration the store holds under another experiment name (``small_data``'s
runs are ``progressive``'s at 500 examples) is copied from it, not run again;
the resulting ``Plan`` is what ``reinit_tune.sweep.cost`` estimates and
``reinit_tune.sweep.runner`` launches. The store is the only resume state: planning the same
grid again after an interruption leaves exactly the unfinished trials to run.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from reinit_tune import env, store
from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.hardware import emulated_bf16_warning
from reinit_tune.model.shape import ModelShape, model_shape
from reinit_tune.sweep.options import RunOptions
from reinit_tune.sweep.preflight import preflight

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

    @property
    def skipped(self) -> int:
        return len(self.configs) - len(self.todo) - len(self.reuse)


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


def make_plan(configs: list[TrialConfig], options: RunOptions,
              shapes: dict[str, ModelShape] | None = None) -> Plan:
    """Check ``configs`` (pre-flight) and find which of them the store lacks. ``shapes``
    gives the shape of models that cannot be inspected here; others are looked up."""
    results = Path(options.results_dir).expanduser().resolve()
    storage = env.storage(options.storage, results)
    data_root = env.data_dir(options.data_dir)
    data_dir = str(data_root) if data_root else env.HUB  # what the driver resolved, for all
    unique = list({c.trial_id: c for c in configs}.values())  # identical configs: one trial
    shapes = _shapes(unique, shapes)
    preflight(unique, shapes, options, results_dir=results, data_dir=data_dir, storage=storage)
    for precision in sorted({c.precision for c in unique}):
        warning = emulated_bf16_warning(precision, options.resources.gpus_per_trial > 0)
        if warning:
            log.warning("%s", warning)
    done = store.finished_ids(results)
    if options.similarity is not None:
        done &= store.similarity_ids(results)
    if options.save_model:
        done = {i for i in done if (results / "models" / i / "config.json").is_file()}
    name = options.name or (unique[0].experiment if unique else "sweep")
    missing = [c for c in unique if c.trial_id not in done]
    equivalents = store.equivalent_ids(results)
    reuse = {c.trial_id: equivalents[store.equivalence_key(c)] for c in missing
             if store.equivalence_key(c) in equivalents
             and equivalents[store.equivalence_key(c)] in done}
    return Plan(name, tuple(unique), tuple(c for c in missing if c.trial_id not in reuse),
                reuse, shapes, options, results, data_dir, storage)


def describe(configs: tuple[TrialConfig, ...] | list[TrialConfig]) -> str:
    """A short table of the grid: trials per experiment, task and train size."""
    groups: dict[tuple, list[TrialConfig]] = defaultdict(list)
    for c in configs:
        groups[(c.experiment, c.model, c.task, c.train_size)].append(c)
    lines = [f"{'experiment':<14} {'task':<6} {'size':>7} {'trials':>6} {'seeds':>5} "
             f"{'epochs':>6}  model"]
    for (exp, model, task, size), cs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        epochs = ",".join(str(e) for e in sorted({c.epochs for c in cs}))
        lines.append(
            f"{exp:<14} {task:<6} {str(size if size is not None else 'full'):>7} {len(cs):>6} "
            f"{len({c.seed for c in cs}):>5} {epochs:>6}  {model}"
        )
    lines.append(f"total: {len(configs)} trials")
    return "\n".join(lines)
