"""A finished trial's rows and writing them: its one trial row (config, last epoch's metrics,
summed timings, status), its epoch rows and step rows, built field by field from its
``TrialOutcome`` (or from flat per-epoch reports, through ``TrialOutcome.from_reports``), and
``write_trial``, which stores them so that a trial file always has its epoch file beside
it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from reinit_tune.config import TrialConfig
from reinit_tune.outcome import Status, TrialOutcome, epoch_columns, epoch_totals
from reinit_tune.store.schema import config_columns
from reinit_tune.store.tables import EPOCH_TABLE, TRIAL_TABLE


def write_trial(results_dir: str | os.PathLike, row: dict[str, Any], epochs: list[dict]) -> Path:
    """Store one trial (replacing an earlier attempt of the same config). Epochs go first,
    so a trial file always has its epoch file beside it."""
    trial_id = row["trial_id"]
    if epochs:
        EPOCH_TABLE.write(results_dir, trial_id, epochs)
    path = TRIAL_TABLE.path(results_dir, trial_id)
    try:
        TRIAL_TABLE.write(results_dir, trial_id, [row])
    except BaseException:
        if epochs and not path.exists():  # no epoch rows without their trial row
            EPOCH_TABLE.path(results_dir, trial_id).unlink(missing_ok=True)
        raise
    return path


def outcome_rows(config: TrialConfig, outcome: TrialOutcome, *, num_layers: int,
                 **extra: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The trial row and epoch rows of ``outcome``, field by field: the config's columns, the
    status, error and ``extra`` (e.g. ``attempts``, the source's commit), and, once it
    finished an epoch, its trial-level fields, its last epoch's values and summed timings.
    ``num_layers``: the model's depth where the outcome does not know it (no epoch ran)."""
    epochs = sorted(outcome.epochs, key=lambda e: e.epoch)
    if epochs and outcome.num_layers is not None:
        num_layers = outcome.num_layers
    row: dict[str, Any] = {**config_columns(config, num_layers),
                           "status": outcome.status.stored, "error": outcome.error, **extra}
    row["finished_at"] = pd.Timestamp.now(tz="UTC")
    row["epochs_completed"] = len(epochs)
    base = {"trial_id": config.trial_id, "experiment": config.experiment,
            "task": config.task, "metric": config.task_spec.primary}
    epoch_rows = [{**epoch_columns(e), **base} for e in epochs]
    if not epochs:
        return row, epoch_rows
    # a field the worker left unset keeps what the config or ``extra`` say
    row.update({k: v for k, v in outcome.static().items() if v is not None})
    row.update(epoch_totals(epochs))
    row["total_time_s"] = row["setup_time_s"] + row["train_time_s"] + row["eval_time_s"]
    row["train_examples_per_s"] = row["train_examples"] * len(epochs) / row["train_time_s"]
    return row, epoch_rows


def outcome_steps(outcome: TrialOutcome) -> list[dict[str, Any]]:
    """Store rows for the per-step losses of ``outcome``'s epochs (the ``steps`` table)."""
    return [{"trial_id": outcome.trial_id, "epoch": e.epoch, "step": step,
             "train_loss": loss, "lr": lr}
            for e in sorted(outcome.epochs, key=lambda e: e.epoch) for step, loss, lr in e.steps]


def trial_row(config: TrialConfig, reports: list[dict[str, Any]], *, num_layers: int,
              status: str, error: str | None = None, **extra: Any) -> dict[str, Any]:
    """The one store row of a trial from its flat per-epoch reports
    (``TrialOutcome.reports``): config, last epoch's metrics, summed timings, status."""
    outcome = TrialOutcome.from_reports(
        config.trial_id, reports, status=Status.OK if status == "ok" else Status.FAILED,
        error=error)
    return outcome_rows(config, outcome, num_layers=num_layers, **extra)[0]


def epoch_rows(config: TrialConfig, reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Store rows for a trial's flat per-epoch reports (``TrialOutcome.reports``)."""
    outcome = TrialOutcome.from_reports(config.trial_id, reports)
    return outcome_rows(config, outcome, num_layers=0)[1]


def step_rows(trial_id: str, reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Store rows for the per-step losses flat epoch reports carry (``steps``)."""
    return outcome_steps(TrialOutcome.from_reports(trial_id, reports))
