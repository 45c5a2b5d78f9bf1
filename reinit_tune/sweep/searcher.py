"""How the trials of a sweep reach Ray Tune and how Tune names them: ``TrialList`` (Tune's
searcher, each trial once, in order) and the trial id, name and folder of a Tune trial read
back from the config ``TrialList`` gave it."""

from __future__ import annotations

import pickle
from typing import Any

from ray.tune.search import Searcher

from reinit_tune.sweep.progress import trial_name


class TrialList(Searcher):
    """Tune's search space: each trial once, in order, as ``{"trial": {"trial_id": ...,
    <axes>}}`` with the trial's experiment axes (``trials``: id -> ``progress.axes``) as real
    values, so Tune's table, ``ResultGrid.get_dataframe()`` (``config/trial/k``...), logger
    callbacks (TensorBoard hparams ``trial/k``...) and the dashboard show them.

    A Tune searcher rather than one ``grid_search`` value per trial: Tune's variant generator
    deep-copies the whole search space, grid included, for each trial it creates, which is
    O(n) per trial and O(n^2) per sweep (22 s of a 1,000-trial sweep's 60 s of driver time;
    benchmarks/RESULTS.md, "the sweep driver at scale"); handing out the next value is O(1).
    """

    def __init__(self, trials: dict[str, dict[str, Any]]):
        super().__init__()
        self.values = [{"trial_id": tid, **values} for tid, values in trials.items()]
        self.given = 0

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True  # no metric to optimize: every value runs

    def suggest(self, trial_id: str) -> dict | str | None:
        if self.given >= len(self.values):
            return Searcher.FINISHED
        self.given += 1
        return {"trial": dict(self.values[self.given - 1])}

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass

    # with Tune's experiment state (periodic), so that state stays whole
    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump((self.values, self.given), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.values, self.given = pickle.load(f)


def trial_id_of(trial) -> str | None:
    """Our trial id of a Tune trial (from its config; see ``TrialList``)."""
    return (trial.config.get("trial") or {}).get("trial_id")


def tune_trial_name(trial) -> str:
    """Tune's ``trial_name_creator``: a trial named by its axes
    (``progressive_rte_n500_s3_k4``), from its config (``TrialList``). A module function, not
    a table of names: Tune serializes the creators once per trial it creates."""
    values = trial.config.get("trial")
    return trial_name(values) if values else "trial"


def tune_trial_dirname(trial) -> str:
    """Tune's ``trial_dirname_creator``: the trial's name and Tune's trial id."""
    return f"{tune_trial_name(trial)}_{trial.trial_id}"
