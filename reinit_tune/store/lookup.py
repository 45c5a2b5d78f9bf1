"""What claims and planning ask of the store: which trials are finished (stored "ok" with
readable epoch rows), with what data they ran, and one trial's stored row wherever it is."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

import pandas as pd

from reinit_tune.config import TrialConfig
from reinit_tune.store.files import COMPACTED_PREFIX
from reinit_tune.store.reader import Problems, read_table, remembered
from reinit_tune.store.tables import EPOCH_TABLE, TRIAL_TABLE, load_trials

log = logging.getLogger("reinit_tune")


def finished_ids(results_dir: str | os.PathLike) -> set[str]:
    """Ids of trials stored with status "ok", recomputed from their stored configs.

    Recomputing (instead of trusting the stored id) keeps resumption right across versions
    that add config fields: an old row gets the new fields' defaults, as a new config would.
    """
    return set(finished_data(results_dir))


def finished_data(results_dir: str | os.PathLike
                  ) -> dict[str, tuple[str | None, str | None, int | None, str | None]]:
    """Id of every trial stored "ok" (recomputed as ``finished_ids`` does) → its
    (``data_fingerprint``, ``data_source``, ``train_examples``, ``model_fingerprint``); None
    where the row predates them. A trial whose epoch rows are unreadable is not finished
    (``finished_rows``)."""
    return dict(remembered(results_dir, ("trials", "epochs"), "finished_data",
                           lambda: _finished_data(results_dir)))


def _finished_data(results_dir: str | os.PathLike
                   ) -> dict[str, tuple[str | None, str | None, int | None, str | None]]:
    df = finished_rows(results_dir)
    known = {f.name for f in dataclasses.fields(TrialConfig)}
    found: dict[str, tuple[str | None, str | None, int | None, str | None]] = {}
    for stored_id, blob, fingerprint, source, examples, model in zip(
            df["trial_id"], df["config_json"], df["data_fingerprint"], df["data_source"],
            df["train_examples"], df["model_fingerprint"], strict=True):
        try:
            data = json.loads(blob)
            trial_id = TrialConfig.from_dict({k: v for k, v in data.items()
                                              if k in known}).trial_id
        except (ValueError, TypeError):  # a row no config of this version describes
            trial_id = stored_id
        found[trial_id] = (fingerprint if isinstance(fingerprint, str) else None,
                           source if isinstance(source, str) else None,
                           None if pd.isna(examples) else int(examples),
                           model if isinstance(model, str) else None)
    return found


def stored_rows(results_dir: str | os.PathLike, trial_id: str,
                written_after: float | None = None) -> list[dict[str, Any]]:
    """The stored trial rows of ``trial_id`` (one, or none), wherever they are: its own file
    or a compacted one. With ``written_after`` (a Unix time), compacted files made before
    then (less ``reader.CLOCK_SKEW_S``) are not searched: they cannot hold a row written later, and
    searching each of them costs a scan of its trial ids on every call."""
    return TRIAL_TABLE.rows_of(results_dir, trial_id, written_after)


def finished_rows(results_dir: str | os.PathLike) -> pd.DataFrame:
    """Trials stored "ok" whose epoch rows are readable. A trial that completed epochs but
    whose epoch file is unreadable (or holds malformed rows) is not finished: the next sweep
    reruns it and rewrites its epoch rows, instead of skipping it forever with them lost. A
    trial without any epoch file (none was written) still counts."""
    from concurrent.futures import ThreadPoolExecutor

    root = Path(results_dir)
    problems = Problems()
    # The two reads overlap (DuckDB releases the GIL): over per-trial files each is one
    # footer parse per file, the epoch read the smaller one (benchmarks/RESULTS.md).
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(read_table, root, EPOCH_TABLE, ["trial_id"], problems)
        df = load_trials(root, status="ok", columns=[
            "trial_id", "config_json", "data_fingerprint", "data_source", "epochs_completed",
            "reused_from", "train_examples", "model_fingerprint"])
        epochs = reading.result()
    broken = problems.bad_files
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
