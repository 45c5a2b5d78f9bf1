"""The store's tables as data: their folder names, their Parquet schemas (every file of a table
carries the full current schema, so a folder reads as one table), the columns that describe a
trial's configuration, and how a stored row's fields read back (``stored_size``,
``ran_on_subset``).

Layout under a results folder::

    trials/<trial_id>.parquet   one row: every TrialConfig field, final dev metrics, timings,
                                device, library versions, status ("ok" or "error") and error
    epochs/<trial_id>.parquet   one row per finished epoch: losses, dev metrics, timings
    similarity/<trial_id>.parquet   with --similarity: one row per layer comparing the finetuned
                                model with its pre-finetuning state (``SIMILARITY_SCHEMA``)
    steps/<trial_id>.parquet    with --log-every N: the training loss of every N-th step
    pairs/<pair_id>.parquet     ``reinit-tune consistency``: one row per layer comparing two
                                finetuned models (two seeds, or two tasks; 002 §5)

``resumed_from_epoch`` says whether a trial's last attempt resumed from a checkpoint (the
epoch it continued after) or started fresh (0).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pyarrow as pa

from reinit_tune.config import TrialConfig
from reinit_tune.outcome import EPOCH_TABLE, PAYLOADS, TRIAL_VALUE, EpochRecord, TrialOutcome
from reinit_tune.tasks import ALL_METRICS

TRIALS = "trials"
EPOCHS = "epochs"
SIMILARITY = "similarity"
STEPS = "steps"
PAIRS = "pairs"

# Arrow type per TrialConfig, TrialOutcome and EpochRecord annotation. A new field with a
# new annotation must be added here; the KeyError at import time says so.
_ANNOTATION_TYPES: dict[str, pa.DataType] = {
    "str": pa.string(),
    "str | None": pa.string(),
    "int": pa.int64(),
    "int | None": pa.int64(),
    "float": pa.float64(),
    "float | None": pa.float64(),
    "bool": pa.bool_(),
    "bool | None": pa.bool_(),
    "tuple[int, ...]": pa.list_(pa.int64()),
    "tuple[int, ...] | None": pa.list_(pa.int64()),
    "tuple[tuple[int, int], ...]": pa.list_(pa.list_(pa.int64())),
}

# ``train_size`` is a count (int64); a fraction of the split goes to ``train_fraction`` and
# "the full split" leaves both null. ``config_json`` keeps the value exactly as configured.
def _config_fields() -> tuple[pa.Field, ...]:
    fields = []
    for f in dataclasses.fields(TrialConfig):
        if f.name == "train_size":
            fields += [pa.field("train_size", pa.int64()),
                       pa.field("train_fraction", pa.float64())]
        else:
            fields.append(pa.field(f.name, _ANNOTATION_TYPES[str(f.type)]))
    return tuple(fields)


CONFIG_FIELDS = _config_fields()

# Columns the store itself fills in: what a trial's outcome does not know.
_STORE_COLUMNS: dict[str, pa.DataType] = {
    "trial_id": pa.string(),
    "experiment": pa.string(),
    "task": pa.string(),
    "status": pa.string(),  # "ok" or "error" (``Status.stored``)
    "config_json": pa.string(),
    "num_pretrained_layers": pa.int64(),
    "metric": pa.string(),
    "epochs_completed": pa.int64(),
    "total_time_s": pa.float64(),
    "train_examples_per_s": pa.float64(),  # over all epochs
    "attempts": pa.int64(),
    # The reinit-tune source the driver ran: commit hash, and whether the work tree had
    # uncommitted changes (None outside a git checkout, e.g. an installed wheel).
    "git_commit": pa.string(),
    "git_dirty": pa.bool_(),
    "finished_at": pa.timestamp("us", tz="UTC"),
    # this row is another family's stored run of the same configuration (the runs of a
    # config differ only in their experiment name): that trial's id
    "reused_from": pa.string(),
}

# Where the columns stand in a file, as every version since 0.1 wrote them: a column of a
# field added to the outcome since goes after these.
_TRIAL_ORDER = (
    "trial_id", "status", "error", *(f.name for f in CONFIG_FIELDS), "config_json",
    "num_layers", "num_pretrained_layers", "metric", "score",
    *(f"eval_{m}" for m in ALL_METRICS), "eval_loss", "train_loss", "epochs_completed",
    "train_examples", "setup_time_s", "train_time_s", "eval_time_s", "total_time_s",
    "train_examples_per_s", "device", "precision_used", "node_id", "hostname", "attempts",
    "resumed_from_epoch", "versions", "git_commit", "git_dirty", "finished_at",
    "majority_score", "chance_score", "reused_from", "data_subset", "data_fingerprint",
    "data_source", "model_fingerprint", "gpu_memory_start_bytes", "gpu_memory_peak_bytes",
    "worker_pid", "pack_size", "pack_history",
)
_EPOCH_ORDER = (
    "trial_id", "experiment", "task", "epoch", "train_loss", "eval_loss", "metric", "score",
    *(f"eval_{m}" for m in ALL_METRICS), "train_time_s", "eval_time_s", "train_examples_per_s",
)


def _ordered(order: tuple[str, ...], types: dict[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(n, types[n]) for n in (*order, *(n for n in types
                                                                if n not in order))])


def _outcome_types(fields, *, table: str) -> dict[str, pa.DataType]:
    types = {}
    for f in fields:
        if f.name in PAYLOADS:
            continue
        if table == "trials" and f.metadata.get(TRIAL_VALUE, "last") is None:
            continue
        if table == "epochs" and not f.metadata.get(EPOCH_TABLE, True):
            continue
        types[f.name] = _ANNOTATION_TYPES[str(f.type)]
    return types


def trial_schema(outcome: type = TrialOutcome, record: type = EpochRecord) -> pa.Schema:
    """The trial table's schema: the config's columns, the store's own, and one per scalar
    field of ``outcome`` and of ``record`` (those the trial table takes from its epochs)."""
    metrics = {f"eval_{m}": pa.float64() for m in ALL_METRICS}
    return _ordered(_TRIAL_ORDER, {
        **{f.name: f.type for f in CONFIG_FIELDS}, **_STORE_COLUMNS, **metrics,
        **_outcome_types(dataclasses.fields(record), table="trials"),
        **_outcome_types(dataclasses.fields(outcome), table="trials")})


def epoch_schema(record: type = EpochRecord) -> pa.Schema:
    """The epoch table's schema: which trial, and one column per scalar field of ``record``
    the epoch table stores."""
    metrics = {f"eval_{m}": pa.float64() for m in ALL_METRICS}
    which = {n: _STORE_COLUMNS[n] for n in ("trial_id", "experiment", "task", "metric")}
    return _ordered(_EPOCH_ORDER, {
        **which, **metrics, **_outcome_types(dataclasses.fields(record), table="epochs")})


TRIAL_SCHEMA = trial_schema()
EPOCH_SCHEMA = epoch_schema()


# The six linear projections of a BERT layer (reinit_tune.similarity.layers maps module names).
WEIGHT_PROJECTIONS = ("query", "key", "value", "attention_output", "intermediate", "output")

SIMILARITY_SCHEMA = pa.schema(
    [
        pa.field("trial_id", pa.string()),
        pa.field("layer", pa.int64()),  # 0 = embedding output, l = output of encoder layer l
        pa.field("examples", pa.int64()),  # dev examples compared
        pa.field("samples", pa.int64()),  # non-padding tokens: the samples of SVCCA and CKA
        pa.field("svcca_distance", pa.float64()),
        pa.field("svcca_dims_a", pa.int64()),
        pa.field("svcca_dims_b", pa.int64()),
        pa.field("cka", pa.float64()),
        pa.field("attention_js", pa.float64()),  # null for layer 0
        *(pa.field(f"w_{p}_{norm}", pa.float64())
          for p in WEIGHT_PROJECTIONS for norm in ("fro", "spectral")),
        pa.field("replaced_svcca", pa.float64()),  # 002 §4 layer replacement, when asked
        pa.field("note", pa.string()),  # why a measure is null (e.g. too few samples)
        # 000 §4.5 as the authors' code computes it: the spectral norm of output.dense's
        # weights minus those of the pretrained checkpoint (not the trial's starting point)
        pa.field("w_output_spectral_pretrained", pa.float64()),
    ]
)


STEP_SCHEMA = pa.schema(
    [
        pa.field("trial_id", pa.string()),
        pa.field("epoch", pa.int64()),
        pa.field("step", pa.int64()),  # optimizer steps taken, counted over the whole trial
        pa.field("train_loss", pa.float64()),  # the loss of that step's batch
        pa.field("lr", pa.float64()),  # the learning rate that step used
    ]
)


# One row per layer comparing two finetuned models of the store (``reinit-tune consistency``):
# the measures of the similarity table, and which two trials and why.
PAIR_SCHEMA = pa.schema(
    [
        pa.field("pair_id", pa.string()),
        pa.field("kind", pa.string()),  # "seeds" (same config, two seeds) or "tasks"
        pa.field("experiment", pa.string()),
        pa.field("trial_a", pa.string()),
        pa.field("trial_b", pa.string()),
        pa.field("task_a", pa.string()),
        pa.field("task_b", pa.string()),
        pa.field("seed_a", pa.int64()),
        pa.field("seed_b", pa.int64()),
        *(f for f in SIMILARITY_SCHEMA if f.name not in ("trial_id", "replaced_svcca",
                                                         "w_output_spectral_pretrained")),
    ]
)


def stored_size(row) -> float | None:
    """A stored trial's train size as configured: its ``train_fraction`` (a share of the
    split), else its ``train_size`` (a count), else None (the full split). Rows written
    before the fraction had its own column keep both in ``train_size``."""
    fraction = row.get("train_fraction")
    if fraction is not None and not (isinstance(fraction, float) and math.isnan(fraction)):
        return float(fraction)
    size = row.get("train_size")
    return None if size is None or (isinstance(size, float) and math.isnan(size)) else size


def config_columns(config: TrialConfig, num_layers: int) -> dict[str, Any]:
    """The row fields that describe a trial's configuration on a model of ``num_layers``."""
    size = config.train_size
    return {
        "trial_id": config.trial_id,
        **config.to_dict(),
        "train_size": size if isinstance(size, int) else None,
        "train_fraction": size if isinstance(size, float) else None,
        "config_json": json.dumps(config.to_dict(), sort_keys=True),
        "num_layers": num_layers,
        "num_pretrained_layers": config.pretrained_layers(num_layers),
        "metric": config.task_spec.primary,
    }


# Per-trial payloads that most readers never look at: read only when asked for by name.
PAYLOAD_COLUMNS = ("config_json", "versions")


def trial_columns(payload: bool = False) -> list[str]:
    """The trial table's columns, without the large per-trial payloads (``PAYLOAD_COLUMNS``)
    unless ``payload``: ``load_trials(results, columns=trial_columns())`` for analysis."""
    return [c for c in TRIAL_SCHEMA.names if payload or c not in PAYLOAD_COLUMNS]


def ran_on_subset(row: Any) -> bool:
    """Whether a stored trial row trained on fewer examples than its size asks of the official
    split (its train file was a subset; ``--allow-subset``). Rows of stores written before
    the ``data_subset`` column existed say False. ``row``: a mapping or a pandas row."""
    value = row.get("data_subset") if hasattr(row, "get") else None
    return value is not None and not (isinstance(value, float) and math.isnan(value)) \
        and bool(value)
