"""Search spaces: the grids of the papers' experiments as lists of ``TrialConfig``.

Grid defaults are the papers' for bert-base-uncased and scale to the model's layer count.
003 §2 and App. B, D: train subsets of 500, 5k and 50k examples (a size larger than a task's
train split is skipped for that task, as 003 skips 50k for CoLA), 50 seeds and 5 epochs for
the 500-example regime, 3 seeds and 3 epochs otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from reinit_tune import data
from reinit_tune.config import TrialConfig
from reinit_tune.models import model_shape

log = logging.getLogger("reinit_tune")

SMALL_DATA = 500  # 003 App. B/D: at most this many examples → 50 seeds, 5 epochs
PAPER_SIZES = (500, 5_000, 50_000)
PAPER_TASKS = ("sst2", "qnli", "cola")


def _train_rows(task: str, data_dir) -> int:
    try:
        return data.split_rows(task, "train", data_dir)
    except data.DataNotFoundError:
        return data.get_task(task).train_rows  # pre-flight reports the missing data


def fitting_sizes(task: str, sizes: Sequence, data_dir=None) -> list:
    """The sizes that fit the task's train split; the others are skipped with a note."""
    rows = _train_rows(task, data_dir)
    kept = [s for s in sizes if s is None or isinstance(s, float) or s <= rows]
    dropped = [s for s in sizes if s not in kept]
    if dropped:
        log.warning("%s: skipping train sizes %s (train split has %d rows)", task, dropped, rows)
    if not kept:
        raise ValueError(
            f"--sizes: none of {list(sizes)} fits the {rows}-row {task} train split; "
            f"allowed: 1..{rows}, a fraction in (0, 1) or 'full'"
        )
    return kept


def is_small(size, task: str, data_dir=None) -> bool:
    n = data.subset_size(size, _train_rows(task, data_dir), task)
    return n <= SMALL_DATA


def paper_seeds(size, task: str, data_dir=None) -> int:
    return 50 if is_small(size, task, data_dir) else 3


def paper_epochs(size, task: str, data_dir=None) -> int:
    return 5 if is_small(size, task, data_dir) else 3


def progressive(
    model: str,
    tasks: Iterable[str] = PAPER_TASKS,
    sizes: Sequence = PAPER_SIZES,
    *,
    seeds: int | None = None,
    epochs: int | None = None,
    ks: Iterable[int] | None = None,
    data_dir=None,
    **fields,
) -> list[TrialConfig]:
    """S1/W1: for k = 0..L keep layers 1..k pretrained and reinitialize k+1..L (003 §2).

    ``seeds``/``epochs`` of None follow the paper's per-size rule; ``fields`` are passed to
    every ``TrialConfig`` (lr, batch_size, max_seq_length, precision).
    """
    n_layers = model_shape(model).num_layers
    ks = list(range(n_layers + 1)) if ks is None else list(ks)
    bad = [k for k in ks if not 0 <= k <= n_layers]
    if bad:
        raise ValueError(f"--k: {bad} out of range for {model}; allowed: 0..{n_layers}")
    configs = []
    for task in tasks:
        data.get_task(task)
        for size in fitting_sizes(task, sizes, data_dir):
            n_seeds = seeds if seeds is not None else paper_seeds(size, task, data_dir)
            n_epochs = epochs if epochs is not None else paper_epochs(size, task, data_dir)
            for seed in range(n_seeds):
                for k in ks:
                    configs.append(TrialConfig(
                        model=model, task=task, train_size=size, seed=seed,
                        reinit_layers=tuple(range(k, n_layers)), epochs=n_epochs,
                        experiment="progressive", **fields,
                    ))
    return configs
