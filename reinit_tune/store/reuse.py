"""Reuse across families: two configs that differ only in their experiment name compute the
same numbers, so a stored run of one is copied for the other instead of run again."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from reinit_tune.config import TrialConfig
from reinit_tune.store.reader import remembered
from reinit_tune.store.rows import write_trial
from reinit_tune.store.tables import (
    EPOCH_TABLE,
    SIMILARITY_TABLE,
    STEP_TABLE,
    TRIAL_TABLE,
    load_trials,
)


def equivalence_key(config: TrialConfig) -> str:
    """What two configs that differ only in their experiment name share: they compute the
    same numbers, so a stored run of one serves the other."""
    identity = config.identity()
    identity.pop("experiment")
    return json.dumps(identity, sort_keys=True)


def equivalent_ids(results_dir: str | os.PathLike) -> dict[str, str]:
    """``equivalence_key`` → id of a stored "ok" trial with that key (its own run, not a
    reuse)."""
    return dict(remembered(results_dir, ("trials",), "equivalent_ids",
                           lambda: _equivalent_ids(results_dir)))


def _equivalent_ids(results_dir: str | os.PathLike) -> dict[str, str]:
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
    for table in (SIMILARITY_TABLE, STEP_TABLE):
        if rows := table.rows_of(root, source_id):  # a per-trial or a compacted file
            table.write(root, trial_id, rows)
    epochs = [{**r, "trial_id": trial_id, "experiment": config.experiment}
              for r in EPOCH_TABLE.rows_of(root, source_id)]
    [row] = TRIAL_TABLE.rows_of(root, source_id)
    row.update(trial_id=trial_id, experiment=config.experiment, reused_from=source_id,
               config_json=json.dumps(config.to_dict(), sort_keys=True))
    return write_trial(root, row, epochs)
