"""Search spaces: the grids of the papers' experiments as lists of ``TrialConfig``.

Grid defaults are the papers' for bert-base-uncased and scale to the model's layer and head
counts. 003 §2 and App. B, D: train subsets of 500, 5k and 50k examples (a size larger than a
task's train split is skipped for that task, as 003 skips 50k for CoLA), 50 seeds and 5 epochs
for the 500-example regime, 3 seeds and 3 epochs otherwise; 5k is the default size of every
experiment after the progressive one (003 §2).

Every family writes its own ``experiment`` name and carries the baselines its figure needs,
recognisable from the config fields (see each builder's docstring).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from reinit_tune import data
from reinit_tune.config import TrialConfig
from reinit_tune.models import model_shape

log = logging.getLogger("reinit_tune")

SMALL_DATA = 500  # 003 App. B/D: at most this many examples → 50 seeds, 5 epochs
PAPER_SIZES = (500, 5_000, 50_000)
PAPER_TASKS = ("sst2", "qnli", "cola")
DEFAULT_SIZE = 5_000  # 003 §2: "The 5k subset size is then used as the default"
BLOCK_SIZE = 3  # 003 §4: blocks of three consecutive layers
PERMUTATIONS = 10  # 003 §5, Table 1: N = 10
HEAD_TASKS = ("cola", "stsb")  # 001 Exp 3
SEQUENTIAL_TASKS = ("cola", "mrpc", "rte", "wnli")  # 001 Exp 1
PROBE_EPOCHS = 10  # 003 App. D: "We train our probing experiments for 10 epochs"
EPOCH_STUDY_EPOCHS = 10  # 003 App. D: validation tracked up to 10 epochs
EPOCH_STUDY_SIZES = (500, 5_000)
LR_MULTIPLIER = 5.0  # 003 App. E
VARIANTS = ("lr", "layernorm", "epochs")


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


def settings(
    tasks: Iterable[str], sizes: Sequence, seeds: int | None, epochs: int | None, data_dir=None
) -> Iterator[tuple[str, int | float | None, int, int]]:
    """(task, size, number of seeds, epochs) for every task and every size that fits it;
    ``seeds``/``epochs`` of None follow the paper's per-size rule."""
    for task in tasks:
        data.get_task(task)
        for size in fitting_sizes(task, sizes, data_dir):
            yield (task, size,
                   seeds if seeds is not None else paper_seeds(size, task, data_dir),
                   epochs if epochs is not None else paper_epochs(size, task, data_dir))


Surgeries = Sequence[dict] | Callable[[str], Sequence[dict]]


def expand(
    model: str,
    tasks: Iterable[str],
    sizes: Sequence,
    surgeries: Surgeries,
    *,
    experiment: str,
    seeds: int | None = None,
    epochs: int | None = None,
    data_dir=None,
    **fields,
) -> list[TrialConfig]:
    """One config per (task, fitting size, seed, surgery). ``surgeries`` are dicts of
    ``TrialConfig`` fields (or a function of the task giving them); ``fields`` go to every
    config (lr, batch_size, max_seq_length, precision, init_scheme)."""
    configs = []
    for task, size, n_seeds, n_epochs in settings(tasks, sizes, seeds, epochs, data_dir):
        per_task = surgeries(task) if callable(surgeries) else surgeries
        for seed in range(n_seeds):
            for surgery in per_task:
                configs.append(TrialConfig(
                    model=model, task=task, train_size=size, seed=seed, epochs=n_epochs,
                    experiment=experiment, **{**fields, **surgery},
                ))
    return configs


def _layers(name: str, chosen: Iterable[int] | None, default: Iterable[int], allowed: int,
            model: str) -> list[int]:
    chosen = list(default) if chosen is None else list(chosen)
    bad = [i for i in chosen if not 0 <= i < allowed]
    if bad:
        raise ValueError(f"{name}: {bad} out of range for {model}; allowed: 0..{allowed - 1}")
    return sorted(set(chosen))


def progressive(
    model: str,
    tasks: Iterable[str] = PAPER_TASKS,
    sizes: Sequence = PAPER_SIZES,
    *,
    seeds: int | None = None,
    epochs: int | None = None,
    ks: Iterable[int] | None = None,
    data_dir=None,
    experiment: str = "progressive",
    **fields,
) -> list[TrialConfig]:
    """S1/W1: for k = 0..L keep layers 1..k pretrained and reinitialize k+1..L (003 §2).

    ``seeds``/``epochs`` of None follow the paper's per-size rule; ``fields`` are passed to
    every ``TrialConfig`` (lr, batch_size, max_seq_length, precision, variant fields).
    """
    n_layers = model_shape(model).num_layers
    ks = _layers("--k", ks, range(n_layers + 1), n_layers + 1, model)
    surgeries = [{"reinit_layers": tuple(range(k, n_layers))} for k in ks]
    return expand(model, tasks, sizes, surgeries, experiment=experiment, seeds=seeds,
                  epochs=epochs, data_dir=data_dir, **fields)


