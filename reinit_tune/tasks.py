"""GLUE task registry: input columns, label space, dev-split metrics and split sizes.

The metric lists follow the GLUE benchmark as used by 003 §2 and 001 §5: accuracy for
SST-2/QNLI/RTE/WNLI, accuracy and F1 for MRPC, Matthews correlation for CoLA, Pearson and
Spearman correlation for STS-B. ``primary`` is the metric the papers plot.
"""

from __future__ import annotations

from dataclasses import dataclass

from reinit_tune.errors import InputError


@dataclass(frozen=True)
class Task:
    name: str
    text_fields: tuple[str, ...]
    num_labels: int  # 1 means regression (STS-B)
    metrics: tuple[str, ...]
    primary: str
    # Official GLUE split sizes; used to expand default grids when no local copy is given.
    train_rows: int
    dev_rows: int

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("sst2", ("sentence",), 2, ("accuracy",), "accuracy", 67_349, 872),
        Task("qnli", ("question", "sentence"), 2, ("accuracy",), "accuracy", 104_743, 5_463),
        Task("cola", ("sentence",), 2, ("mcc",), "mcc", 8_551, 1_043),
        Task("mrpc", ("sentence1", "sentence2"), 2, ("accuracy", "f1"), "accuracy", 3_668, 408),
        Task("rte", ("sentence1", "sentence2"), 2, ("accuracy",), "accuracy", 2_490, 277),
        Task(
            "stsb", ("sentence1", "sentence2"), 1, ("pearson", "spearman"), "pearson", 5_749, 1_500
        ),
        Task("wnli", ("sentence1", "sentence2"), 2, ("accuracy",), "accuracy", 635, 71),
    )
}

# Every metric any task reports; the store has one column per entry so all rows share a schema.
ALL_METRICS: tuple[str, ...] = ("accuracy", "f1", "mcc", "pearson", "spearman")


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise InputError(f"task: unknown task {name!r}; allowed: {sorted(TASKS)}") from None
