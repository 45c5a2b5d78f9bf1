"""Task data: splits from local Parquet or the hub, seeded train subsets, tokenization, batches.

Local data lives in ``<dir>/<task>/<split>.parquet`` or ``<dir>/glue/<task>/<split>.parquet``
(the Hugging Face schema of the task's hub dataset: ``nyu-mll/glue``, ``rajpurkar/squad_v2``),
with ``<dir>`` from ``--data-dir`` or ``REINIT_TUNE_DATA``; without one, splits come from
``datasets.load_dataset`` of the task's hub dataset. Each (split, tokenizer, max length) is
tokenized once per machine into a ``datasets`` cache file and reused by every trial; batches
are padded to their longest member, not to ``max_seq_length``.

A train size that is a fraction is a share of the official split (``official_rows``: the
``subset`` note a local file's Parquet metadata carries, else the file's own row count; the
registry's size for the hub), not of a local file that holds only part of it; a size the
local file cannot supply is an error (``SubsetError``) unless the run allows training on
what there is (``--allow-subset``). Each trial records what data it saw
(``data_identity``: a fingerprint of the files' contents and where they are).

Extractive QA splits are cut into overlapping windows (``reinit_tune.qa.featurize``: a window
is ``max_seq_length`` tokens, consecutive windows of a context share a third of that, run_qa's
128 of 384); a training subset of n examples is n questions with all their windows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

from reinit_tune import env
from reinit_tune.env import DATA_ENV
from reinit_tune.errors import DataNotFoundError, InputError
from reinit_tune.model.shape import resolve_model
from reinit_tune.qa import QAFeatures, featurize
from reinit_tune.seeding import derive_seed
from reinit_tune.tasks import get_task

log = logging.getLogger("reinit_tune")

resolve_data_dir = env.data_dir


def _missing(task: str, split: str, where: str) -> DataNotFoundError:
    dataset, name = get_task(task).hub
    return DataNotFoundError(
        f"{task}/{split} not found ({where}). Provide it either way: (1) a local folder laid "
        f"out as <dir>/{task}/{split}.parquet (or <dir>/glue/{task}/{split}.parquet) passed "
        f"with --data-dir or the {DATA_ENV} environment variable (e.g. "
        f"{DATA_ENV}=../shared/data), or (2) internet access to the Hugging Face hub dataset "
        f"{dataset!r}{f' ({name})' if name else ''}."
    )


def local_split_path(task: str, split: str, data_dir=None) -> Path | None:
    """Where a local split is (or would be): ``<dir>/<task>/`` or ``<dir>/glue/<task>/``;
    None when splits come from the hub."""
    root = resolve_data_dir(data_dir)
    if root is None:
        return None
    candidates = [root / task / f"{split}.parquet", root / "glue" / task / f"{split}.parquet"]
    return next((c for c in candidates if c.is_file()), candidates[0])


def _check_split(task: str, split: str) -> None:
    spec = get_task(task)
    if split not in spec.splits:
        raise InputError(f"split: {split!r} of {task}; allowed: {list(spec.splits)}")


def load_split(task: str, split: str, data_dir: str | os.PathLike | None = None):
    """The raw ``datasets.Dataset`` of one split of ``task``."""
    import datasets

    _check_split(task, split)
    path = local_split_path(task, split, data_dir)
    if path is not None:
        if not path.is_file():
            raise _missing(task, split, f"no file {path}")
        return datasets.Dataset.from_parquet(str(path))
    dataset, name = get_task(task).hub
    try:
        return datasets.load_dataset(dataset, name, split=split)
    except Exception as e:  # offline or hub error: say how to provide the data instead
        raise _missing(task, split, f"hub load failed: {type(e).__name__}") from e


def _footer(path: Path) -> tuple[int, int | None]:
    """(rows, official rows from the ``subset`` note or None) of a Parquet file, read from its
    footer once per file version: a grid asks this for every config."""
    stat = path.stat()
    return _footer_of(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=128)
def _footer_of(path: str, mtime_ns: int, size: int) -> tuple[int, int | None]:
    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"{path} is not a readable Parquet file ({e}); replace it or fix "
                         "--data-dir") from None
    note = (meta.metadata or {}).get(b"subset")
    official = None
    if note:
        try:
            official = int(json.loads(note)["official_rows"])
        except (ValueError, KeyError, TypeError):  # a note without a count: trust the rows
            log.warning("%s: unreadable 'subset' metadata %r; using its row count", path, note)
    return meta.num_rows, official


def _local_footer(task: str, split: str, data_dir: str | os.PathLike | None
                  ) -> tuple[int, int | None] | None:
    """(rows, official rows) of a split's local file (``_footer``); None when the split comes
    from the hub."""
    _check_split(task, split)
    path = local_split_path(task, split, data_dir)
    if path is None:
        return None
    if not path.is_file():
        raise _missing(task, split, f"no file {path}")
    return _footer(path)


def split_rows(task: str, split: str, data_dir: str | os.PathLike | None = None) -> int:
    """Row count of a split without loading it (Parquet footer, or the official size)."""
    footer = _local_footer(task, split, data_dir)
    return get_task(task).rows[split] if footer is None else footer[0]


def official_rows(task: str, split: str, data_dir: str | os.PathLike | None = None) -> int:
    """Rows of the official split, what a fractional size is a share of: a local file's
    ``subset`` metadata (``{"rows": 9999, "official_rows": 104743}``), else the file's own
    row count; the registry's split size when splits come from the hub."""
    footer = _local_footer(task, split, data_dir)
    if footer is None:
        return get_task(task).rows[split]
    rows, official = footer
    return max(rows, official or rows)


