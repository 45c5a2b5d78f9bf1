"""The task registry: each task's kind, input columns, label space, splits, dev metrics, sizes.

Two kinds of task:

- ``"classification"``: the GLUE tasks, a label (or a score, STS-B) per example. Metrics as
  the GLUE benchmark reports them and 003 §2 and 001 §5 use them: accuracy for SST-2, QNLI,
  RTE, WNLI and MNLI; accuracy and F1 for MRPC, with their mean ``acc_and_f1`` (001 §5.6
  reports MRPC that way); Matthews correlation for CoLA; Pearson and Spearman correlation for
  STS-B. MNLI is scored on both dev splits (002): matched is the primary metric, mismatched
  is stored beside it as ``accuracy_mismatched``.
- ``"qa"``: extractive question answering on SQuAD 2.0 (001 §5.1.1), scored with the official
  SQuAD 2.0 exact match and F1, with their HasAns/NoAns breakdowns.

``primary`` is the metric the papers plot; it is a trial's ``score``. Metrics of a second dev
split carry that split's name (``validation_mismatched`` → ``accuracy_mismatched``).
"""

from __future__ import annotations

from dataclasses import dataclass

from reinit_tune.errors import InputError


@dataclass(frozen=True)
class Task:
    name: str
    text_fields: tuple[str, ...]  # input columns, in the order the tokenizer takes them
    num_labels: int  # 1 means regression (STS-B); unused for QA
    metrics: tuple[str, ...]
    primary: str
    # Official split sizes; used to expand default grids when no local copy is given.
    rows: dict[str, int]
    hub: tuple[str, str | None]  # (dataset, configuration) on the Hugging Face hub
    dev_splits: tuple[str, ...] = ("validation",)
    kind: str = "classification"

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1

    @property
    def is_qa(self) -> bool:
        return self.kind == "qa"

    @property
    def splits(self) -> tuple[str, ...]:
        return ("train", *self.dev_splits)

    @property
    def train_rows(self) -> int:
        return self.rows["train"]

    def split_metrics(self, split: str) -> tuple[str, ...]:
        """The metric names scored on dev split ``split``: the task's own on the first dev
        split, suffixed with the split's name on the others."""
        if split == self.dev_splits[0]:
            return self.metrics
        suffix = split.removeprefix("validation_")
        return tuple(f"{m}_{suffix}" for m in self.metrics)

    @property
    def all_metrics(self) -> tuple[str, ...]:
        return tuple(m for split in self.dev_splits for m in self.split_metrics(split))


def _glue(name: str, fields: tuple[str, ...], num_labels: int, metrics: tuple[str, ...],
          train: int, dev: int, **kwargs) -> Task:
    return Task(name, fields, num_labels, metrics, metrics[0],
                {"train": train, **{s: dev for s in kwargs.get("dev_splits", ("validation",))}},
                ("nyu-mll/glue", name), **kwargs)


QA_METRICS = ("exact", "f1", "hasans_exact", "hasans_f1", "noans_exact", "noans_f1")

TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        _glue("sst2", ("sentence",), 2, ("accuracy",), 67_349, 872),
        _glue("qnli", ("question", "sentence"), 2, ("accuracy",), 104_743, 5_463),
        _glue("cola", ("sentence",), 2, ("mcc",), 8_551, 1_043),
        _glue("mrpc", ("sentence1", "sentence2"), 2, ("accuracy", "f1", "acc_and_f1"),
              3_668, 408),
        _glue("rte", ("sentence1", "sentence2"), 2, ("accuracy",), 2_490, 277),
        _glue("stsb", ("sentence1", "sentence2"), 1, ("pearson", "spearman"), 5_749, 1_500),
        _glue("wnli", ("sentence1", "sentence2"), 2, ("accuracy",), 635, 71),
        Task("mnli", ("premise", "hypothesis"), 3, ("accuracy",), "accuracy",
             {"train": 392_702, "validation_matched": 9_815, "validation_mismatched": 9_832},
             ("nyu-mll/glue", "mnli"), dev_splits=("validation_matched",
                                                   "validation_mismatched")),
        Task("squad_v2", ("question", "context"), 0, QA_METRICS, "f1",
             {"train": 130_319, "validation": 11_873}, ("rajpurkar/squad_v2", None),
             kind="qa"),
    )
}

# Every metric any task reports; the store has one column per entry so all rows share a schema.
# The first five are the columns of stores written before the others existed, in their order.
ALL_METRICS: tuple[str, ...] = tuple(dict.fromkeys(
    ("accuracy", "f1", "mcc", "pearson", "spearman",
     *(m for task in TASKS.values() for m in task.all_metrics))))

# metrics on a correlation-like scale (claims.md §0.5: their δ_abs is 0.02, their δ_chance 0.05)
LOOSE_METRICS = frozenset({"mcc", "pearson", "spearman", "pearson_spearman_mean"})
# two scores this close are one score (a rate computed twice, in float32 and float64)
SCORE_TOLERANCE = 1e-9


def _squashed(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def task_name(text: str) -> str:
    """The task ``text`` names, in any case, with or without a dash (``SST2``, ``sst-2``:
    ``sst2``); an unknown one is an ``InputError`` with the nearest names."""
    import difflib

    by_squashed = {_squashed(t): t for t in TASKS}
    if (task := by_squashed.get(_squashed(text))) is not None:
        return task
    near = difflib.get_close_matches(_squashed(text), list(by_squashed), n=2, cutoff=0.5)
    hint = f"did you mean {' or '.join(by_squashed[n] for n in near)}? " if near else ""
    raise InputError(f"unknown task {text!r}; {hint}tasks: {' '.join(sorted(TASKS))}")


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise InputError(f"task: unknown task {name!r}; allowed: {sorted(TASKS)}") from None
