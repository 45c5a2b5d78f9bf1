"""Synthetic results stores for figure tests, written through the real store functions.

Columns that a later experiment family adds (``frames.NEUTRAL``: reinit_heads, layer_order,
...) go into the ``TrialConfig`` when this version has those fields; when it does not, they
cannot be stored, so ``SyntheticStore.load`` adds them to the loaded frame, exactly as a
store with those columns would read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store
from reinit_tune.analysis import frames
from reinit_tune.analysis.frames import load as load_store  # unaffected by monkeypatching

CONFIG_FIELDS = {f.name for f in dataclasses.fields(TrialConfig)}


class SyntheticStore:
    def __init__(self, root):
        self.root = root
        self.unstored: dict[str, dict] = {}  # trial_id -> columns this schema cannot hold

    def add(self, experiment: str, task: str, score: float, *, seed: int = 0,
            train_size=5000, reinit_layers=(), epochs: int = 3, model: str = EMBEDDED_MODEL,
            epoch_scores: list[float] | None = None, epoch_losses: list[float] | None = None,
            **later) -> str:
        known = {k: v for k, v in later.items() if k in CONFIG_FIELDS}
        unstored = {k: v for k, v in later.items() if k not in CONFIG_FIELDS}
        config = TrialConfig(model, task, train_size=train_size, seed=seed,
                             reinit_layers=tuple(reinit_layers), epochs=epochs,
                             experiment=experiment, **known)
        metric = config.task_spec.primary
        scores = epoch_scores or [score] * epochs
        losses = epoch_losses or [0.5] * epochs
        examples = train_size if isinstance(train_size, int) else 1000
        reports = [{"epoch": e + 1, "train_loss": 0.4, "eval_loss": losses[e],
                    f"eval_{metric}": scores[e], "score": scores[e], "train_time_s": 1.0,
                    "eval_time_s": 0.5, "train_examples_per_s": 10.0,
                    "train_examples": examples, "setup_time_s": 0.1, "device": "cpu",
                    "precision_used": "fp32", "node_id": "n",
                    "versions": json.dumps({"torch": "2.x", "python": "3.11"})}
                   for e in range(epochs)]
        trial_id = config.trial_id
        if unstored:  # distinct trials whose difference this schema cannot hold yet
            blob = json.dumps(unstored, sort_keys=True, default=list)
            trial_id = hashlib.sha256((trial_id + blob).encode()).hexdigest()[:16]
            self.unstored[trial_id] = unstored
        row = store.trial_row(config, reports, status="ok", trial_id=trial_id)
        epochs_rows = [{**r, "trial_id": trial_id} for r in store.epoch_rows(config, reports)]
        store.write_trial(self.root, row, epochs_rows)
        return trial_id

    def load(self) -> frames.Store:
        data = load_store(self.root)
        if self.unstored:
            trials = data.trials
            for column in {c for cols in self.unstored.values() for c in cols}:
                values = [self.unstored.get(t, {}).get(column, frames.NEUTRAL[column])
                          for t in trials["trial_id"]]
                trials[column] = values
            data.trials = frames.normalize(trials)
        return data