def wanted_size(train_size: int | float | None, official: int, task: str = "task") -> int:
    """The examples ``train_size`` asks for of an official split of ``official`` rows: a
    count, a fraction of the official split, or all of it (None). This is the count the paper
    meant, what the 50-seed and 5-epoch rules read."""
    if train_size is None:
        return official
    if isinstance(train_size, float):
        return max(1, round(train_size * official))
    if train_size > official:
        raise InputError(
            f"train_size: {train_size} exceeds the {official} rows of the {task} train split; "
            f"allowed: 1..{official}, a fraction in (0, 1), or None for all"
        )
    return train_size


class SubsetError(InputError):
    """A train size asks for more examples than the local split file, a subset of the
    official split, holds."""


def _shown(size: int | float | None) -> str:
    if size is None:
        return "full (all of the split)"
    return f"{size:g} ({size:.1%} of the split)" if isinstance(size, float) else str(size)


@dataclass(frozen=True)
class TrainCount:
    """What a train size means for one task's train split as found: the examples it asks for
    (``wanted``, of the ``official`` split) and the rows the file holds (``available``)."""

    task: str
    size: int | float | None
    official: int
    available: int
    wanted: int
    where: str  # the file, or the hub dataset

    @property
    def short(self) -> bool:
        """The split as found cannot supply what the size asks for (a subset file)."""
        return self.wanted > self.available

    def used(self, allow_subset: bool = False) -> int:
        """Examples a trial trains on: ``wanted``, or with ``allow_subset`` all there are."""
        if self.short and not allow_subset:
            raise SubsetError(self.problem())
        return min(self.wanted, self.available)

    def problem(self) -> str:
        return (f"{self.task}: train size {_shown(self.size)} needs {self.wanted:,} examples of "
                f"the official {self.official:,}-row train split, but {self.where} holds "
                f"{self.available:,} (a subset); point --data-dir at the complete split, or "
                f"pass --allow-subset to train on the {self.available:,} there (its rows are "
                "marked data_subset)")