def small_data(
    model: str, tasks: Iterable[str] = PAPER_TASKS, sizes: Sequence = (SMALL_DATA,), **kwargs
) -> list[TrialConfig]:
    """003 App. B, Fig. 4: progressive reinitialization at 500 examples, 50 seeds per k
    (5 epochs), for the scatter of every run; ``experiment="small_data"``."""
    return progressive(model, tasks, sizes, experiment="small_data", **kwargs)


def localized(
    model: str,
    tasks: Iterable[str] = PAPER_TASKS,
    sizes: Sequence = (DEFAULT_SIZE,),
    **kwargs,
) -> list[TrialConfig]:
    """S2/W2 (003 §4, Fig. 2): every block of 3 consecutive layers (L-2 blocks), either
    reinitialized (``reinit_layers`` = the block) or preserved (``reinit_layers`` = every
    layer outside it), plus the baselines of the figure: the full model
    (``reinit_layers=()``) and embeddings only (all L layers reinitialized)."""
    n_layers = model_shape(model).num_layers
    if n_layers < BLOCK_SIZE:
        raise ValueError(f"--model: blocks of {BLOCK_SIZE} layers need at least {BLOCK_SIZE} "
                         f"layers; {model} has {n_layers}")
    everything = tuple(range(n_layers))
    blocks = [tuple(range(b, b + BLOCK_SIZE)) for b in range(n_layers - BLOCK_SIZE + 1)]
    reinit = [(), everything, *blocks,
              *(tuple(i for i in everything if i not in block) for block in blocks)]
    surgeries = list({r: {"reinit_layers": r} for r in reinit}.values())  # L = 3: no repeats
    return expand(model, tasks, sizes, surgeries, experiment="localized", **kwargs)


def single_layer(
    model: str,
    tasks: Iterable[str] = PAPER_TASKS,
    sizes: Sequence = (DEFAULT_SIZE,),
    *,
    layers: Iterable[int] | None = None,
    **kwargs,
) -> list[TrialConfig]:
    """S3/W3 (003 App. C, Fig. 5): reinitialize one layer at a time (every layer by default),
    3 seeds, plus the full model (``reinit_layers=()``) as the reference line."""
    n_layers = model_shape(model).num_layers
    chosen = _layers("--layers", layers, range(n_layers), n_layers, model)
    surgeries = [{"reinit_layers": ()}, *({"reinit_layers": (i,)} for i in chosen)]
    return expand(model, tasks, sizes, surgeries, experiment="single_layer", **kwargs)


def paper_head_layers(num_layers: int) -> list[int]:
    """001 Exp 3 reinitializes heads of layers 1, 2, 11 and 12 of 12: indices 0, 1, L-2, L-1."""
    return sorted({0, 1, num_layers - 2, num_layers - 1} & set(range(num_layers)))


def heads(
    model: str,
    tasks: Iterable[str] = HEAD_TASKS,
    sizes: Sequence = (None,),
    *,
    layers: Iterable[int] | None = None,
    **kwargs,
) -> list[TrialConfig]:
    """S4/W4 (001 Exp 3, Figs 5-10): reinitialize one attention head at a time, every head of
    ``layers`` (default 0, 1, L-2, L-1), on CoLA and STS-B with their full train splits, plus
    the no-reinit baseline (``reinit_heads=()``) the per-head differences are taken from."""
    shape = model_shape(model)
    chosen = _layers("--layers", layers, paper_head_layers(shape.num_layers),
                     shape.num_layers, model)
    surgeries = [{}, *({"reinit_heads": ((layer, head),)}
                       for layer in chosen for head in range(shape.num_heads))]
    return expand(model, tasks, sizes, surgeries, experiment="heads", **kwargs)


def permutation(n: int, num_layers: int) -> tuple[int, ...]:
    """Permutation n of a sweep: ``numpy.random.RandomState(n).permutation(L)``, as in the 003
    authors' code, so run n of every task (and of every reimplementation) uses the same one."""
    return tuple(np.random.RandomState(n).permutation(num_layers).tolist())


