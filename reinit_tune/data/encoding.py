"""Tokenization: a split tokenized for a model once per machine, held as ``Encoded`` batches.

Each (split, tokenizer, max length) is tokenized once per machine into a ``datasets`` cache
file and reused by every trial; batches are padded to their longest member, not to
``max_seq_length``. Labels are checked before they are cast (``checked_labels``).

Extractive QA splits are cut into overlapping windows (``reinit_tune.qa.featurize``: a window
is ``max_seq_length`` tokens, consecutive windows of a context share a third of that, run_qa's
128 of 384); a training subset of n examples is n questions with all their windows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from reinit_tune import env
from reinit_tune.data.source import TaskSource
from reinit_tune.errors import InputError
from reinit_tune.model.shape import resolve_model
from reinit_tune.qa import QAFeatures, featurize
from reinit_tune.tasks import Task, get_task

if TYPE_CHECKING:  # imported where batches are made: grids and `reinit-tune --help` need none
    import torch

log = logging.getLogger("reinit_tune")


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
    """Hash of the tokenizer's vocabulary and rules and of the inputs it returns, without the
    truncation/padding state that the fast tokenizer records in its JSON after each call
    (which would change the hash). The inputs count: BERT's and DistilBERT's tokenizers share
    vocabulary and rules, and only BERT's returns segment ids."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    spec.pop("truncation", None)
    spec.pop("padding", None)
    spec["model_input_names"] = list(tokenizer.model_input_names)
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
        import torch  # after the first batch a dictionary lookup

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
    return encode(TaskSource.find(task, data_dir), split, model, max_seq_length)


def encode(source: TaskSource, split: str, model: str, max_seq_length: int) -> Encoded:
    """A whole split of ``source``, tokenized for ``model`` (cached in this process and on
    disk)."""
    spec, task = source.spec, source.task
    key = (task, split, model, max_seq_length, str(source.root))
    if key in _encoded:
        return _encoded[key]
    raw = source.load(split)
    tokenizer = load_tokenizer(model)
    fingerprint = hashlib.sha256(
        repr((raw._fingerprint, tokenizer_identity(tokenizer), max_seq_length, spec.text_fields,
              spec.kind)).encode()
    ).hexdigest()[:20]
    cache = env.cache_dir() / "tokenized"
    cache.mkdir(parents=True, exist_ok=True)

    def tokens(batch):
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
            windows if spec.is_qa else tokens,
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
        labels = checked_labels(columns["label"], spec, split)
        encoded = Encoded(columns["input_ids"], types, labels, tokenizer.pad_token_id)
    if len(_encoded) >= 8:  # bounded: a worker rarely sees more than a few tasks
        _encoded.pop(next(iter(_encoded)))
    _encoded[key] = encoded
    return encoded


def checked_labels(values: list, task: str | Task, split: str) -> np.ndarray:
    """``values`` as the label array ``task`` trains on: finite floats for regression, class
    indices 0..num_labels-1 for classification (never a silent cast of 0.95 to 0)."""
    spec = task if isinstance(task, Task) else get_task(task)
    where = f"{spec.name}/{split} labels"
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