def train_count(task: str, train_size: int | float | None,
                data_dir: str | os.PathLike | None = None, *,
                available: int | None = None) -> TrainCount:
    """``TrainCount`` of ``train_size`` for ``task``'s train split in ``data_dir``
    (``available``: the rows already loaded, else the file's footer)."""
    path = local_split_path(task, "train", data_dir)
    official = official_rows(task, "train", data_dir)
    rows = split_rows(task, "train", data_dir) if available is None else available
    where = str(path) if path is not None else f"the hub's {get_task(task).hub[0]}"
    return TrainCount(task, train_size, max(official, rows), rows,
                      wanted_size(train_size, max(official, rows), task), where)


def subset_size(train_size: int | float | None, n_rows: int, task: str = "task",
                official: int | None = None, allow_subset: bool = False) -> int:
    """Examples drawn from a split of ``n_rows`` rows, part of an official split of
    ``official`` rows (None: the split is complete): ``wanted_size`` of the official split,
    capped at ``n_rows`` only with ``allow_subset`` (else ``SubsetError``)."""
    count = TrainCount(task, train_size, max(official or n_rows, n_rows), n_rows,
                       wanted_size(train_size, max(official or n_rows, n_rows), task),
                       f"the {task} train split")
    return count.used(allow_subset)


def subset_indices(n_rows: int, train_size: int | float | None, seed: int,
                   official: int | None = None, allow_subset: bool = False) -> np.ndarray:
    """Sorted row indices of the training subset of trial ``seed`` (003 App. B).

    The draw depends on ``seed`` only: trial n of every reinitialization sees the same
    examples (paired comparison across k), and different seeds see different subsets.
    """
    size = subset_size(train_size, n_rows, official=official, allow_subset=allow_subset)
    if size == n_rows:
        return np.arange(n_rows)
    rng = np.random.default_rng(derive_seed(seed, "train-subset"))
    return np.sort(rng.choice(n_rows, size=size, replace=False))


@lru_cache(maxsize=16)
def uses_segments(model: str) -> bool:
    """Whether ``model`` takes segment ids (``token_type_ids``): BERT does; RoBERTa (one
    segment embedding), DistilBERT, MPNet and decoders do not, whatever the tokenizer
    returns."""
    from transformers import AutoConfig

    from reinit_tune.model.stacks import ARCHITECTURES

    config = AutoConfig.from_pretrained(resolve_model(model))
    arch = ARCHITECTURES.get(config.model_type)
    return (arch is None or arch.segments) and getattr(config, "type_vocab_size", 2) > 1


@lru_cache(maxsize=4)
def load_tokenizer(model: str):
    """The model's own tokenizer. A decoder's tokenizer often has no padding token (GPT-2,
    Llama): batches are padded with its end-of-sequence token then, which is never an input
    token here, so the classifier's last-non-padding-token pooling finds the real last one."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(model))
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def tokenizer_identity(tokenizer) -> str:
    """Hash of the tokenizer's vocabulary and rules, without the truncation/padding state that
    the fast tokenizer records in its JSON after each call (which would change the hash)."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    spec.pop("truncation", None)
    spec.pop("padding", None)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


@dataclass
class QAExamples:
    """The questions of a QA split as scoring needs them: ids, contexts, gold answer texts."""

    ids: list[str]
    contexts: list[str]
    answers: list[list[str]]


