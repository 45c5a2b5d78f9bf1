"""What of a store the verdicts may read, checked before any claim is decided: scores a
metric can take (``reinit_tune.store.check.bad_scores``: an accuracy of 7.5 or an infinite
score is refused, naming its trials), a store with ok runs at all (an empty or all-failed
store is said in one line), and runs stored twice with different scores (reported: the
verdicts, like the figures, count a run once)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from reinit_tune.analysis import frames


def nothing_to_decide(statuses: pd.Series, results: str) -> str | None:
    """One line where the store holds no ok run (empty, or every trial failed), else None."""
    counts = statuses.astype(str).value_counts()
    if counts.get("ok", 0):
        return None
    if counts.empty:
        return f"--results {results} holds no trials yet: nothing to decide; run a sweep first"
    held = ", ".join(f"{n} {status}" for status, n in counts.items())
    return (f"--results {results} holds no ok run ({held}): nothing to decide; each failed "
            f"trial's `error` column says why (reinit_tune.store.load_trials({results!r}))")


@dataclass(frozen=True)
class Rerun:
    """One run (configuration and seed) stored by several trials whose scores differ."""

    task: str
    seed: int
    trials: tuple[str, ...]  # the one the verdicts and figures use first
    scores: tuple[float, ...]

    def __str__(self) -> str:
        runs = ", ".join(f"{t} {s:.4f}" + (" (used)" if i == 0 else "")
                         for i, (t, s) in enumerate(zip(self.trials, self.scores, strict=True)))
        return f"{self.task} seed {self.seed}: {runs}"


def conflicting_reruns(trials: pd.DataFrame, tolerance: float = 1e-9) -> list[Rerun]:
    """The runs of ``trials``' ok rows stored by more than one trial (under two experiment
    names, or copied) with scores further apart than ``tolerance``: the figures and the
    verdicts count such a run once (``analysis.frames.split``), so one of the scores is
    silently not used."""
    ok = trials[(trials["status"] == "ok") if "status" in trials else slice(None)]
    ok = ok[pd.notna(ok["score"])]
    if len(ok) < 2:
        return []
    run = frames.run_ids(ok)
    spread = pd.Series(ok["score"].to_numpy(float)).groupby(run).agg(["min", "max", "size"])
    clash = spread.index[(spread["size"] > 1) & (spread["max"] - spread["min"] > tolerance)]
    rows = ok[np.isin(run, clash)].assign(_run=run[np.isin(run, clash)])
    # in the order ``frames.split`` keeps one: a row not reused from another family first,
    # then the store's (trial id) order
    reused = rows["reused_from"].notna() if "reused_from" in rows else False
    rows = rows.assign(_reused=reused).sort_values(["_reused", "trial_id"], kind="stable")
    return [Rerun(str(part["task"].iloc[0]), int(part["seed"].iloc[0]),
                  tuple(map(str, part["trial_id"])), tuple(map(float, part["score"])))
            for _, part in rows.groupby("_run", sort=True)]
