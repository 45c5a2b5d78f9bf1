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
    df = load_trials(results_dir, status="ok")
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
        source = root / table / f"{source_id}.parquet"
        if source.is_file():
            rows = [{**r, "trial_id": trial_id} for r in _read_one(source, schema).to_pylist()]
            _write_atomic(_table(rows, schema), root / table / f"{trial_id}.parquet")
    epochs = []
    if (root / EPOCHS / f"{source_id}.parquet").is_file():
        epochs = [{**r, "trial_id": trial_id, "experiment": config.experiment}
                  for r in _read_one(root / EPOCHS / f"{source_id}.parquet",
                                     EPOCH_SCHEMA).to_pylist()]
    [row] = _read_one(root / TRIALS / f"{source_id}.parquet", TRIAL_SCHEMA).to_pylist()
    row.update(trial_id=trial_id, experiment=config.experiment, reused_from=source_id,
               config_json=json.dumps(config.to_dict(), sort_keys=True))
    return write_trial(root, row, epochs)


def _read(folder: Path, schema: pa.Schema) -> pd.DataFrame:
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not files:
        return schema.empty_table().to_pandas()
    # The current schema, not the first file's: rows written by an older version that lack a
    # newer column read as nulls instead of dropping the column.
    try:
        table = ds.dataset([str(f) for f in files], schema=schema, format="parquet").to_table()
    except (OSError, pa.ArrowException):
        table = pa.concat_tables([t for t in (_read_one(f, schema) for f in files)
                                  if t is not None] or [schema.empty_table()])
    return table.to_pandas()


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
    and the other readers skip."""
    bad = []
    for name in (TRIALS, EPOCHS, SIMILARITY, STEPS, PAIRS):
        folder = Path(results_dir) / name
        for path in sorted(folder.glob("*.parquet")) if folder.is_dir() else []:
            try:
                pq.read_schema(path)
            except (OSError, pa.ArrowException):
                bad.append(path)
    return bad


def ran_on_subset(row: Any) -> bool:
    """Whether a stored trial row trained on fewer examples than its size asks of the official
    split (its train file was a subset; ``--allow-subset``). Rows of stores written before
    the ``data_subset`` column existed say False. ``row``: a mapping or a pandas row."""
    value = row.get("data_subset") if hasattr(row, "get") else None
    return value is not None and not (isinstance(value, float) and math.isnan(value)) \
        and bool(value)


def load_trials(results_dir: str | os.PathLike, status: str | None = None) -> pd.DataFrame:
    """One row per finished trial (``status`` "ok" or "error"); filter with ``status=``.
    ``data_subset`` is a plain bool column (older stores' nulls read as False)."""
    df = _read(Path(results_dir) / TRIALS, TRIAL_SCHEMA)
    df["data_subset"] = df["data_subset"].eq(True).astype(bool)
    if status is not None:
        df = df[df["status"] == status].reset_index(drop=True)
    return df


def load_epochs(results_dir: str | os.PathLike) -> pd.DataFrame:
    """One row per (trial, epoch); join to ``load_trials`` on ``trial_id``."""
    return _read(Path(results_dir) / EPOCHS, EPOCH_SCHEMA)


def finished_ids(results_dir: str | os.PathLike) -> set[str]:
    """Ids of trials stored with status "ok", recomputed from their stored configs.

    Recomputing (instead of trusting the stored id) keeps resumption right across versions
    that add config fields: an old row gets the new fields' defaults, as a new config would.
    """
    return set(finished_data(results_dir))


def finished_data(results_dir: str | os.PathLike) -> dict[str, tuple[str | None, str | None]]:
    """Id of every trial stored "ok" (recomputed as ``finished_ids`` does) → its
    (``data_fingerprint``, ``data_source``); None where the row predates them."""
    df = load_trials(results_dir, status="ok")
    known = {f.name for f in dataclasses.fields(TrialConfig)}
    found: dict[str, tuple[str | None, str | None]] = {}
    for stored_id, blob, fingerprint, source in zip(
            df["trial_id"], df["config_json"], df["data_fingerprint"], df["data_source"],
            strict=True):
        try:
            data = json.loads(blob)
            trial_id = TrialConfig.from_dict({k: v for k, v in data.items()
                                              if k in known}).trial_id
        except (ValueError, TypeError):  # a row no config of this version describes
            trial_id = stored_id
        found[trial_id] = (fingerprint if isinstance(fingerprint, str) else None,
                           source if isinstance(source, str) else None)
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


def load_steps(results_dir: str | os.PathLike) -> pd.DataFrame:
    """One row per (trial, logged step); join to ``load_trials`` on ``trial_id``."""
    return _read(Path(results_dir) / STEPS, STEP_SCHEMA)


def _write_keyed(results_dir: str | os.PathLike, table: str, key: str, value: str,
                 rows: list[dict], schema: pa.Schema) -> Path:
    """Rows of one trial (or pair) into ``table/<value>.parquet``, each tagged ``key=value``."""
    path = Path(results_dir) / table / f"{value}.parquet"
    _write_atomic(_table([{**r, key: value} for r in rows], schema), path)
    return path


def _stored_ids(results_dir: str | os.PathLike, table: str) -> set[str]:
    folder = Path(results_dir) / table
    return {p.stem for p in folder.glob("*.parquet")} if folder.is_dir() else set()


def write_pairs(results_dir: str | os.PathLike, pair_id: str, rows: list[dict]) -> Path:
    """Store the per-layer comparison of two trials' models."""
    return _write_keyed(results_dir, PAIRS, "pair_id", pair_id, rows, PAIR_SCHEMA)


def load_pairs(results_dir: str | os.PathLike) -> pd.DataFrame:
    """One row per (pair of trials, layer)."""
    return _read(Path(results_dir) / PAIRS, PAIR_SCHEMA)


def pair_ids(results_dir: str | os.PathLike) -> set[str]:
    return _stored_ids(results_dir, PAIRS)


def write_similarity(results_dir: str | os.PathLike, trial_id: str, rows: list[dict]) -> Path:
    """Store a trial's per-layer similarity rows (written before its trial row)."""
    return _write_keyed(results_dir, SIMILARITY, "trial_id", trial_id, rows, SIMILARITY_SCHEMA)


def load_similarity(results_dir: str | os.PathLike) -> pd.DataFrame:
    """One row per (trial, layer); join to ``load_trials`` on ``trial_id``."""
    return _read(Path(results_dir) / SIMILARITY, SIMILARITY_SCHEMA)


def similarity_ids(results_dir: str | os.PathLike) -> set[str]:
    return _stored_ids(results_dir, SIMILARITY)
