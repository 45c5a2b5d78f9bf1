"""The results store: one Parquet file per trial, plus one per trial for its epochs.

Layout under a results folder::

    trials/<trial_id>.parquet   one row: every TrialConfig field, final dev metrics, timings,
                                device, library versions, status ("ok" or "error") and error
    epochs/<trial_id>.parquet   one row per finished epoch: losses, dev metrics, timings
    similarity/<trial_id>.parquet   with --similarity: one row per layer comparing the finetuned
                                model with its pre-finetuning state (``SIMILARITY_SCHEMA``)
    steps/<trial_id>.parquet    with --log-every N: the training loss of every N-th step
    pairs/<pair_id>.parquet     ``reinit-tune consistency``: one row per layer comparing two
                                finetuned models (two seeds, or two tasks; 002 §5)

Files are written to a hidden temporary name and renamed into place, so readers (pandas,
pyarrow, DuckDB: ``SELECT * FROM 'results/trials/*.parquet'``) never see half a file and a
crash never damages earlier rows (a killed writer leaves only a hidden ``.*.tmp`` file, which
readers skip and ``remove_partial_files`` deletes). Every file of a table has the same
explicit schema, so a folder reads as one table while a sweep is still writing it.
``resumed_from_epoch`` says whether a trial's last attempt resumed from a checkpoint (the
epoch it continued after) or started fresh (0).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from reinit_tune.config import TrialConfig
from reinit_tune.tasks import ALL_METRICS

log = logging.getLogger("reinit_tune")

TRIALS = "trials"
EPOCHS = "epochs"
SIMILARITY = "similarity"
STEPS = "steps"
PAIRS = "pairs"

# Arrow type per TrialConfig annotation. A new field with a new annotation must be added
# here; the KeyError at import time says so.
_ANNOTATION_TYPES: dict[str, pa.DataType] = {
    "str": pa.string(),
    "str | None": pa.string(),
    "int": pa.int64(),
    "int | None": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
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

_METRIC_FIELDS = tuple(pa.field(f"eval_{m}", pa.float64()) for m in ALL_METRICS)

TRIAL_SCHEMA = pa.schema(
    [
        pa.field("trial_id", pa.string()),
        pa.field("status", pa.string()),
        pa.field("error", pa.string()),
        *CONFIG_FIELDS,
        pa.field("config_json", pa.string()),
        pa.field("num_layers", pa.int64()),
        pa.field("num_pretrained_layers", pa.int64()),
        pa.field("metric", pa.string()),
        pa.field("score", pa.float64()),
        *_METRIC_FIELDS,
        pa.field("eval_loss", pa.float64()),
        pa.field("train_loss", pa.float64()),
        pa.field("epochs_completed", pa.int64()),
        pa.field("train_examples", pa.int64()),
        pa.field("setup_time_s", pa.float64()),
        pa.field("train_time_s", pa.float64()),
        pa.field("eval_time_s", pa.float64()),
        pa.field("total_time_s", pa.float64()),
        pa.field("train_examples_per_s", pa.float64()),
        pa.field("device", pa.string()),
        pa.field("precision_used", pa.string()),
        pa.field("node_id", pa.string()),
        pa.field("hostname", pa.string()),
        pa.field("attempts", pa.int64()),
        pa.field("resumed_from_epoch", pa.int64()),
        pa.field("versions", pa.string()),
        # The reinit-tune source the driver ran: commit hash, and whether the work tree had
        # uncommitted changes (None outside a git checkout, e.g. an installed wheel).
        pa.field("git_commit", pa.string()),
        pa.field("git_dirty", pa.bool_()),
        pa.field("finished_at", pa.timestamp("us", tz="UTC")),
        # the primary metric without learning, on the dev labels (reinit_tune.metrics.
        # reference_scores): every example the majority class, and uniform random guessing
        pa.field("majority_score", pa.float64()),
        pa.field("chance_score", pa.float64()),
        # this row is another family's stored run of the same configuration (the runs of a
        # config differ only in their experiment name): that trial's id
        pa.field("reused_from", pa.string()),
        # what data the trial saw: whether its train file, a subset of the official split,
        # held fewer examples than its size asks of the official split (run with
        # --allow-subset; null in older stores reads as False, see ``ran_on_subset``), a
        # fingerprint of its train and dev files' contents (``data.data_identity``; null in
        # older stores: unknown, never a mismatch) and where they were
        pa.field("data_subset", pa.bool_()),
        pa.field("data_fingerprint", pa.string()),
        pa.field("data_source", pa.string()),
    ]
)

EPOCH_SCHEMA = pa.schema(
    [
        pa.field("trial_id", pa.string()),
        pa.field("experiment", pa.string()),
        pa.field("task", pa.string()),
        pa.field("epoch", pa.int64()),
        pa.field("train_loss", pa.float64()),
        pa.field("eval_loss", pa.float64()),
        pa.field("metric", pa.string()),
        pa.field("score", pa.float64()),
        *_METRIC_FIELDS,
        pa.field("train_time_s", pa.float64()),
        pa.field("eval_time_s", pa.float64()),
        pa.field("train_examples_per_s", pa.float64()),
    ]
)


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


def _write_atomic(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # A leading dot hides the partial file from pyarrow/pandas folder reads and from
    # DuckDB's '*.parquet' glob; os.replace is atomic within one filesystem.
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def remove_partial_files(results_dir: str | os.PathLike, older_than_s: float = 3600) -> int:
    """Delete temporary files left by writers that were killed mid-write; return how many.

    Only old ones: a younger one may belong to another sweep writing to the same store."""
    cutoff = time.time() - older_than_s
    removed = 0
    for folder in (Path(results_dir) / name
                   for name in (TRIALS, EPOCHS, SIMILARITY, STEPS, PAIRS)):
        for tmp in folder.glob(".*.tmp") if folder.is_dir() else ():
            with contextlib.suppress(FileNotFoundError):
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
                    removed += 1
    return removed


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)


def write_trial(results_dir: str | os.PathLike, row: dict[str, Any], epochs: list[dict]) -> Path:
    """Store one trial (replacing an earlier attempt of the same config). Epochs go first,
    so a trial file always has its epoch file beside it."""
    root = Path(results_dir)
    trial_id = row["trial_id"]
    epoch_file = root / EPOCHS / f"{trial_id}.parquet"
    if epochs:
        _write_atomic(_table(epochs, EPOCH_SCHEMA), epoch_file)
    path = root / TRIALS / f"{trial_id}.parquet"
    try:
        _write_atomic(_table([row], TRIAL_SCHEMA), path)
    except BaseException:
        if epochs and not path.exists():  # no epoch rows without their trial row
            epoch_file.unlink(missing_ok=True)
        raise
    return path


def equivalence_key(config: TrialConfig) -> str:
    """What two configs that differ only in their experiment name share: they compute the
    same numbers, so a stored run of one serves the other."""
    identity = config.identity()
    identity.pop("experiment")
    return json.dumps(identity, sort_keys=True)


def equivalent_ids(results_dir: str | os.PathLike) -> dict[str, str]:
    """``equivalence_key`` → id of a stored "ok" trial with that key (its own run, not a
    reuse)."""
    df = load_trials(results_dir, status="ok",
                     columns=["trial_id", "config_json", "reused_from"])
    found = {}
    known = {f.name for f in dataclasses.fields(TrialConfig)}
    for trial_id, blob, reused in zip(df["trial_id"], df["config_json"], df["reused_from"],
                                      strict=True):
        if isinstance(reused, str):
            continue
        try:
            config = TrialConfig.from_dict({k: v for k, v in json.loads(blob).items()
                                            if k in known})
        except (ValueError, TypeError):
            continue
        found.setdefault(equivalence_key(config), trial_id)
    return found


def reuse_trial(results_dir: str | os.PathLike, source_id: str, config: TrialConfig) -> Path:
    """Store ``config`` as a copy of the stored trial ``source_id``, which ran the same
    configuration under another experiment name: its epochs, similarity and step rows too,
    under ``config``'s id and experiment, with ``reused_from`` naming the source."""
    root = Path(results_dir)
    trial_id = config.trial_id
    for table, schema in ((SIMILARITY, SIMILARITY_SCHEMA), (STEPS, STEP_SCHEMA)):
        if rows := _rows_of(root, table, source_id):  # a per-trial or a compacted file
            rows = [{**r, "trial_id": trial_id} for r in rows]
            _write_atomic(_table(rows, schema), root / table / f"{trial_id}.parquet")
    epochs = [{**r, "trial_id": trial_id, "experiment": config.experiment}
              for r in _rows_of(root, EPOCHS, source_id)]
    [row] = _rows_of(root, TRIALS, source_id)
    row.update(trial_id=trial_id, experiment=config.experiment, reused_from=source_id,
               config_json=json.dumps(config.to_dict(), sort_keys=True))
    return write_trial(root, row, epochs)


