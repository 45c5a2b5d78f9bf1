"""What an experiment family is, and the grid helpers every family builds on.

A family is one module of this package declaring one ``Family``: its name and paper source,
its default tasks, train sizes and epochs, the command-line flags it adds (``Flag``), its grid
builder, and the figures it feeds (``FigureSpec``) with the store rows each reads. The
``reinit-tune`` command, the report, the dry run and the tests all read these declarations
through the registry (``reinit_tune.families``).

A builder takes a ``Grid`` (the model and its shape, tasks, sizes, seeds, epochs and the
training fields every trial shares) plus the values of the family's own flags, and returns
``TrialConfig``s. Grid defaults are the papers' for bert-base-uncased and scale to the
model's layer and head counts. 003 §2 and App. B, D: train subsets of 500, 5k and 50k
examples (a size larger than a task's train split is skipped for that task, as 003 skips 50k
for CoLA), 50 seeds and 5 epochs for the 500-example regime, 3 seeds and 3 epochs otherwise;
5k is the default size of every experiment after the progressive one (003 §2).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reinit_tune import data
from reinit_tune.config import TrialConfig, default
from reinit_tune.errors import DataNotFoundError, InputError, flag_type
from reinit_tune.hardware import resolve_precision
from reinit_tune.model.shape import ModelShape, shape_for
from reinit_tune.sweep.options import DEFAULT_EVALUATE, RunOptions, SimilarityOptions
from reinit_tune.tasks import get_task
from reinit_tune.train_size import Size, TrainSize

if TYPE_CHECKING:
    import pandas as pd

    from reinit_tune.analysis.frames import Store

log = logging.getLogger("reinit_tune")

SMALL_DATA = 500  # 003 App. B/D: at most this many examples → 50 seeds, 5 epochs
# The defaults of the training fields every trial of a grid shares, for the Python API
# (``Grid``) and the command line alike (``reinit_tune.cli`` reads them from here), so a
# grid built either way has the same trial ids; each is ``TrialConfig``'s own, except
# "auto" precision, resolved on the running machine for the trials' device
# (``reinit_tune.hardware.resolve_precision``).
DEFAULT_PRECISION = "auto"
DEFAULT_INIT_SCHEME = default("init_scheme")
DEFAULT_LENGTH_GROUPED = default("length_grouped")
PAPER_SIZES = (500, 5_000, 50_000)
PAPER_TASKS = ("sst2", "qnli", "cola")
DEFAULT_SIZE = 5_000  # 003 §2: "The 5k subset size is then used as the default"

parse_size = TrainSize.parse  # the command's --sizes text


# -- the request every builder takes ------------------------------------------------------
@dataclass(frozen=True)
class TaskSettings:
    """Per-task settings of a preset (002 Table 1: lr, batch size, epochs per task; 000's
    sizes per task). None: the grid's value."""

    sizes: tuple[Size, ...] | None = None
    lr: float | None = None
    batch_size: int | None = None
    epochs: int | None = None
    max_seq_length: int | None = None


@dataclass(frozen=True)
class Training:
    """The training settings a family (or preset) uses unless told otherwise."""

    lr: float = default("lr")
    batch_size: int = default("batch_size")
    max_seq_length: int = default("max_seq_length")
    schedule: str = default("schedule")
    warmup_ratio: float = default("warmup_ratio")


