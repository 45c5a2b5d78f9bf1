"""Per-trial dev scores after each epoch, read from the epoch table, for the claims about
training longer (003 App. D): ``score_e1``, ``score_e2``, ... of every run that trained more
than 3 epochs (the epochs study; other runs' within-run epochs are no claim's cells)."""

from __future__ import annotations

import pandas as pd

EPOCH_SCORE = "score_e{}"
_PREFIX = EPOCH_SCORE.format("")
# what ``per_trial`` reads of the epoch table
EPOCH_COLUMNS = ("trial_id", "epoch", "score")
STUDY_EPOCHS = 3  # runs longer than this are the study's


def per_trial(epochs: pd.DataFrame | None, trial_epochs: pd.Series | None = None
              ) -> pd.DataFrame:
    """One row per trial longer than ``STUDY_EPOCHS`` (``trial_epochs``: each trial's
    configured epochs, by trial id; without it every trial of ``epochs``) with its dev score
    after each epoch; a re-recorded epoch (a resumed run) counts once, its last record."""
    if epochs is None or epochs.empty:
        return pd.DataFrame(columns=["trial_id"])
    rows = epochs.dropna(subset=["score"])
    if trial_epochs is not None:
        long = trial_epochs[pd.to_numeric(trial_epochs, errors="coerce") > STUDY_EPOCHS]
        rows = rows[rows["trial_id"].isin(long.index)]
    if rows.empty:
        return pd.DataFrame(columns=["trial_id"])
    wide = (rows.drop_duplicates(["trial_id", "epoch"], keep="last")
            .pivot(index="trial_id", columns="epoch", values="score"))
    wide.columns = [EPOCH_SCORE.format(int(e)) for e in wide.columns]
    return wide.reset_index()


def columns(summaries: pd.DataFrame) -> list[str]:
    """The per-epoch columns of ``per_trial``'s frame."""
    return [c for c in summaries if c.startswith(_PREFIX)]
