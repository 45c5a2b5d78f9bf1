"""The scores of not learning for whichever metric a panel plots: majority class and chance
from the task's dev labels (``reinit_tune.metrics.reference_scores``).

Every trial stores these two scores for its task's primary metric. A figure that plots
another stored metric (001 reports MRPC as the mean of accuracy and F1) needs them for that
metric: the accuracy majority line (0.684 on MRPC) under an accuracy-and-F1 curve would put a
model that predicts one class far above its own "majority class" line (0.748). They are
computed here from the local dev labels (``$REINIT_TUNE_DATA``); where those cannot be read,
no line is drawn rather than the wrong metric's.
"""

from __future__ import annotations

import functools
import logging

from reinit_tune import data, env
from reinit_tune.metrics import reference_scores
from reinit_tune.tasks import get_task

log = logging.getLogger("reinit_tune")


@functools.lru_cache(maxsize=64)
def dev_reference(task: str, metric: str, data_dir: str | None = None
                  ) -> tuple[float, float | None] | None:
    """(majority, chance) of ``metric`` on ``task``'s first dev split, or None where the
    local dev labels cannot be read."""
    import pyarrow.parquet as pq

    root = env.data_dir(data_dir)
    if root is None:
        return None
    path = data.local_split_path(task, get_task(task).dev_splits[0], root)
    try:
        labels = pq.read_table(path, columns=["label"])["label"].to_numpy()
        return reference_scores(task, labels, metric)
    except (OSError, KeyError, ValueError) as e:
        log.debug("no dev labels of %s for its %s baselines: %s", task, metric, e)
        return None


def trivial_predictor(task: str, metric: str, value: float, data_dir: str | None = None,
                      tolerance: float = 1e-3) -> str | None:
    """What a published ``value`` of ``metric`` on ``task`` equals, if it is a score of not
    learning (the majority class for every dev example, or chance); else None."""
    reference = dev_reference(task, metric, data_dir)
    if reference is None:
        return None
    majority, chance = reference
    if abs(value - majority) <= tolerance:
        return "the score of predicting the majority dev class for every example"
    if chance is not None and abs(value - chance) <= tolerance:
        return "the expected score of uniform random guessing"
    return None
