"""A trial's outcome as one typed value: how it ended (``Status``), what each finished epoch
measured (``EpochRecord``), what the trial knew of itself (its node, library versions, model
depth, the data it saw) and its payloads (similarity rows, step losses).

The worker makes it (``reinit_tune.sweep.trial``), Tune carries it to the driver
(``to_report``/``from_report``: plain JSON types, so Tune's own loggers keep working on the
flat metrics beside it) and the store writes it field by field: every scalar field of
``TrialOutcome`` is a column of the trial table, every scalar field of ``EpochRecord`` a column
of the epoch table and (its last epoch's value, or the sum of all, see ``trial_value``) of the
trial table. A field added here is a column there.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Mapping
from typing import Any


class Status(enum.Enum):
    """How a trial ended."""

    OK = "ok"  # trained every epoch
    FAILED = "failed"  # raised an error a retry would repeat
    DIVERGED = "diverged"  # its loss stopped being finite (``errors.TrialDiverged``)
    SKIPPED = "skipped"  # not trained here: another driver holds or stored it

    @property
    def stored(self) -> str:
        """The store's ``status`` column: "ok", else "error" (the error text says which)."""
        return "ok" if self is Status.OK else "error"


# Field metadata: which tables a field of ``EpochRecord`` is a column of, and how the trial
# table takes it from the epochs ("last": the last epoch's value; "sum": over all epochs).
EPOCH_TABLE = "epoch_table"
TRIAL_VALUE = "trial_value"


def _column(*, epochs: bool = True, trial: str | None = "last", default: Any = None) -> Any:
    return dataclasses.field(default=default, metadata={EPOCH_TABLE: epochs, TRIAL_VALUE: trial})


@dataclasses.dataclass(frozen=True)
class EpochRecord:
    """What one finished epoch measured. ``metrics`` are the dev metrics by name (stored as
    ``eval_<name>``); ``steps`` (payload, the steps table) the (step, loss, lr) of every
    logged step."""

    epoch: int = _column(trial=None, default=0)
    train_loss: float | None = _column()
    eval_loss: float | None = _column()  # None: not evaluated this epoch
    score: float | None = _column()
    metrics: Mapping[str, float] = dataclasses.field(default_factory=dict)
    train_time_s: float | None = _column(trial="sum")
    eval_time_s: float | None = _column(trial="sum")
    # the trial's rate is over all its epochs: the store computes it
    train_examples_per_s: float | None = _column(trial=None)
    train_examples: int | None = _column(epochs=False)
    device: str | None = _column(epochs=False)
    precision_used: str | None = _column(epochs=False)
    steps: tuple[tuple[int, float, float], ...] = ()


# Fields of ``EpochRecord`` and ``TrialOutcome`` that are no column of their own.
PAYLOADS = frozenset({"metrics", "steps", "trial_id", "status", "epochs", "similarity"})