def _read(folder: Path, schema: pa.Schema, columns: list[str] | None = None) -> pd.DataFrame:
    # The current schema, not the first file's: rows written by an older version that lack a
    # newer column read as nulls instead of dropping the column (``_read_table``).
    name = next(n for n, (_, s) in _TABLES.items() if s is schema)
    return _read_table(folder, name, columns).to_pandas()


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A table written by an older version in ``schema``: missing columns as nulls, and a
    float ``train_size`` (counts and fractions in one column, before 0.3) split into the
    count and ``train_fraction``."""
    columns = {}
    if "train_size" in schema.names and "train_size" in table.column_names and \
            pa.types.is_floating(table.schema.field("train_size").type):
        sizes = table["train_size"].to_pylist()
        columns["train_size"] = pa.array([None if v is None or v != v or v < 1 else int(v)
                                          for v in sizes], pa.int64())
        columns["train_fraction"] = pa.array([v if v is not None and 0 < v < 1 else None
                                              for v in sizes], pa.float64())
    arrays = []
    for field in schema:
        if field.name in columns:
            arrays.append(columns[field.name])
        elif field.name in table.column_names:
            arrays.append(table[field.name].cast(field.type))
        else:
            arrays.append(pa.nulls(len(table), field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _read_one(path: Path, schema: pa.Schema) -> pa.Table | None:
    """One store file, or None (with a warning naming it) when it cannot be read: one damaged
    file must not hide every other result."""
    try:
        try:
            return ds.dataset(str(path), schema=schema, format="parquet").to_table()
        except pa.ArrowInvalid:  # written by an older version: convert what it holds
            return _conform(pq.read_table(path), schema)
    except (OSError, pa.ArrowException) as e:
        log.warning("skipping unreadable results file %s (%s: %s); delete or restore it",
                    path, type(e).__name__, str(e).splitlines()[0][:200])
        return None


def unreadable_files(results_dir: str | os.PathLike) -> list[Path]:
    """Store files that cannot be read (a disk fault, a foreign file): what ``load_trials``
    and the other readers skip. One pass over the footers (``check_store`` reads rows too)."""
    bad: list[Path] = []
    con = _connect()
    for name, (key, _) in _TABLES.items():
        small, compacted = _listing(Path(results_dir) / name)
        files = small + compacted
        if not files:
            continue
        problems = _Problems()
        with contextlib.suppress(_Vanished):
            for group in _schema_groups(con, files, problems):
                if not _usable(pq.read_schema(group[0]), key, name):
                    problems.foreign += [Path(f) for f in group]
        bad += problems.unreadable + problems.foreign
    return sorted(bad)


def malformed_rows(results_dir: str | os.PathLike) -> list[tuple[Path, str, str]]:
    """Trial rows every reader skips as malformed: (file, trial id, why). Reads only the
    columns the checks need (``_malformed_mask``)."""
    problems = _Problems()
    _read_table(Path(results_dir) / TRIALS, TRIALS, ["trial_id"], problems)
    return problems.malformed


def ran_on_subset(row: Any) -> bool:
    """Whether a stored trial row trained on fewer examples than its size asks of the official
    split (its train file was a subset; ``--allow-subset``). Rows of stores written before
    the ``data_subset`` column existed say False. ``row``: a mapping or a pandas row."""
    value = row.get("data_subset") if hasattr(row, "get") else None
    return value is not None and not (isinstance(value, float) and math.isnan(value)) \
        and bool(value)


def load_trials(results_dir: str | os.PathLike, status: str | None = None,
                columns: list[str] | None = None) -> pd.DataFrame:
    """One row per finished trial (``status`` "ok" or "error"); filter with ``status=``.
    ``data_subset`` is a plain bool column (older stores' nulls read as False).

    ``columns``: only these (in this order), read only from disk; every column when None.
    ``trial_columns()`` names all but the large payloads (``config_json``, ``versions``),
    which analysis seldom needs and which dominate the table's memory."""
    wanted = None if columns is None else list(columns)
    read = wanted if wanted is None or status is None or "status" in wanted \
        else [*wanted, "status"]
    df = _read(Path(results_dir) / TRIALS, TRIAL_SCHEMA, read)
    if "data_subset" in df:
        df["data_subset"] = df["data_subset"].eq(True).astype(bool)
    if status is not None:
        df = df[df["status"] == status].reset_index(drop=True)
    return df if wanted is None else df[wanted]


def load_epochs(results_dir: str | os.PathLike,
                columns: list[str] | None = None) -> pd.DataFrame:
    """One row per (trial, epoch); join to ``load_trials`` on ``trial_id``."""
    return _read(Path(results_dir) / EPOCHS, EPOCH_SCHEMA, columns)


def finished_ids(results_dir: str | os.PathLike) -> set[str]:
    """Ids of trials stored with status "ok", recomputed from their stored configs.

    Recomputing (instead of trusting the stored id) keeps resumption right across versions
    that add config fields: an old row gets the new fields' defaults, as a new config would.
    """
    return set(finished_data(results_dir))


def finished_data(results_dir: str | os.PathLike
                  ) -> dict[str, tuple[str | None, str | None, int | None]]:
    """Id of every trial stored "ok" (recomputed as ``finished_ids`` does) → its
    (``data_fingerprint``, ``data_source``, ``train_examples``); None where the row predates
    them. A trial whose epoch rows are unreadable is not finished (``_finished_rows``)."""
    df = _finished_rows(results_dir)
    known = {f.name for f in dataclasses.fields(TrialConfig)}
    found: dict[str, tuple[str | None, str | None, int | None]] = {}
    for stored_id, blob, fingerprint, source, examples in zip(
            df["trial_id"], df["config_json"], df["data_fingerprint"], df["data_source"],
            df["train_examples"], strict=True):
        try:
            data = json.loads(blob)
            trial_id = TrialConfig.from_dict({k: v for k, v in data.items()
                                              if k in known}).trial_id
        except (ValueError, TypeError):  # a row no config of this version describes
            trial_id = stored_id
        found[trial_id] = (fingerprint if isinstance(fingerprint, str) else None,
                           source if isinstance(source, str) else None,
                           None if pd.isna(examples) else int(examples))
    return found


def epoch_rows(config: TrialConfig, reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Store rows for a trial's per-epoch reports (``reinit_tune.trial.epoch_report``)."""
    base = {"trial_id": config.trial_id, "experiment": config.experiment, "task": config.task,
            "metric": config.task_spec.primary}
    # ``base`` last: Tune adds its own "trial_id" to every reported result.
    return [{**r, **base} for r in sorted(reports, key=lambda r: r["epoch"])]


def trial_row(
    config: TrialConfig,
    reports: list[dict[str, Any]],
    *,
    num_layers: int,
    status: str,
    error: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The one store row of a trial: config, last epoch's metrics, summed timings, status.
    ``num_layers`` is the model's depth (what the trial loaded, else what pre-flight read)."""
    row: dict[str, Any] = {**config_columns(config, num_layers), "status": status,
                           "error": error, **extra}
    row["finished_at"] = pd.Timestamp.now(tz="UTC")
    row["epochs_completed"] = len(reports)
    if not reports:
        return row
    reports = sorted(reports, key=lambda r: r["epoch"])
    last = reports[-1]
    for key in ("train_loss", "eval_loss", "score", "train_examples", "setup_time_s",
                "device", "precision_used", "node_id", "hostname", "versions",
                "resumed_from_epoch", "majority_score", "chance_score", "data_subset",
                "data_fingerprint", "data_source",
                *(f"eval_{m}" for m in ALL_METRICS)):
        if key in last:
            row[key] = last[key]
    row["train_time_s"] = sum(r["train_time_s"] for r in reports)
    row["eval_time_s"] = sum(r["eval_time_s"] for r in reports)
    row["total_time_s"] = row["setup_time_s"] + row["train_time_s"] + row["eval_time_s"]
    row["train_examples_per_s"] = row["train_examples"] * len(reports) / row["train_time_s"]
    return row


def step_rows(trial_id: str, reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Store rows for the per-step losses a trial's epoch reports carry (``steps``)."""
    return [{"trial_id": trial_id, "epoch": r["epoch"], "step": step, "train_loss": loss,
             "lr": lr}
            for r in sorted(reports, key=lambda r: r["epoch"]) if r.get("steps")
            for step, loss, lr in json.loads(r["steps"])]


def write_steps(results_dir: str | os.PathLike, trial_id: str, rows: list[dict]) -> Path:
    """Store a trial's per-step losses (written before its trial row)."""
    path = Path(results_dir) / STEPS / f"{trial_id}.parquet"
    _write_atomic(_table(rows, STEP_SCHEMA), path)
    return path


def load_steps(results_dir: str | os.PathLike,
               columns: list[str] | None = None) -> pd.DataFrame:
    """One row per (trial, logged step); join to ``load_trials`` on ``trial_id``."""
    return _read(Path(results_dir) / STEPS, STEP_SCHEMA, columns)


def _write_keyed(results_dir: str | os.PathLike, table: str, key: str, value: str,
                 rows: list[dict], schema: pa.Schema) -> Path:
    """Rows of one trial (or pair) into ``table/<value>.parquet``, each tagged ``key=value``."""
    path = Path(results_dir) / table / f"{value}.parquet"
    _write_atomic(_table([{**r, key: value} for r in rows], schema), path)
    return path


def _stored_ids(results_dir: str | os.PathLike, table: str) -> set[str]:
    # per-trial files by name (no need to open them), compacted ones by their key column
    folder = Path(results_dir) / table
    small, _ = _listing(folder)
    return {Path(p).stem for p in small} | _compacted_keys(folder, _TABLES[table][0])


def write_pairs(results_dir: str | os.PathLike, pair_id: str, rows: list[dict]) -> Path:
    """Store the per-layer comparison of two trials' models."""
    return _write_keyed(results_dir, PAIRS, "pair_id", pair_id, rows, PAIR_SCHEMA)


def load_pairs(results_dir: str | os.PathLike,
               columns: list[str] | None = None) -> pd.DataFrame:
    """One row per (pair of trials, layer)."""
    return _read(Path(results_dir) / PAIRS, PAIR_SCHEMA, columns)


def pair_ids(results_dir: str | os.PathLike) -> set[str]:
    return _stored_ids(results_dir, PAIRS)


def write_similarity(results_dir: str | os.PathLike, trial_id: str, rows: list[dict]) -> Path:
    """Store a trial's per-layer similarity rows (written before its trial row)."""
    return _write_keyed(results_dir, SIMILARITY, "trial_id", trial_id, rows, SIMILARITY_SCHEMA)


def load_similarity(results_dir: str | os.PathLike,
                    columns: list[str] | None = None) -> pd.DataFrame:
    """One row per (trial, layer); join to ``load_trials`` on ``trial_id``."""
    return _read(Path(results_dir) / SIMILARITY, SIMILARITY_SCHEMA, columns)


def similarity_ids(results_dir: str | os.PathLike) -> set[str]:
    return _stored_ids(results_dir, SIMILARITY)


# -- reading at any size, checking, compaction -------------------------------------------
# Reading goes through DuckDB (already a dependency for the README's SQL): over per-trial
# files it reads footers and rows about twice as fast as pyarrow.dataset and four times as
# fast as a loop of pq.read_table (measured over 1,000 files; benchmarks/RESULTS.md, "the
# store at scale"), reading only the columns asked for. The usual store, whose files all
# have the current schema, is read with one ``read_parquet`` call per batch of files; a batch
# that DuckDB refuses (an older version's files lack a column, a damaged or foreign file) is
# grouped by schema (one ``parquet_schema`` pass over its footers) and each group read the
# same way, then conformed (``_conform``): older files keep loading, other programs' files
# are skipped with a warning naming them, damaged ones found by bisection (``_bisect``).
# Per-trial files are the write-ahead format; ``compact`` merges them into a few large files,
# which read in a fraction of a second whatever their row count.

COMPACTED_PREFIX = "compacted-"
# Per-trial payloads that most readers never look at: read only when asked for by name.
PAYLOAD_COLUMNS = ("config_json", "versions")
_TABLES = {TRIALS: ("trial_id", TRIAL_SCHEMA), EPOCHS: ("trial_id", EPOCH_SCHEMA),
           SIMILARITY: ("trial_id", SIMILARITY_SCHEMA), STEPS: ("trial_id", STEP_SCHEMA),
           PAIRS: ("pair_id", PAIR_SCHEMA)}
_FILENAME = "__store_file"
_BATCH_FILES = 5000


class _Vanished(Exception):
    """A file listed for reading is gone: a compaction merged it meanwhile; list again."""


@dataclasses.dataclass
class _Problems:
    """What a read skipped, for warnings and ``check_store``."""

    unreadable: list[Path] = dataclasses.field(default_factory=list)
    foreign: list[Path] = dataclasses.field(default_factory=list)
    malformed: list[tuple[Path, str, str]] = dataclasses.field(default_factory=list)


def _listing(folder: Path) -> tuple[list[str], list[str]]:
    """The per-trial files and the compacted files of a table folder (oldest first)."""
    if not folder.is_dir():
        return [], []
    small = sorted(e.path for e in os.scandir(folder) if e.name.endswith(".parquet")
                   and not e.name.startswith((".", COMPACTED_PREFIX)))
    # A second listing, taken after the first: a per-trial file missing from the first was
    # deleted by a compaction after it renamed its compacted file into place, so this one
    # sees that compacted file (``compact``).
    compacted = sorted(e.path for e in os.scandir(folder)
                       if e.name.startswith(COMPACTED_PREFIX) and e.name.endswith(".parquet"))
    return small, compacted


def _connect():
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    # One thread: over many small files DuckDB's worker threads each keep per-file buffers
    # (10,000 files: 1.2 GB peak with 2 threads, 0.3 GB with one) and gain no speed, the
    # cost being each footer's parse; a compacted file is read in well under a second.
    con.execute("SET threads = 1")
    return con


def _bisect(files: list[str], attempt, bad: list[Path]) -> list:
    """``attempt(files)`` over all files at once; where it fails, over halves, down to the
    single files that fail (appended to ``bad``): one damaged file costs a few extra passes,
    not a per-file loop over a healthy store."""
    import duckdb

    try:
        return [attempt(files)]
    except (duckdb.Error, pa.ArrowException, OSError):
        if any(not os.path.exists(f) for f in files):
            raise _Vanished from None
        if len(files) == 1:
            bad.append(Path(files[0]))
            return []
        mid = len(files) // 2
        return _bisect(files[:mid], attempt, bad) + _bisect(files[mid:], attempt, bad)


def _schema_groups(con, files: list[str], problems: _Problems) -> list[list[str]]:
    """``files`` grouped by identical schema; files whose footer cannot be read go to
    ``problems.unreadable``."""
    def signatures(chunk: list[str]) -> list[tuple[str, str]]:
        return con.sql(
            "SELECT file_name, string_agg(concat_ws('|', name, type, repetition_type, "
            "converted_type, logical_type, num_children), ';' ORDER BY "
            "concat_ws('|', name, type, repetition_type, converted_type, logical_type, "
            "num_children)) FROM parquet_schema($files) GROUP BY file_name",
            params={"files": chunk}).fetchall()

    groups: dict[str, list[str]] = {}
    for part in _bisect(files, signatures, problems.unreadable):
        for name, signature in part:
            groups.setdefault(signature, []).append(name)
    return list(groups.values())


def _usable(schema: pa.Schema, key: str, table: str) -> bool:
    """Whether files of ``schema`` are this store's table (of any version): the key (and a
    trial's status) as strings. Another program's Parquet file has other columns."""
    # every trial row since 0.1 has its config (what resumption recomputes ids from)
    required = (key, "status", "config_json") if table == TRIALS else (key,)
    return all(name in schema.names and pa.types.is_string(schema.field(name).type)
               for name in required)


def _malformed_mask(table: pa.Table, key: str, name: str) -> tuple[pa.Array, list[str]]:
    """Rows no reader can use (True in the mask), and why: no key (or status), a
    ``reinit_heads`` entry that is not a (layer, head) pair, ``versions`` that is not JSON."""
    import pyarrow.compute as pc

    n = len(table)
    reasons = [""] * n

    def flag(mask, why: str) -> None:
        for i in pc.indices_nonzero(mask.fill_null(True) if hasattr(mask, "fill_null")
                                    else mask).to_pylist():
            reasons[i] = reasons[i] or why

    flag(pc.is_null(table[key]), f"no {key}")
    if name == TRIALS:
        if "status" in table.column_names:
            flag(pc.invert(pc.is_in(table["status"], pa.array(["ok", "error"]))),
                 "status is neither 'ok' nor 'error'")
        if "reinit_heads" in table.column_names:
            heads = table["reinit_heads"].combine_chunks()
            if len(heads) and heads.null_count < len(heads):
                pairs = pc.list_flatten(heads)
                bad_pair = pc.invert(pc.equal(pc.list_value_length(pairs), 2).fill_null(False))
                if len(pairs):
                    rows = pc.list_parent_indices(heads).filter(bad_pair)
                    mask = pc.is_in(pa.array(range(n), pa.int64()), value_set=rows.cast(
                        pa.int64()))
                    flag(mask, "a reinit_heads entry is not a (layer, head) pair")
        if "versions" in table.column_names:
            bad_json = []
            for value in pc.unique(table["versions"]).to_pylist():
                if value is None:
                    continue
                try:
                    if not isinstance(json.loads(value), dict):
                        bad_json.append(value)
                except ValueError:
                    bad_json.append(value)
            if bad_json:
                flag(pc.is_in(table["versions"], pa.array(bad_json, pa.string())),
                     "versions is not a JSON object")
    return pa.array([bool(r) for r in reasons], pa.bool_()), reasons


def _read_files(con, files: list[str], name: str, columns: list[str],
                problems: _Problems) -> pa.Table:
    """The usable rows of ``files`` (one table folder), conformed to its schema's
    ``columns``, with the file each row came from in ``_FILENAME``."""
    import duckdb

    known_bad = len(problems.unreadable)
    if len(files) > _BATCH_FILES:
        # DuckDB keeps some state per file until its query ends (100,000 files in one query:
        # 1.6 GB peak); batches bound the peak at no cost in speed.
        return pa.concat_tables([_read_files(con, files[i:i + _BATCH_FILES], name, columns,
                                             problems)
                                 for i in range(0, len(files), _BATCH_FILES)])
    key, schema = _TABLES[name]
    wanted = list(dict.fromkeys([key, *(["status", "reinit_heads", "versions"]
                                        if name == TRIALS else []), *columns]))
    # The pre-0.3 float train_size held counts and fractions; its files lack
    # train_fraction, so asking for both sends them to the schema groups, where ``_conform``
    # splits it. Asking one read for train_size alone would let DuckDB cast an old 0.5 to
    # the current int column's 0.
    sizes = ("train_size", "train_fraction")
    if any(c in wanted for c in sizes):
        wanted += [c for c in sizes if c not in wanted]
    target = pa.schema([schema.field(c) for c in wanted]
                       + [pa.field(_FILENAME, pa.string())])
    def read(chunk: list[str], present: list[str]) -> pa.Table:
        select = ", ".join(f'"{c}"' for c in present)
        return con.sql(f"SELECT {select}, filename AS {_FILENAME} FROM "
                       "read_parquet($files, filename = true)",
                       params={"files": chunk}).to_arrow_table()

    tables = []
    try:
        # The usual store: every file has the current schema, and one read does it (DuckDB
        # refuses a file that lacks a column asked for, which sends the read to the groups).
        tables.append(_conform(read(files, wanted), target))
    except (duckdb.Error, pa.ArrowException):
        if any(not os.path.exists(f) for f in files):
            raise _Vanished from None
        groups = _schema_groups(con, files, problems)
    else:
        groups = []
    for group in groups:
        file_schema = pq.read_schema(group[0])
        if not _usable(file_schema, key, name):
            for f in group:
                log.warning("skipping %s: not a reinit-tune %s file (its columns: %s)", f,
                            name, ", ".join(file_schema.names[:8]))
            problems.foreign += [Path(f) for f in group]
            continue
        present = [c for c in wanted if c in file_schema.names]
        for part in _bisect(group, lambda chunk, present=present: read(chunk, present),
                            problems.unreadable):
            try:
                tables.append(_conform(part, target))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                problems.foreign += [Path(f) for f in dict.fromkeys(
                    part[_FILENAME].to_pylist())]
                log.warning("skipping %d %s files whose columns have other types (e.g. %s)",
                            len(part), name, part[_FILENAME][0])
    for path in problems.unreadable[known_bad:]:
        log.warning("skipping unreadable results file %s; delete or restore it", path)
    table = pa.concat_tables(tables) if tables else target.empty_table()
    mask, reasons = _malformed_mask(table, key, name)
    if mask.true_count:
        import pyarrow.compute as pc

        keys, origins = table[key].to_pylist(), table[_FILENAME].to_pylist()
        for i in pc.indices_nonzero(mask).to_pylist():
            problems.malformed.append((Path(origins[i]), keys[i], reasons[i]))
            log.warning("skipping malformed %s row %s in %s: %s", name, keys[i], origins[i],
                        reasons[i])
        table = table.filter(pc.invert(mask))
    return table


def _read_table(folder: Path, name: str, columns: list[str] | None = None,
                problems: _Problems | None = None) -> pa.Table:
    """Every usable row of a table folder exactly once, in key order: a per-trial file's
    rows win over a compacted file's rows of the same key (the per-trial file is either
    being compacted right now, or a later attempt written since), and a newer compacted file
    wins over an older one."""
    key, schema = _TABLES[name]
    if columns is None:
        columns = list(schema.names)
    unknown = [c for c in columns if c not in schema.names]
    if unknown:
        raise ValueError(f"no column {', '.join(unknown)} in the {name} table")
    con = _connect()
    for attempt in range(5):
        found = _Problems()
        try:
            small, compacted = _listing(folder)
            parts = [_read_files(con, small, name, columns, found)] if small else []
            for path in reversed(compacted):  # newest first
                parts.append(_read_files(con, [path], name, columns, found))
            break
        except _Vanished:
            if attempt == 4:
                raise
    if problems is not None:
        problems.unreadable += found.unreadable
        problems.foreign += found.foreign
        problems.malformed += found.malformed
    target = pa.schema([schema.field(c) for c in columns])
    if not parts:
        return target.empty_table()
    return _first_wins(parts, key).select(columns).cast(target)


def _first_wins(parts: list[pa.Table], key: str) -> pa.Table:
    """Every row of ``parts`` (in precedence order) whose key no earlier part holds, sorted
    by key (stable: a key's rows keep their order). Column-wise, whatever the number of
    parts: sort by (key, part), then keep the rows of each key's first part."""
    import pyarrow.compute as pc

    table = pa.concat_tables(parts)
    if len(parts) > 1 and len(table):
        rank = np.concatenate([np.full(len(p), i, np.int32) for i, p in enumerate(parts)])
        order = pc.sort_indices(pa.table({"k": table[key], "r": rank}),
                                sort_keys=[("k", "ascending"), ("r", "ascending")])
        table = table.take(order)
        keys = table[key].combine_chunks()
        ranks = rank[order.to_numpy()]
        starts = np.ones(len(table), bool)
        starts[1:] = pc.not_equal(keys[1:], keys[:-1]).to_numpy(zero_copy_only=False)
        group = np.cumsum(starts) - 1
        return table.filter(pa.array(ranks == ranks[starts][group]))
    return table.sort_by([(key, "ascending")])


def trial_columns(payload: bool = False) -> list[str]:
    """The trial table's columns, without the large per-trial payloads (``PAYLOAD_COLUMNS``)
    unless ``payload``: ``load_trials(results, columns=trial_columns())`` for analysis."""
    return [c for c in TRIAL_SCHEMA.names if payload or c not in PAYLOAD_COLUMNS]


def _compacted_keys(folder: Path, key: str) -> set[str]:
    _, compacted = _listing(folder)
    keys: set[str] = set()
    for path in compacted:
        with contextlib.suppress(OSError, pa.ArrowException):
            keys.update(pq.read_table(path, columns=[key])[key].to_pylist())
    return keys


# How far the clocks of two hosts sharing a store may disagree (``stored_rows``' filter).
CLOCK_SKEW_S = 300.0


def stored_rows(results_dir: str | os.PathLike, trial_id: str,
                written_after: float | None = None) -> list[dict[str, Any]]:
    """The stored trial rows of ``trial_id`` (one, or none), wherever they are: its own file
    or a compacted one. With ``written_after`` (a Unix time), compacted files made before
    then (less ``CLOCK_SKEW_S``) are not searched: they cannot hold a row written later, and
    searching each of them costs a scan of its trial ids on every call."""
    return _rows_of(Path(results_dir), TRIALS, trial_id, written_after)


def _compacted_at(path: str) -> float:
    """When a compacted file was made (Unix seconds), from the stamp in its name."""
    stamp = Path(path).name[len(COMPACTED_PREFIX):].split("-")[0]
    return int(stamp) / 1e9 if stamp.isdigit() else math.inf


def _rows_of(root: Path, name: str, value: str,
             written_after: float | None = None) -> list[dict[str, Any]]:
    """The stored rows of one trial (or pair) of a table, from its per-trial file or, once
    compacted, from the newest compacted file that holds it."""
    key, schema = _TABLES[name]
    path = root / name / f"{value}.parquet"
    if path.is_file():
        table = _read_one(path, schema)
        if table is not None or path.exists():
            return [] if table is None else table.to_pylist()
        # gone between the two looks: a compaction merged it; read it from there
    _, compacted = _listing(root / name)
    if written_after is not None:
        compacted = [f for f in compacted
                     if _compacted_at(f) >= written_after - CLOCK_SKEW_S]
    for f in reversed(compacted):
        with contextlib.suppress(OSError, pa.ArrowException):
            rows = ds.dataset(f, schema=schema, format="parquet").to_table(
                filter=ds.field(key) == value)
            if len(rows):
                return rows.to_pylist()
    return []


def _finished_rows(results_dir: str | os.PathLike) -> pd.DataFrame:
    """Trials stored "ok" whose epoch rows are readable. A trial that completed epochs but
    whose epoch file is unreadable (or holds malformed rows) is not finished: the next sweep
    reruns it and rewrites its epoch rows, instead of skipping it forever with them lost. A
    trial without any epoch file (none was written) still counts."""
    from concurrent.futures import ThreadPoolExecutor

    root = Path(results_dir)
    problems = _Problems()
    # The two reads overlap (DuckDB releases the GIL): over per-trial files each is one
    # footer parse per file, the epoch read the smaller one (benchmarks/RESULTS.md).
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(_read_table, root / EPOCHS, EPOCHS, ["trial_id"], problems)
        df = load_trials(root, status="ok", columns=[
            "trial_id", "config_json", "data_fingerprint", "data_source", "epochs_completed",
            "reused_from", "train_examples"])
        epochs = reading.result()
    broken = problems.unreadable + problems.foreign
    damaged = {p.stem for p in broken if not p.name.startswith(COMPACTED_PREFIX)}
    damaged |= {trial for _, trial, _ in problems.malformed if trial}
    compacted_damaged = any(p.name.startswith(COMPACTED_PREFIX) for p in broken)
    have = set(epochs["trial_id"].to_pylist())
    lost = (df["epochs_completed"].fillna(0).gt(0) & ~df["trial_id"].isin(have)
            & (df["trial_id"].isin(damaged) | compacted_damaged))
    if lost.any():
        log.warning("%d trials stored ok have unreadable epoch rows (e.g. %s): they count as "
                    "not finished and run again", int(lost.sum()),
                    df.loc[lost, "trial_id"].iloc[0])
    return df[~lost].reset_index(drop=True)


@dataclasses.dataclass
class StoreCheck:
    """What ``check_store`` found: files no reader can use, rows skipped as malformed,
    trials stored "ok" whose epoch rows are unreadable (the next sweep reruns them), and
    how many per-trial and compacted files each table has."""

    unreadable: list[Path]
    foreign: list[Path]
    malformed: list[tuple[Path, str, str]]
    lost_epochs: list[str]
    files: dict[str, tuple[int, int]]

    @property
    def clean(self) -> bool:
        return not (self.unreadable or self.foreign or self.malformed or self.lost_epochs)

    def __str__(self) -> str:
        lines = [f"{name}: {small} per-trial files, {compacted} compacted"
                 for name, (small, compacted) in self.files.items() if small or compacted]
        lines += [f"unreadable file (delete or restore it): {p}" for p in self.unreadable]
        lines += [f"not a reinit-tune file (move it elsewhere): {p}" for p in self.foreign]
        lines += [f"malformed row {key} in {p}: {why}" for p, key, why in self.malformed]
        lines += [f"trial {t} is stored ok but its epoch rows are unreadable: the next sweep "
                  "runs it again" for t in self.lost_epochs]
        lines.append("store is clean" if self.clean else "store has problems (above)")
        return "\n".join(lines)


def check_store(results_dir: str | os.PathLike) -> StoreCheck:
    """Read every table of the store as the readers do and report what they skip."""
    root = Path(results_dir)
    problems = _Problems()
    files = {}
    for name in _TABLES:
        small, compacted = _listing(root / name)
        files[name] = (len(small), len(compacted))
        key = _TABLES[name][0]
        _read_table(root / name, name, [key], problems)
    ok = set(load_trials(root, status="ok", columns=["trial_id"])["trial_id"])
    finished = set(_finished_rows(root)["trial_id"])
    return StoreCheck(problems.unreadable, problems.foreign, problems.malformed,
                      sorted(ok - finished), files)


@contextlib.contextmanager
def _compaction_lock(root: Path):
    """One compaction at a time per store (another one running: yield False)."""
    import fcntl

    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".compact.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _identity(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def small_file_count(results_dir: str | os.PathLike) -> int:
    """How many per-trial (not yet compacted) files the store's tables hold."""
    return sum(len(_listing(Path(results_dir) / name)[0]) for name in _TABLES)


def compact(results_dir: str | os.PathLike, tables: tuple[str, ...] = tuple(_TABLES), *,
            batch_files: int = 50_000, min_files: int = 2) -> dict[str, int]:
    """Merge each table's per-trial files into compacted files; return how many per-trial
    files each table merged.

    Per-trial files stay the write-ahead format: every sweep writes them, atomically, and
    compaction only folds them into ``compacted-<ns>-<id>.parquet`` files in the same folder
    with the table's full current schema (so ``SELECT ... FROM 'trials/*.parquet'``, pandas
    and pyarrow read a compacted store as before). Per batch of files, in this order:

    1. note each file's identity (inode, size, mtime), then read it (bad files are left in
       place, still reported by ``check_store``: merging must never lose a row);
    2. write the compacted file under a hidden temporary name, fsync, rename it into place;
    3. delete the merged per-trial files whose identity is unchanged (one rewritten since
       step 1, a later attempt of its trial, stays and wins).

    Readers resolve overlaps by key (``_read_table``): a per-trial file's rows win over
    compacted rows of the same trial, a newer compacted file over an older one. Between
    steps 2 and 3 both copies exist and readers see the per-trial one; after 3 the
    compacted one; a kill anywhere leaves either a hidden temporary file (skipped by
    readers, removed by ``remove_partial_files``) or rows in both places: nothing is lost
    and every row reads once. A reader whose listing raced a deletion lists again
    (``_listing``, ``_Vanished``). Only one compaction runs at a time (a lock file);
    another returns at once with nothing merged.

    Plain readers (DuckDB or pandas over ``trials/*.parquet``) apply no such rule: they see
    a trial twice while a compaction is between steps 2 and 3, and when a trial compacted
    earlier ran again (its new row, per-trial or compacted later, beside its old compacted
    one). ``load_trials`` resolves both; in SQL, keep each trial's latest row:
    ``QUALIFY row_number() OVER (PARTITION BY trial_id ORDER BY finished_at DESC) = 1``.
    """
    root = Path(results_dir)
    merged = dict.fromkeys(tables, 0)
    with _compaction_lock(root) as locked:
        if not locked:
            log.warning("another compaction of %s is running: skipped", root)
            return merged
        con = _connect()
        for name in tables:
            key, schema = _TABLES[name]
            small, _ = _listing(root / name)
            for start in range(0, len(small) if len(small) >= min_files else 0,
                               batch_files):
                batch = small[start:start + batch_files]
                stamp = time.time_ns()
                before = {f: _identity(f) for f in batch}
                problems = _Problems()
                try:
                    table = _read_files(con, batch, name, list(schema.names), problems)
                except _Vanished:  # another writer or compaction is at work: next time
                    continue
                bad = {str(p) for p in problems.unreadable + problems.foreign}
                bad |= {str(p) for p, _, _ in problems.malformed}
                if bad:
                    import pyarrow.compute as pc

                    table = table.filter(pc.invert(pc.is_in(
                        table[_FILENAME], value_set=pa.array(sorted(bad), pa.string()))))
                done = [f for f in batch if f not in bad and before[f] is not None]
                if not done:
                    continue
                table = table.select(schema.names).cast(schema).sort_by([(key, "ascending")])
                path = root / name / (f"{COMPACTED_PREFIX}{stamp:020d}-"
                                      f"{uuid.uuid4().hex[:8]}.parquet")
                _write_compacted(table, path)
                for f in done:
                    if _identity(f) == before[f]:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(f)
                merged[name] += len(done)
            _merge_compacted(con, root, name)
    return merged


# Past this many compacted files in a table, ``compact`` merges the newest of them (below).
MERGE_COMPACTED_AFTER = 8


def _merge_compacted(con, root: Path, name: str) -> int:
    """Merge a table's newest compacted files into one when it has more than
    ``MERGE_COMPACTED_AFTER``; return how many were merged.

    Every sweep past ``COMPACT_AFTER_FILES`` adds a compacted file; left alone, a store built
    by hundreds of sweeps would be read file by file and keep every superseded row of a rerun
    trial. The merged run is the newest files going back while the next older file is no
    larger than twice what the run holds (size tiers, as a log-structured store merges):
    files keep growing geometrically, so a table has about log2(rows) of them and no merge
    rewrites the whole store each time. The run is the newest, so the merged file, stamped
    now, takes its place in the precedence order (``_read_table``); within it a newer file's
    rows win (``_first_wins``), so readers see exactly what they saw before. A kill before
    the rename leaves a hidden temporary file; after it, rows in both the merged file and its
    sources, where the merged (newer) one wins with the same rows. A table with an unreadable,
    foreign or malformed compacted file is not merged: that file is left for ``check_store``
    to report, and no row of it may be shadowed or lost."""
    key, schema = _TABLES[name]
    _, compacted = _listing(root / name)
    if len(compacted) <= MERGE_COMPACTED_AFTER:
        return 0
    sizes = [os.path.getsize(f) for f in compacted]
    run = [len(compacted) - 1]  # positions, newest first
    while run[-1] > 0 and sizes[run[-1] - 1] <= 2 * sum(sizes[i] for i in run):
        run.append(run[-1] - 1)
    if len(run) < 2:
        return 0
    problems = _Problems()
    try:
        parts = [_read_files(con, [compacted[i]], name, list(schema.names), problems)
                 for i in run]
    except _Vanished:
        return 0
    if problems.unreadable or problems.foreign or problems.malformed:
        log.warning("not merging the compacted %s files of %s: some cannot be read whole "
                    "(reinit-tune store check names them)", name, root)
        return 0
    table = _first_wins(parts, key).select(schema.names).cast(schema)
    path = root / name / f"{COMPACTED_PREFIX}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
    _write_compacted(table, path)
    for i in run:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(compacted[i])
    log.info("merged %d compacted %s files of %s into %s", len(run), name, root, path.name)
    return len(run)


def _write_compacted(table: pa.Table, path: Path) -> None:
    # Durable before the per-trial files go: fsync the file, rename, fsync the folder.
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        pq.write_table(table, tmp, row_group_size=100_000)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Past this many per-trial files, the end of a sweep compacts the store: reading 2,000 small
# files costs about a second, a compacted store a tenth of that at any size.
COMPACT_AFTER_FILES = 2000


def compact_if_many(results_dir: str | os.PathLike,
                    threshold: int | None = None) -> dict[str, int] | None:
    """``compact`` the store when it holds more than ``threshold`` (``COMPACT_AFTER_FILES``)
    per-trial files; what it merged, or None when it was left as it is."""
    limit = COMPACT_AFTER_FILES if threshold is None else threshold
    if small_file_count(results_dir) <= limit:
        return None
    began = time.perf_counter()
    merged = compact(results_dir, min_files=1)
    log.info("compacted %d per-trial files of %s in %.1f s", sum(merged.values()),
             results_dir, time.perf_counter() - began)
    return merged