@dataclass
class Encoded:
    """Tokenized examples held in memory, batched with padding to the longest member.

    ``labels`` holds a class (or score) per example, or for QA the (start, end) token of the
    answer in each window. QA splits also know each window's question (``example_index``),
    its null-answer position (``cls_index``) and character offsets, and the questions
    themselves (``examples``), which is what turning logits into answers needs."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    labels: np.ndarray
    pad_id: int
    example_index: np.ndarray | None = None
    cls_index: np.ndarray | None = None
    offsets: list[list[tuple[int, int] | None]] | None = None
    examples: QAExamples | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, i: int) -> int:
        return i  # the DataLoader hands indices to ``collate``, which pads the whole batch

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.input_ids), dtype=np.int64, count=len(self))

    @property
    def num_examples(self) -> int:
        """Examples (questions, for QA; windows are what ``len`` counts)."""
        return len(self.examples.ids) if self.examples is not None else len(self)

    def select(self, indices) -> Encoded:
        idx = [int(i) for i in indices]
        return dataclasses.replace(
            self,
            input_ids=[self.input_ids[i] for i in idx],
            token_type_ids=(None if self.token_type_ids is None
                            else [self.token_type_ids[i] for i in idx]),
            labels=self.labels[idx],
            example_index=None if self.example_index is None else self.example_index[idx],
            cls_index=None if self.cls_index is None else self.cls_index[idx],
            offsets=None if self.offsets is None else [self.offsets[i] for i in idx],
        )

    def select_examples(self, indices) -> Encoded:
        """The windows of the examples at ``indices`` (all of them, in order); for a split
        that is not cut into windows, ``select``."""
        if self.example_index is None:
            return self.select(indices)
        keep = np.isin(self.example_index, np.asarray(indices, dtype=np.int64))
        return self.select(np.flatnonzero(keep))

    def qa_features(self) -> QAFeatures:
        """This split's windows as ``reinit_tune.qa`` post-processing reads them."""
        return QAFeatures(self.input_ids, self.token_type_ids, self.labels[:, 0],
                          self.labels[:, 1], self.example_index, self.cls_index, self.offsets)

    def collate(self, indices: list[int]) -> dict[str, torch.Tensor]:
        # Hand-written rather than DataCollatorWithPadding: that goes through tokenizer.pad
        # per batch, several times slower than this for the short GLUE batches we train on.
        longest = max(len(self.input_ids[i]) for i in indices)
        ids = torch.full((len(indices), longest), self.pad_id, dtype=torch.long)
        types = torch.zeros((len(indices), longest), dtype=torch.long)
        mask = torch.zeros((len(indices), longest), dtype=torch.long)
        for row, i in enumerate(indices):
            n = len(self.input_ids[i])
            ids[row, :n] = torch.tensor(self.input_ids[i])
            if self.token_type_ids is not None:
                types[row, :n] = torch.tensor(self.token_type_ids[i])
            mask[row, :n] = 1
        batch = {"input_ids": ids, "attention_mask": mask}
        if self.token_type_ids is not None:
            batch["token_type_ids"] = types
        labels = torch.from_numpy(self.labels[indices])
        if labels.ndim == 2:  # QA: the answer's first and last token in each window
            batch["start_positions"], batch["end_positions"] = labels[:, 0], labels[:, 1]
        else:
            batch["labels"] = labels
        return batch


_encoded: dict[tuple, Encoded] = {}

# Characters one tokenizer call may see. A fast tokenizer encodes the whole of every text
# before it truncates (about 30 bytes per character: tokens, offsets, the overflow it keeps),
# so a batch of 1,000 texts of 10,000 words each took 1.8 GB; per call this bounds it to
# ~30 MB. GLUE batches of 1,000 rows stay one call.
CHARS_PER_CALL = 1_000_000


def text_chunks(columns: list[list[str]], limit: int | None = None) -> list[list[list[str]]]:
    """The rows of ``columns`` (one list per text field) cut into consecutive runs of at most
    ``limit`` characters (a longer row alone). The fast tokenizers encode each row on its
    own, so tokenizing the runs one after another gives exactly what one call would."""
    limit = CHARS_PER_CALL if limit is None else limit
    chunks, start, size = [], 0, 0
    for row in range(len(columns[0])):
        length = sum(len(column[row]) for column in columns)
        if size and size + length > limit:
            chunks.append([column[start:row] for column in columns])
            start, size = row, 0
        size += length
    if len(columns[0]) > start:
        chunks.append([column[start:] for column in columns])
    return chunks


def qa_stride(max_seq_length: int) -> int:
    """Tokens shared by consecutive windows of a context: run_qa's 128 at its 384."""
    return max_seq_length // 3