@dataclass(frozen=True)
class Grid:
    """What every family's grid builder takes. Every field left None is the family's default
    (``Family.configs`` fills them): ``tasks``, ``sizes``, the training settings, and
    ``epochs`` (then the family's, else the paper's per-size rule); ``seeds`` of None follows
    the paper's per-size rule; ``shape`` of None is looked up from ``model``. ``per_task``
    holds a preset's per-task settings; they apply only where the grid sets nothing.
    ``precision``, ``init_scheme`` and ``length_grouped`` default to what the command's
    flags default to (``DEFAULT_*``); precision "auto" is resolved for ``on_gpu``."""

    model: str | None = None
    shape: ModelShape | None = None
    tasks: tuple[str, ...] | None = None
    sizes: tuple[Size, ...] | None = None
    seeds: int | None = None
    epochs: int | None = None
    data_dir: str | None = None
    lr: float | None = None
    batch_size: int | None = None
    max_seq_length: int | None = None
    schedule: str | None = None
    warmup_ratio: float | None = None
    precision: str = DEFAULT_PRECISION
    init_scheme: str = DEFAULT_INIT_SCHEME
    length_grouped: bool = DEFAULT_LENGTH_GROUPED
    # the trials' device, for "auto" precision: GPU trials (--gpus-per-trial > 0) or CPUs
    on_gpu: bool = False
    per_task: Mapping[str, TaskSettings] = dataclasses.field(default_factory=dict)

    @property
    def num_layers(self) -> int:
        return self.shape.num_layers

    def task(self, task: str) -> TaskSettings:
        return self.per_task.get(task, TaskSettings())

    def trial_fields(self, task: str | None = None) -> dict[str, Any]:
        """The ``TrialConfig`` fields the trials of ``task`` share (a preset may set lr,
        batch size and sequence length per task)."""
        own = self.task(task) if task else TaskSettings()
        return {"lr": own.lr or self.lr, "batch_size": own.batch_size or self.batch_size,
                "max_seq_length": own.max_seq_length or self.max_seq_length,
                "precision": self.precision, "init_scheme": self.init_scheme,
                "length_grouped": self.length_grouped, "schedule": self.schedule,
                "warmup_ratio": self.warmup_ratio}

    def replace(self, **changes: Any) -> Grid:
        return dataclasses.replace(self, **changes)


# -- what a family declares ---------------------------------------------------------------
@dataclass(frozen=True)
class Flag:
    """A command-line flag a family adds; its value reaches the builder as keyword ``dest``."""

    name: str
    help: str
    type: Callable[[str], Any] = int
    nargs: str | None = None
    default: Any = None
    choices: tuple[Any, ...] | None = None

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        kwargs: dict[str, Any] = {"type": flag_type(self.type), "default": self.default,
                                  "help": self.help}
        if self.nargs:
            kwargs["nargs"] = self.nargs
        if self.choices:
            kwargs["choices"] = list(self.choices)
        parser.add_argument(self.name, **kwargs)


@dataclass
class Figure:
    """One drawn figure: its name, its files (PNG and PDF) and the numbers it plots (every
    setting's, drawn or not); ``undrawn`` names the settings (panels) left out past the
    panel limit (``analysis.plotting.capped``), ``drawn`` counts the panels drawn."""

    name: str
    paths: list[Path]
    table: pd.DataFrame
    undrawn: tuple[str, ...] = ()
    drawn: int = 0


@dataclass(frozen=True)
class FigureSpec:
    """A figure (or a group of them) of the report: what it reproduces, which store rows it
    reads, how to draw it from a ``Store``, and tables that go with it."""

    key: str
    title: str
    source: str  # the paper figure(s) it reproduces
    reads: str  # the store rows it reads, in words
    draw: Callable[[Store, Path], list[Figure]]
    tables: Callable[[Store], dict[str, pd.DataFrame]] | None = None
    # The paper's aggregation where it states one instead of the mean: the better of each
    # ``best_of`` runs (001 §7); the figure's draw function takes the same value.
    best_of: int | None = None


class FigureModule:
    """A figure module of ``reinit_tune.analysis`` imported on first use: declaring the
    families (and ``reinit-tune --help``) then loads neither pandas' figures nor scipy nor
    matplotlib. Its attributes are functions that import the module when called."""

    def __init__(self, name: str):
        self._name = f"reinit_tune.analysis.{name}"

    def __getattr__(self, attr: str) -> Callable[..., Any]:
        module = self._name

        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(importlib.import_module(module), attr)(*args, **kwargs)

        call.__name__ = call.__qualname__ = attr
        return call


def plot(name: str, function: Callable[..., tuple], *inputs: str
         ) -> Callable[[Store, Path], list[Figure]]:
    """A ``FigureSpec.draw`` for a figure function ``function(*store tables, out_dir,
    name=...)`` returning (figure, paths, table); ``inputs`` name the ``Store`` tables."""
    def draw(store: Store, out_dir: Path) -> list[Figure]:
        from reinit_tune.analysis.plotting import undrawn_panels

        with undrawn_panels() as left_out:
            _, paths, table = function(*(getattr(store, t) for t in inputs), out_dir,
                                       name=name)
        return [Figure(name, paths, table, tuple(left_out["undrawn"]), left_out["drawn"])]
    return draw


