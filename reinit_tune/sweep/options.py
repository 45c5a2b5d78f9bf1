"""What a sweep run needs besides its trial configs, as typed options.

``RunOptions`` is everything a run is told (results and data folders, resources per trial,
Tune storage, retries, checkpoints, similarity, saving models, extra Tune callbacks);
``TrialRuntime`` is the part each trial needs, handed to the Tune trainable as one object.
None of these change what a trial computes, so none is part of a trial's identity (seeds on
demand changes which seeds run, never what a seed computes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reinit_tune.errors import InputError
from reinit_tune.inference.sequential import SeedRule

# Checkpoint an epoch that took this long: a preempted bert-base trial on 50k examples then
# loses at most one epoch, while the many short trials of a sweep never pay for checkpoints.
DEFAULT_CHECKPOINT_AFTER_S = 300.0
# ``--pack-size auto``: 1 on CPUs, on a GPU what its free memory holds (reinit_tune.sweep.packs).
AUTO_PACK_SIZE = "auto"
# ``--gpus-per-trial auto``: one GPU per Tune trial (a pack) where the cluster the sweep runs
# on has GPUs, else CPU trials (``reinit_tune.sweep.cluster.resolve_gpus``).
AUTO_GPUS = "auto"
# What a rerun does with stored trials of its grid that were trained on other data (their
# data fingerprint differs from the data found now): stop before any trial, or rerun them.
DATA_CHANGED = ("stop", "rerun")
# The same for stored trials whose model's weights changed (``--model-changed``).
MODEL_CHANGED = DATA_CHANGED
# When a trial scores its dev split: "final" after the last epoch only (what the figures of
# most families read), "every-epoch" for per-epoch curves (003 App. D). Evaluation draws no
# random numbers, so this changes no training number and is no part of a trial's id.
DEFAULT_EVALUATE = "final"


def gpus_arg(text: str) -> float | str:
    """``--gpus-per-trial``: a number of GPUs (0: CPU trials) or ``auto``."""
    if text == AUTO_GPUS:
        return text
    try:
        return float(text)
    except ValueError:
        raise InputError(f"--gpus-per-trial: give a number of GPUs (0: CPUs) or "
                         f"'{AUTO_GPUS}', got {text!r}") from None


def pack_size_arg(text: str) -> int | str:
    """``--pack-size``: a positive count or ``auto``."""
    if text == AUTO_PACK_SIZE:
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"--pack-size: must be a positive integer or 'auto', got {text!r}")
    return value


@dataclass(frozen=True)
class SimilarityOptions:
    """What a trial run with ``--similarity`` measures at its end: its finetuned model
    against its pre-finetuning state, per layer (``reinit_tune.similarity.layers``)."""

    examples: int | None = None  # the first N dev examples; None: the whole dev split
    layer_replacement: bool = False  # 002 §4: one extra forward pass per layer

    def __post_init__(self) -> None:
        if self.examples is not None and (isinstance(self.examples, bool)
                                          or not isinstance(self.examples, int)
                                          or self.examples < 1):
            raise InputError(f"--similarity-examples: must be a positive count, got "
                             f"{self.examples!r}")


@dataclass(frozen=True)
class Resources:
    """What one Tune trial (a trial, or a pack of them) asks Ray for. Fractions below 1 put
    several on one device; ``cpus_per_trial`` is also the trial's torch thread count.
    ``gpus_per_trial`` ``AUTO_GPUS``: 1 where the cluster has GPUs, else 0, resolved before
    the sweep plans (``reinit_tune.sweep.cluster.resolve_gpus``)."""

    cpus_per_trial: float = 1
    gpus_per_trial: float | str = AUTO_GPUS


@dataclass(frozen=True)
class TrialRuntime:
    """What every trial of a run needs besides its config."""

    data_dir: str | None = None
    checkpoint_after_s: float = DEFAULT_CHECKPOINT_AFTER_S
    similarity: SimilarityOptions | None = None
    models_dir: str | None = None  # save each finetuned model to <models_dir>/<trial_id>
    log_every: int = 0  # store the loss of every N-th step (0: none)
    evaluate: str = DEFAULT_EVALUATE  # or "every-epoch": the dev split after each epoch
    allow_subset: bool = False  # train on a subset file's rows where it cannot supply a size
    # the sweep's board of progress beats (``stalls.Beats``), an actor
    beats: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class RunOptions:
    """How to run a sweep (see the fields' comments); by default on the cluster the sweep
    finds (``reinit_tune.sweep.cluster``), on its GPUs in packs where it has any.

    ``storage`` is Tune's ``storage_path`` (checkpoints, Tune's own logs): a local folder, an
    NFS path or an ``s3://``/``gs://`` URI every node can reach; None: ``$REINIT_TUNE_STORAGE``,
    else ``<results_dir>/_tune``. ``similarity`` makes each trial compare its finetuned model
    with its pre-finetuning state per layer (``RESULTS/similarity/``); ``save_model`` saves
    each finetuned model to ``RESULTS/models/<trial_id>/`` (written by the worker: on a
    multi-node cluster RESULTS must be on storage every node can write). A stored trial
    without the asked-for similarity rows or saved model runs again.
    """

    results_dir: Path = Path("results")
    data_dir: str | None = None  # None: $REINIT_TUNE_DATA, else the hub
    resources: Resources = Resources()
    max_failures: int = 2  # Tune retries of a failing trial
    storage: str | None = None
    checkpoint_after_s: float = DEFAULT_CHECKPOINT_AFTER_S
    similarity: SimilarityOptions | None = None
    save_model: bool = False
    log_every: int = 0  # store the training loss of every N-th step in RESULTS/steps/
    evaluate: str = DEFAULT_EVALUATE  # or "every-epoch" (see DEFAULT_EVALUATE)
    name: str | None = None  # Tune's experiment name prefix; default: the first family's
    # Experiment trackers fed by Tune's own logger callbacks (``reinit_tune.sweep.loggers``):
    # any of "tensorboard", "wandb", "mlflow", "csv".
    loggers: tuple[str, ...] = ()
    verbose: bool = False  # Tune's full trial table instead of one line per finished trial
    callbacks: tuple[Any, ...] = field(default=(), compare=False)  # extra Tune callbacks
    # A train size a local subset file (Parquet "subset" metadata) cannot supply: False stops
    # the sweep in pre-flight; True trains on the rows there and marks the rows data_subset.
    allow_subset: bool = False
    # Stored "ok" trials of the grid whose data fingerprint differs from the data now: one of
    # DATA_CHANGED ("stop": pre-flight error; "rerun": train them again, replacing their rows).
    data_changed: str = "stop"
    # Stored "ok" trials of the grid whose model fingerprint differs from the model's now
    # (re-saved weights at the same path): one of MODEL_CHANGED ("stop" or "rerun").
    model_changed: str = "stop"
    # Trial or epoch files that fail their checksums: False stops the sweep before any trial
    # naming them; True moves them to RESULTS/damaged/ and trains their trials again.
    rerun_damaged: bool = False
    # Trials of one pack key trained as one fused pack (reinit_tune.training.pack): a count,
    # or AUTO_PACK_SIZE. It changes no number a trial stores beyond float rounding.
    pack_size: int | str = AUTO_PACK_SIZE
    # Seeds on demand (``--seeds auto``): the grid holds ``seeds.max_seeds`` seeds per setting
    # and a group gets its next seed only while a paired contrast is wider than
    # ``seeds.target_ci`` (reinit_tune.sweep.seeds). None: every seed of the grid runs.
    seeds: SeedRule | None = None
    # Seconds a trial may go without progress (its start, an epoch) before it is ended as
    # stalled and retried (reinit_tune.sweep.stalls); None: derived from its cost estimate;
    # 0: no limit.
    trial_timeout: float | None = None

    def runtime(self, data_dir: str | None, results_dir: Path) -> TrialRuntime:
        """The trials' share of these options, with folders already resolved."""
        return TrialRuntime(
            data_dir=data_dir, checkpoint_after_s=self.checkpoint_after_s,
            similarity=self.similarity,
            models_dir=str(results_dir / "models") if self.save_model else None,
            log_every=self.log_every, evaluate=self.evaluate,
            allow_subset=self.allow_subset,
        )