@dataclasses.dataclass(frozen=True)
class TrialOutcome:
    """One trial's outcome, whatever it was. A skipped trial carries why in ``error``."""

    trial_id: str
    status: Status = Status.OK
    epochs: tuple[EpochRecord, ...] = ()
    error: str | None = None
    num_layers: int | None = None
    setup_time_s: float | None = None
    node_id: str | None = None
    hostname: str | None = None
    versions: str | None = None  # JSON: library versions of the worker
    # the epoch its last attempt continued after (a checkpoint), or 0
    resumed_from_epoch: int | None = None
    # the primary metric of not learning on the dev labels (reinit_tune.metrics)
    majority_score: float | None = None
    chance_score: float | None = None
    data_subset: bool | None = None
    data_fingerprint: str | None = None
    data_source: str | None = None
    # the weights the trial loaded (reinit_tune.model.fingerprint); None in older rows
    model_fingerprint: str | None = None
    # GPU memory PyTorch held allocated when the trial started (left by earlier trials of its
    # worker) and at most, up to its last epoch (a pack member: its pack's); None off GPUs
    gpu_memory_start_bytes: int | None = None
    gpu_memory_peak_bytes: int | None = None
    worker_pid: int | None = None  # the process that trained it (a reused worker: the same)
    # the trials trained together with it as one pack (reinit_tune.training.pack), 1 alone;
    # and, where its pack was split before it trained, how ("pack of 28 split into 14 + 14
    # (out of GPU memory)"): its epochs are all from the run it names
    pack_size: int | None = None
    pack_history: str | None = None
    similarity: tuple[Mapping[str, Any], ...] = ()  # per layer, on the last epoch

    @property
    def epoch(self) -> int:
        """The last epoch it finished (0: none)."""
        return max((e.epoch for e in self.epochs), default=0)

    def with_epochs(self, epochs: Iterable[EpochRecord]) -> TrialOutcome:
        """This outcome with ``epochs`` added, by epoch number (a later record of an epoch, from
        a resumed attempt, replaces an earlier one)."""
        merged = {e.epoch: e for e in (*self.epochs, *epochs)}
        return dataclasses.replace(self, epochs=tuple(merged[n] for n in sorted(merged)))

    def then(self, later: TrialOutcome) -> TrialOutcome:
        """``later``, a later report of the same trial, with this one's epochs that it does
        not report again."""
        return dataclasses.replace(later, epochs=self.epochs).with_epochs(later.epochs)

    def to_report(self) -> dict[str, Any]:
        """The outcome in JSON types, for Tune's report (``from_report`` reads it back)."""
        return {**dataclasses.asdict(self), "status": self.status.value}

    @classmethod
    def from_report(cls, report: Mapping[str, Any] | str) -> TrialOutcome:
        """The outcome ``to_report`` gave (or its JSON text, as ``tune_metrics`` sends it)."""
        if isinstance(report, str):
            report = json.loads(report)
        epochs = tuple(EpochRecord(**{**e, "metrics": dict(e.get("metrics") or {}),
                                      "steps": tuple(tuple(s) for s in e.get("steps") or ())})
                       for e in report.get("epochs") or ())
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in report.items() if k in known},
                      "status": Status(report["status"]), "epochs": epochs,
                      "similarity": tuple(dict(r) for r in report.get("similarity") or ())})

    def tune_metrics(self) -> dict[str, Any]:
        """What a worker reports to Tune: its last epoch's flat numbers (what Tune's loggers
        and progress show) and the whole outcome under ``"outcome"`` (``from_report``)."""
        flat = self.reports()[-1] if self.epochs else {**self.static(), "epoch": self.epoch}
        flat = {k: v for k, v in flat.items() if k not in ("steps", "similarity_rows")}
        # One string: Tune's loggers flatten nested metrics and log lists as histograms
        # (warning on lists of rows); a string passes every logger untouched.
        return {**flat, "outcome": json.dumps(self.to_report())}

    def static(self) -> dict[str, Any]:
        """The trial-level scalar fields (no status, error or payloads)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in PAYLOADS and f.name != "error"}

    def reports(self) -> list[dict[str, Any]]:
        """Each epoch as one flat dict (its fields, ``eval_<metric>``, the trial-level fields;
        ``steps`` and, on the last epoch, ``similarity_rows`` as JSON): what ``execute``
        returns to callers without Ray."""
        out = []
        for record in self.epochs:
            flat = {**epoch_columns(record, epochs_only=False), **self.static()}
            if record.steps:
                flat["steps"] = json.dumps([list(s) for s in record.steps])
            if self.similarity and record.epoch == self.epoch:
                flat["similarity_rows"] = json.dumps([dict(r) for r in self.similarity])
            out.append(flat)
        return out

    @classmethod
    def from_reports(cls, trial_id: str, reports: Iterable[Mapping[str, Any]], *,
                     status: Status = Status.OK, error: str | None = None) -> TrialOutcome:
        """The outcome whose ``reports()`` are ``reports`` (flat per-epoch dicts); unknown keys
        are left out."""
        reports = sorted(reports, key=lambda r: r["epoch"])
        names = {f.name for f in dataclasses.fields(EpochRecord)} - PAYLOADS
        epochs = tuple(EpochRecord(
            **{k: r[k] for k in names if k in r},
            metrics={k.removeprefix("eval_"): v for k, v in r.items()
                     if k.startswith("eval_") and k not in ("eval_loss", "eval_time_s")},
            steps=tuple(tuple(s) for s in json.loads(r.get("steps") or "[]")))
            for r in reports)
        last = reports[-1] if reports else {}
        static = {f.name: last[f.name] for f in dataclasses.fields(cls)
                  if f.name not in PAYLOADS and f.name != "error" and f.name in last}
        similarity = tuple(json.loads(last.get("similarity_rows") or "[]"))
        return cls(trial_id, status, epochs, error, **static, similarity=similarity)


def epoch_columns(record: EpochRecord, epochs_only: bool = True) -> dict[str, Any]:
    """The scalar fields of ``record`` by column name, its metrics as ``eval_<name>``; with
    ``epochs_only`` only those the epoch table stores."""
    columns = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)
               if f.name not in PAYLOADS and (f.metadata.get(EPOCH_TABLE, True)
                                              or not epochs_only)}
    return {**columns, **{f"eval_{k}": v for k, v in record.metrics.items()}}


def epoch_totals(epochs: Iterable[EpochRecord]) -> dict[str, Any]:
    """What a trial's epochs say of the trial, by column name: each field's last value or its
    sum over the epochs (``TRIAL_VALUE``), and the last epoch's metrics as ``eval_<name>``."""
    epochs = sorted(epochs, key=lambda e: e.epoch)
    if not epochs:
        return {}
    totals = {}
    for f in dataclasses.fields(epochs[-1]):
        how = f.metadata.get(TRIAL_VALUE, "last")
        if f.name in PAYLOADS or how is None:
            continue
        totals[f.name] = sum(getattr(e, f.name) for e in epochs) if how == "sum" \
            else getattr(epochs[-1], f.name)
    return {**totals, **{f"eval_{k}": v for k, v in epochs[-1].metrics.items()}}