@dataclass(frozen=True)
class RunDefaults:
    """Run options a preset turns on by default (its figures need them); flags override."""

    similarity: bool = False
    similarity_examples: int | None = None
    layer_replacement: bool = False
    save_model: bool = False
    log_every: int = 0
    # "final" (the default), or "every-epoch" where a figure plots per-epoch curves (003
    # App. D's epoch study)
    evaluate: str = DEFAULT_EVALUATE


@dataclass(frozen=True)
class Family:
    """An experiment family, or a paper's preset of one: see the module docstring.

    ``model``, ``training``, ``per_task`` and ``run`` are the defaults a preset changes
    (001: bert-base-cased, batch 32; 002: per-task hyperparameters, slanted triangular
    schedule). ``contrasts`` names what ``--seeds auto`` makes precise. ``fields`` says in
    words which ``TrialConfig`` fields its rows set (the README's family table); ``order``
    places it among the others (the papers' order in listings and the report)."""

    name: str
    title: str
    source: str
    build: Callable[..., list[TrialConfig]]
    tasks: tuple[str, ...]
    sizes: tuple[Size, ...]
    epochs: int | None = None
    flags: tuple[Flag, ...] = ()
    figures: tuple[FigureSpec, ...] = ()
    fields: str = ""
    order: int = 100
    model: str = "bert-base-uncased"
    seeds: int | None = None  # None: the paper's per-size rule (003 App. B)
    training: Training = Training()
    per_task: Mapping[str, TaskSettings] = dataclasses.field(default_factory=dict)
    run: RunDefaults = RunDefaults()
    # The paired contrasts its figures and claims compare, each surgery against the
    # unmodified model by seed, in words; "" where it compares none (no ``--seeds auto``).
    contrasts: str = ""

    @property
    def paper(self) -> str:
        """The paper the family comes from: the first word of its source ("003")."""
        return self.source.split()[0]

    def configs(self, grid: Grid, **values: Any) -> list[TrialConfig]:
        """The family's trials for ``grid``: the family's defaults fill what ``grid`` leaves
        open (its per-task settings only where the grid sets nothing), flag values not given
        take their defaults."""
        unknown = set(values) - {f.dest for f in self.flags}
        if unknown:
            raise InputError(f"{self.name}: unknown options {sorted(unknown)}; allowed: "
                             f"{[f.dest for f in self.flags]}")
        set_by_grid = {f for f in ("sizes", "lr", "batch_size", "epochs", "max_seq_length")
                       if getattr(grid, f) is not None}
        per_task = {task: dataclasses.replace(own, **{f: None for f in set_by_grid})
                    for task, own in {**self.per_task, **grid.per_task}.items()}
        model = grid.model or self.model
        precision, why = resolve_precision(grid.precision, on_gpu=grid.on_gpu)
        if grid.precision != precision:
            log.debug("precision %s (%s)", precision, why)
        training = {f.name: getattr(grid, f.name) if getattr(grid, f.name) is not None
                    else getattr(self.training, f.name)
                    for f in dataclasses.fields(Training)}
        grid = grid.replace(
            model=model, shape=grid.shape or shape_for(model),
            tasks=tuple(grid.tasks or self.tasks), sizes=tuple(grid.sizes or self.sizes),
            epochs=grid.epochs if grid.epochs is not None else self.epochs,
            seeds=grid.seeds if grid.seeds is not None else self.seeds,
            per_task=per_task, precision=precision, **training,
        )
        for task in grid.tasks:
            get_task(task)
        return self.build(grid, **{f.dest: values.get(f.dest, f.default) for f in self.flags})

    def run_options(self, **changes: Any) -> RunOptions:
        """The ``RunOptions`` the command gives this family's sweep when no run flag is
        passed (its ``RunDefaults``: evaluation policy, similarity, saved models, step
        losses), with ``changes`` (``RunOptions`` fields) applied."""
        run = self.run
        similarity = (SimilarityOptions(run.similarity_examples, run.layer_replacement)
                      if run.similarity or run.layer_replacement else None)
        options = RunOptions(similarity=similarity, save_model=run.save_model,
                             log_every=run.log_every, evaluate=run.evaluate)
        return dataclasses.replace(options, **changes)


