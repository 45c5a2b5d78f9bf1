"""Pre-flight validation: everything about a sweep that can be checked before Ray starts.

``TrialConfig`` validates each field on construction; this module checks what depends on the
machine and on the sweep as a whole: every config against its model's shape, model files,
data files and their columns and labels, train sizes against the real splits, the results
and storage folders, and the placement options. Every problem is one line saying what to
change; all of them are reported together in one ``InputError``, and nothing starts.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from reinit_tune import data
from reinit_tune.config import TrialConfig
from reinit_tune.errors import DataNotFoundError, InputError
from reinit_tune.model.shape import ModelShape, resolve_model
from reinit_tune.sweep.options import RunOptions
from reinit_tune.tasks import get_task

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json")
# Encoders whose layers sit at ``base_model.encoder.layer`` (reinit_tune.model.surgery).
MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "electra")


def check_placement(options: RunOptions) -> list[str]:
    cpus_per_trial = options.resources.cpus_per_trial
    gpus_per_trial = options.resources.gpus_per_trial
    max_failures, checkpoint_after_s = options.max_failures, options.checkpoint_after_s
    problems = []
    if not cpus_per_trial > 0:
        problems.append(f"--cpus-per-trial must be > 0, got {cpus_per_trial:g}")
    if not gpus_per_trial >= 0:
        problems.append(f"--gpus-per-trial must be >= 0, got {gpus_per_trial:g}")
    for flag, value in (("--cpus-per-trial", cpus_per_trial), ("--gpus-per-trial", gpus_per_trial)):
        if value > 1 and value != int(value):
            # Ray packs fractions below 1 onto one device; above 1 it only takes whole units.
            problems.append(f"{flag} {value:g}: above 1 it must be a whole number "
                            f"(use {math.floor(value)} or {math.ceil(value)})")
    if isinstance(max_failures, bool) or not isinstance(max_failures, int) or max_failures < 0:
        problems.append(f"--max-failures must be an integer >= 0, got {max_failures!r}")
    if options.evaluate not in ("final", "every-epoch"):
        problems.append(f"--eval {options.evaluate!r}; allowed: final, every-epoch")
    if options.log_every < 0:
        problems.append(f"--log-every must be >= 0 (0: no per-step losses), got "
                        f"{options.log_every}")
    if not checkpoint_after_s >= 0:
        problems.append(f"--checkpoint-after-s must be >= 0 (inf: never), got "
                        f"{checkpoint_after_s:g}")
    return problems


def check_folder(path: Path, flag: str) -> list[str]:
    """A folder we will create files in: it, or its nearest existing parent, is a writable dir."""
    if path.exists() and not path.is_dir():
        return [f"{flag} {path} is a file, not a folder; pass a folder"]
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        return [f"{flag} {path} is not writable ({existing} is not a writable folder); "
                f"pass another {flag}"]
    return []


def check_model(model: str) -> list[str]:
    """Files a local model folder must hold (hub ids are checked by the trial that loads them)."""
    try:
        folder = Path(resolve_model(model))
    except InputError as e:
        return [str(e)]
    if not folder.is_dir():
        return []
    problems = []
    model_type = json.loads((folder / "config.json").read_text()).get("model_type")
    if model_type is not None and model_type not in MODEL_TYPES:
        problems.append(f"model: {model} is a {model_type!r} model; reinit-tune supports "
                        f"BERT-family encoders ({', '.join(MODEL_TYPES)}); pass one of those")
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        problems.append(f"model: {folder} has no weights ({' or '.join(WEIGHT_FILES[::2])}); "
                        "save the model there with save_pretrained")
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        problems.append(f"model: {folder} has no tokenizer (tokenizer.json or vocab.txt); "
                        "save the tokenizer there with tokenizer.save_pretrained")
    return problems


def check_split(task: str, split: str, data_dir: str | None) -> list[str]:
    """Columns and labels of a local split (the hub's splits are known to be right)."""
    path = data.local_split_path(task, split, data_dir)
    if path is None:
        return []
    spec = get_task(task)
    columns = set(pq.read_schema(path).names)
    needed = (*spec.text_fields, "id", "answers") if spec.is_qa else (*spec.text_fields, "label")
    missing = [c for c in needed if c not in columns]
    if missing:
        return [f"{path} lacks columns {missing} that {task} needs "
                f"({', '.join(needed)}); fix the file or --data-dir"]
    if spec.is_regression or spec.is_qa:
        return []
    labels = pq.read_table(path, columns=["label"])["label"]
    low, high = pc.min(labels).as_py(), pc.max(labels).as_py()
    if high is None or high < 0:
        return [f"{path} has no labels (all -1: the unlabeled GLUE test split?); use the "
                "labeled validation (dev) split"]
    if low < 0 or high >= spec.num_labels:
        return [f"{path} has labels {low}..{high}; {task} needs 0..{spec.num_labels - 1}; "
                "fix the file or --data-dir"]
    return []


def check_configs(configs: list[TrialConfig], shapes: dict[str, ModelShape]) -> list[str]:
    """Every config against the shape of its model (indices, lengths), one line per problem."""
    problems: dict[str, None] = {}
    for config in configs:
        try:
            config.check(shapes[config.model])
        except InputError as e:
            problems[str(e)] = None
    return list(problems)


def preflight(
    configs: list[TrialConfig],
    shapes: dict[str, ModelShape],
    options: RunOptions,
    *,
    results_dir: Path,
    data_dir: str | None,
    storage: str,
) -> None:
    """Check everything that can be checked without running a trial; raise ``InputError``
    listing every problem."""
    problems = check_placement(options)
    if not configs:
        problems.append("the grid is empty: check --tasks, --sizes, --k and --seeds")
    problems += check_configs(configs, shapes)
    for model in sorted({c.model for c in configs}):
        problems += check_model(model)
    sizes: dict[str, set] = defaultdict(set)  # an intermediate task trains at the trial's size
    for c in configs:
        for task in filter(None, (c.task, c.intermediate_task)):
            sizes[task].add(c.train_size)
    for task in sorted(sizes):
        try:
            n_train = data.split_rows(task, "train", data_dir)
            for split in get_task(task).dev_splits:
                data.split_rows(task, split, data_dir)
        except DataNotFoundError as e:
            problems.append(str(e))
            continue
        for split in get_task(task).splits:
            problems += check_split(task, split, data_dir)
        for size in sorted(sizes[task], key=str):
            try:
                data.subset_size(size, n_train, task)
            except InputError as e:
                problems.append(f"{e} (remove it from --sizes)")
    problems += check_folder(results_dir, "--results")
    if "://" not in storage and not Path(storage).is_relative_to(results_dir):
        problems += check_folder(Path(storage), "--storage")
    if problems:
        raise InputError("cannot start the sweep:\n  - " + "\n  - ".join(problems))