def encoded_split(
    task: str, split: str, model: str, max_seq_length: int, data_dir=None
) -> Encoded:
    """A whole split, tokenized for ``model`` (cached in this process and on disk)."""
    root = resolve_data_dir(data_dir)
    key = (task, split, model, max_seq_length, str(root))
    if key in _encoded:
        return _encoded[key]
    spec = get_task(task)
    raw = load_split(task, split, root)
    tokenizer = load_tokenizer(model)
    fingerprint = hashlib.sha256(
        repr((raw._fingerprint, tokenizer_identity(tokenizer), max_seq_length, spec.text_fields,
              spec.kind)).encode()
    ).hexdigest()[:20]
    cache = env.cache_dir() / "tokenized"
    cache.mkdir(parents=True, exist_ok=True)

    def encode(batch):
        ids, types = [], []
        for chunk in text_chunks([batch[f] for f in spec.text_fields]):
            out = tokenizer(*chunk, truncation=True, max_length=max_seq_length)
            ids += out["input_ids"]
            types += out.get("token_type_ids") or []
        if not types:  # RoBERTa-style: no segment ids
            return {"input_ids": ids}
        return {"input_ids": ids, "token_type_ids": types}

    def windows(batch, indices):
        f = featurize(batch["question"], batch["context"], batch["answers"], tokenizer,
                      max_length=max_seq_length, stride=qa_stride(max_seq_length))
        segments = {} if f.token_type_ids is None else {"token_type_ids": f.token_type_ids}
        return {"input_ids": f.input_ids, **segments,
                "start_positions": f.start_positions.tolist(),
                "end_positions": f.end_positions.tolist(),
                "example_index": [indices[i] for i in f.example_index],
                "cls_index": f.cls_index.tolist(),
                "offsets": [[None if o is None else list(o) for o in row] for row in f.offsets]}

    keep = set() if spec.is_qa else {"label"}
    cache_file = cache / f"{task}-{split}-{fingerprint}.arrow"

    def tokenize() -> dict[str, list]:
        tokenized = raw.map(
            windows if spec.is_qa else encode,
            batched=True,
            batch_size=1000,
            with_indices=spec.is_qa,
            remove_columns=[c for c in raw.column_names if c not in keep],
            cache_file_name=str(cache_file),
            new_fingerprint=fingerprint,
            desc=f"tokenizing {task}/{split}",
        )
        if not spec.is_qa and len(tokenized) != len(raw):
            raise ValueError(f"{len(tokenized)} rows for {len(raw)} examples")
        return tokenized.to_dict()

    try:
        columns = tokenize()
    except Exception as e:  # noqa: BLE001 - a cache entry cut short (a full disk, a killed
        if not cache_file.exists():  # writer) is unreadable in many ways; rebuild it once
            raise
        log.warning("tokenization cache %s is unreadable (%s: %s); rebuilding it", cache_file,
                    type(e).__name__, e)
        cache_file.unlink()
        columns = tokenize()
    types = columns.get("token_type_ids")  # RoBERTa-style tokenizers return none
    types = None if not types or types[0] is None or not uses_segments(model) else types
    if spec.is_qa:
        encoded = Encoded(
            columns["input_ids"], types,
            np.stack([columns["start_positions"], columns["end_positions"]], axis=1)
            .astype(np.int64),
            tokenizer.pad_token_id,
            example_index=np.asarray(columns["example_index"], dtype=np.int64),
            cls_index=np.asarray(columns["cls_index"], dtype=np.int64),
            offsets=[[None if o is None else (o[0], o[1]) for o in row]
                     for row in columns["offsets"]],
            examples=QAExamples(list(raw["id"]), list(raw["context"]),
                                [list(a["text"]) for a in raw["answers"]]),
        )
    else:
        labels = checked_labels(columns["label"], task, split)
        encoded = Encoded(columns["input_ids"], types, labels, tokenizer.pad_token_id)
    if len(_encoded) >= 8:  # bounded: a worker rarely sees more than a few tasks
        _encoded.pop(next(iter(_encoded)))
    _encoded[key] = encoded
    return encoded


