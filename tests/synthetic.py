"""Synthetic results stores for figure tests, written through the real store functions."""

from __future__ import annotations

import json

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store
from reinit_tune.analysis import frames
from reinit_tune.analysis.frames import load as load_store  # unaffected by monkeypatching


class SyntheticStore:
    def __init__(self, root):
        self.root = root

    def add(self, experiment: str, task: str, score: float, *, seed: int = 0,
            train_size=5000, reinit_layers=(), epochs: int = 3, model: str = EMBEDDED_MODEL,
            epoch_scores: list[float] | None = None, epoch_losses: list[float] | None = None,
            **fields) -> str:
        config = TrialConfig(model, task, train_size=train_size, seed=seed,
                             reinit_layers=tuple(reinit_layers), epochs=epochs,
                             experiment=experiment, **fields)
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
        row = store.trial_row(config, reports, status="ok")
        store.write_trial(self.root, row, store.epoch_rows(config, reports))
        return config.trial_id

    def load(self) -> frames.Store:
        return load_store(self.root)