def permutations(
    model: str,
    tasks: Iterable[str] = PAPER_TASKS,
    sizes: Sequence = (DEFAULT_SIZE,),
    *,
    n_permutations: int = PERMUTATIONS,
    seeds: int | None = None,
    epochs: int | None = None,
    data_dir=None,
    **fields,
) -> list[TrialConfig]:
    """S5/W5 (003 §5, Fig. 3, Table 1): run n (seed n, so its train subset too) finetunes the
    layers in the order ``permutation(n, L)``, the same for every task so tasks can be paired;
    plus the baselines, ``seeds`` runs each: the original order (``layer_order=None``, nothing
    reinitialized) and all layers reinitialized (``layer_order=None``)."""
    n_layers = model_shape(model).num_layers
    if n_permutations < 1:
        raise ValueError(f"--permutations: must be >= 1, got {n_permutations}")
    baselines = [{"reinit_layers": ()}, {"reinit_layers": tuple(range(n_layers))}]
    configs = expand(model, tasks, sizes, baselines, experiment="permutations", seeds=seeds,
                     epochs=epochs, data_dir=data_dir, **fields)
    for task, size, _, n_epochs in settings(tasks, sizes, seeds, epochs, data_dir):
        for n in range(n_permutations):
            configs.append(TrialConfig(
                model=model, task=task, train_size=size, seed=n, epochs=n_epochs,
                layer_order=permutation(n, n_layers), experiment="permutations", **fields,
            ))
    return configs


def probing(
    model: str,
    tasks: Iterable[str] = PAPER_TASKS,
    sizes: Sequence = (None,),
    *,
    ks: Iterable[int] | None = None,
    epochs: int | None = PROBE_EPOCHS,
    **kwargs,
) -> list[TrialConfig]:
    """T5/W6 (003 §3, App. D; 000 §4.4): a linear probe on hidden state k of the frozen
    pretrained encoder for k = 0 (embeddings output) .. L, trained 10 epochs on the full
    train split; ``probe_layer`` = k."""
    n_layers = model_shape(model).num_layers
    chosen = _layers("--k", ks, range(n_layers + 1), n_layers + 1, model)
    surgeries = [{"probe_layer": k} for k in chosen]
    return expand(model, tasks, sizes, surgeries, experiment="probing", epochs=epochs, **kwargs)


def sequential(
    model: str,
    tasks: Iterable[str] = SEQUENTIAL_TASKS,
    sizes: Sequence = (None,),
    *,
    intermediate_tasks: Iterable[str] | None = None,
    **kwargs,
) -> list[TrialConfig]:
    """T6/W7 (001 Exp 1, Fig. 2): the intermediate × final matrix over CoLA, MRPC, RTE and
    WNLI (full train splits, 3 epochs each): every final task after every other intermediate
    task (``intermediate_task``), plus the direct-finetune baseline (``intermediate_task=None``),
    the matrix's diagonal in 001."""
    tasks = list(tasks)
    intermediates = tasks if intermediate_tasks is None else list(intermediate_tasks)
    for task in intermediates:
        data.get_task(task)

    def surgeries(task: str) -> list[dict]:
        return [{}, *({"intermediate_task": i} for i in intermediates if i != task)]

    return expand(model, tasks, sizes, surgeries, experiment="sequential", **kwargs)


def variants(
    model: str,
    tasks: Iterable[str] = PAPER_TASKS,
    sizes: Sequence = (DEFAULT_SIZE,),
    *,
    which: Iterable[str] = VARIANTS,
    lr_multiplier: float = LR_MULTIPLIER,
    ks: Iterable[int] | None = None,
    epoch_sizes: Sequence = EPOCH_STUDY_SIZES,
    max_epochs: int = EPOCH_STUDY_EPOCHS,
    seeds: int | None = None,
    epochs: int | None = None,
    data_dir=None,
    **fields,
) -> list[TrialConfig]:
    """W8, all ``experiment="variants"``:

    - "lr" (S8, 003 App. E, Fig. 6): progressive curve with ``reinit_lr_multiplier`` = 5;
    - "layernorm" (S7, 003 App. F, Fig. 7): progressive curve with ``preserve_layernorm``;
    - both come with the reference progressive curve (multiplier 1, LayerNorm reset) at
      ``sizes`` (5k) so each figure is complete from this sweep alone;
    - "epochs" (003 App. D): ``max_epochs`` (10) epochs for k in {0, L/2, L} at 500 and 5k
      examples; the per-epoch dev metrics are in the epoch table.
    """
    which = list(which)
    unknown = sorted(set(which) - set(VARIANTS))
    if unknown or not which:
        raise ValueError(f"--variants: {unknown or which}; allowed: {list(VARIANTS)}")
    n_layers = model_shape(model).num_layers
    common = dict(seeds=seeds, data_dir=data_dir, experiment="variants", **fields)
    curves = [{}] if {"lr", "layernorm"} & set(which) else []
    if "lr" in which:
        curves.append({"reinit_lr_multiplier": lr_multiplier})
    if "layernorm" in which:
        curves.append({"preserve_layernorm": True})
    configs = [c for curve in curves
               for c in progressive(model, tasks, sizes, epochs=epochs, ks=ks, **common, **curve)]
    if "epochs" in which:
        study_ks = sorted({0, n_layers // 2, n_layers})
        configs += progressive(model, tasks, epoch_sizes, epochs=max_epochs, ks=study_ks,
                               **common)
    return configs