def checked_labels(values: list, task: str, split: str) -> np.ndarray:
    """``values`` as the label array ``task`` trains on: finite floats for regression, class
    indices 0..num_labels-1 for classification (never a silent cast of 0.95 to 0)."""
    spec = get_task(task)
    where = f"{task}/{split} labels"
    try:
        raw = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{where} are not numbers (e.g. {values[0]!r}); map them to "
                         f"0..{spec.num_labels - 1} in the data file") from None
    if spec.is_regression:
        if not np.isfinite(raw).all():
            raise InputError(f"{where}: {int((~np.isfinite(raw)).sum())} are not finite "
                             "(NaN or infinite); fix or drop those rows in the data file")
        return raw.astype(np.float32)
    bad = ~np.isfinite(raw) | (raw != np.round(raw)) | (raw < 0) | (raw >= spec.num_labels)
    if bad.any():
        raise InputError(f"{where}: {int(bad.sum())} are not class indices "
                         f"0..{spec.num_labels - 1} (e.g. {float(raw[bad][0]):g}); fix them in the "
                         "data file")
    return raw.astype(np.int64)


def train_and_devs(
    task: str,
    model: str,
    max_seq_length: int,
    train_size: int | float | None,
    seed: int,
    data_dir=None,
    allow_subset: bool = False,
) -> tuple[Encoded, dict[str, Encoded]]:
    """The seeded training subset and every dev split of ``task`` (by name, the primary
    first), tokenized. For QA the subset is drawn over questions. A fractional size is a
    share of the official split; more than the split file holds is a ``SubsetError``
    unless ``allow_subset`` (then the whole file)."""
    train = encoded_split(task, "train", model, max_seq_length, data_dir)
    n = train.num_examples
    count = train_count(task, train_size, data_dir, available=n)
    count.used(allow_subset)  # clear error before anything else
    train = train.select_examples(
        subset_indices(n, train_size, seed, count.official, allow_subset))
    devs = {split: encoded_split(task, split, model, max_seq_length, data_dir)
            for split in get_task(task).dev_splits}
    return train, devs


# -- what data a trial saw ----------------------------------------------------------------
@lru_cache(maxsize=256)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, computed once per file version (path, mtime, size): every
    trial of a sweep asks for the same few files."""
    stat = os.stat(path)
    return _file_sha256(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


def data_identity(task: str, data_dir: str | os.PathLike | None = None,
                  intermediate_task: str | None = None) -> tuple[str, str]:
    """(fingerprint, source) of the data a trial of ``task`` trains and is scored on (and of
    its ``intermediate_task``'s splits): sha256 over each local split file's content hash,
    and the files' paths; for the hub, its dataset names (the hub pins no revision here, so
    its fingerprint says only which dataset). A row's fingerprint tells whether a rerun
    would see the same data; it is never part of the trial id."""
    parts, local, hub = [], [], []
    for name in dict.fromkeys(filter(None, (intermediate_task, task))):
        for split in get_task(name).splits:
            path = local_split_path(name, split, data_dir)
            if path is None:
                dataset, config = get_task(name).hub
                parts.append(f"{name}/{split}=hub:{dataset}/{config or ''}")
                hub.append(f"{dataset}{f' ({config})' if config else ''}")
            elif not path.is_file():
                raise _missing(name, split, f"no file {path}")
            else:
                parts.append(f"{name}/{split}={file_sha256(path)}")
                local.append(path)
    fingerprint = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    sources = []
    if local:
        root = Path(os.path.commonpath([p.parent for p in local]))
        sources.append(f"{root}: " + ", ".join(str(p.relative_to(root)) for p in local))
    if hub:
        sources.append("hub: " + ", ".join(dict.fromkeys(hub)))
    return fingerprint, "; ".join(sources)