# -- grid helpers -------------------------------------------------------------------------
def train_rows(task: str, data_dir: str | None) -> int:
    """Rows of the task's official train split (a local subset file says how many in its
    metadata): what sizes are shares of and checked against. Whether the local file can
    supply a size is pre-flight's question (``--allow-subset``)."""
    try:
        return data.official_rows(task, "train", data_dir)
    except DataNotFoundError:
        return get_task(task).train_rows  # pre-flight reports the missing data


def fitting_sizes(task: str, sizes: Sequence[Size], data_dir: str | None = None) -> list[Size]:
    """The sizes that fit the task's official train split; the others are skipped with a
    note."""
    rows = train_rows(task, data_dir)
    kept = [s for s in sizes if TrainSize(s).fits(rows)]
    dropped = [s for s in sizes if s not in kept]
    if dropped:
        log.warning("%s: skipping train sizes %s (train split has %d rows)", task, dropped, rows)
    if not kept:
        raise InputError(
            f"--sizes: none of {list(sizes)} fits the {rows}-row {task} train split; "
            f"allowed: 1..{rows}, a fraction in (0, 1) or 'full'"
        )
    return kept


def is_small(size: Size, task: str, data_dir: str | None = None) -> bool:
    """Whether ``size`` is 003's small-data regime: the examples the paper meant (a fraction
    of the official split, not of a local subset file) are at most ``SMALL_DATA``."""
    return TrainSize(size).wanted(train_rows(task, data_dir), task) <= SMALL_DATA


def paper_seeds(size: Size, task: str, data_dir: str | None = None) -> int:
    """003 App. B: 50 runs in the 500-example regime, 3 otherwise."""
    return 50 if is_small(size, task, data_dir) else 3


def paper_epochs(size: Size, task: str, data_dir: str | None = None) -> int:
    """003 App. D: 5 epochs in the 500-example regime, 3 otherwise."""
    return 5 if is_small(size, task, data_dir) else 3


def settings(grid: Grid, sizes: Sequence[Size] | None = None, epochs: int | None = None
             ) -> Iterator[tuple[str, Size, int, int]]:
    """(task, size, number of seeds, epochs) for every task of ``grid`` and every size that
    fits it (``sizes``/``epochs`` override the grid's and the per-task ones); None seeds or
    epochs follow the paper's per-size rule."""
    for task in grid.tasks:
        own = grid.task(task)
        task_sizes = sizes if sizes is not None else own.sizes or grid.sizes
        task_epochs = epochs if epochs is not None else own.epochs or grid.epochs
        for size in fitting_sizes(task, task_sizes, grid.data_dir):
            yield (task, size,
                   grid.seeds if grid.seeds is not None else paper_seeds(size, task,
                                                                        grid.data_dir),
                   task_epochs if task_epochs is not None
                   else paper_epochs(size, task, grid.data_dir))


Surgeries = Sequence[dict] | Callable[[str], Sequence[dict]]


def expand(grid: Grid, surgeries: Surgeries, *, experiment: str,
           sizes: Sequence[Size] | None = None, epochs: int | None = None) -> list[TrialConfig]:
    """One config per (task, fitting size, seed, surgery). ``surgeries`` are dicts of
    ``TrialConfig`` fields (or a function of the task giving them)."""
    configs = []
    for task, size, n_seeds, n_epochs in settings(grid, sizes, epochs):
        per_task = surgeries(task) if callable(surgeries) else surgeries
        for seed in range(n_seeds):
            for surgery in per_task:
                configs.append(TrialConfig(
                    model=grid.model, task=task, train_size=size, seed=seed, epochs=n_epochs,
                    experiment=experiment, **{**grid.trial_fields(task), **surgery},
                ))
    return configs


def choose_layers(flag: str, chosen: Iterable[int] | None, default: Iterable[int],
                  allowed: int, model: str) -> list[int]:
    """The layer indices a flag selected (or ``default``), each in 0..allowed-1."""
    chosen = list(default) if chosen is None else list(chosen)
    bad = [i for i in chosen if not 0 <= i < allowed]
    if bad:
        raise InputError(f"{flag}: {bad} out of range for {model}; allowed: 0..{allowed - 1}")
    return sorted(set(chosen))
