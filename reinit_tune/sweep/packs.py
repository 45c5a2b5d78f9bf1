"""Running trial packs in a sweep: which trials share a pack, how many fit a
device, and the Ray Tune trainable that trains one pack and reports each member as the trial
it stands for.

``group_packs`` cuts the trials to run into packs of up to ``--pack-size`` trials of one
``reinit_tune.training.pack.pack_key`` (probing, sequential and QA trials always alone);
``resolve_pack_size`` turns ``auto`` into 1 on CPUs and, on a GPU, the members that fit its
free memory (``members_that_fit``). ``execute_pack`` is ``reinit_tune.sweep.trial.execute``
for a pack: every member's per-epoch reports are the records its unpacked trial would
report, so the store gets one row per member under the member's own trial id, and resume,
reuse and the analyses see no difference. ``run_pack`` is the Tune trainable: one Tune trial
per pack, with the resources of one trial; each report carries the member's trial id
(``MEMBER``). A one-trial pack runs exactly the unpacked trainable (``run_trial``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.hardware import cuda_memory_start
from reinit_tune.model.build import build_model
from reinit_tune.model.shape import ModelShape
from reinit_tune.model.surgery import layer_stack
from reinit_tune.outcome import Status, TrialOutcome
from reinit_tune.sweep.claims import Context, begin
from reinit_tune.sweep.options import TrialRuntime
from reinit_tune.sweep.trial import (
    epoch_outcome,
    failure_outcome,
    is_infrastructure_failure,
    run_trial,
    trial_data,
    worker_fields,
)
from reinit_tune.training.loop import EpochResult, TrainSetup
from reinit_tune.training.pack import pack_key, train_pack

# The report field that names which member of a pack a record belongs to.
MEMBER = "pack_member"
# ``--pack-size auto`` on a GPU never packs more than this: past a dozen members a step is
# compute-bound and a bigger pack only delays the first results.
MAX_AUTO_PACK = 16
# Share of the free GPU memory ``auto`` plans to fill (allocator fragmentation, CUDA context
# growth, evaluation batches).
MEMORY_HEADROOM = 0.8
DEFAULT_VOCAB = 30522  # BERT's; the estimate's embedding term only


def group_packs(configs: list[TrialConfig], size: int) -> list[list[TrialConfig]]:
    """``configs`` in packs of up to ``size`` trials sharing a ``pack_key``, in the order
    their keys first appear (so a sweep's first results come when they would unpacked)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InputError(f"--pack-size: must be a positive integer or 'auto', got {size!r}")
    by_key: dict[tuple, list[TrialConfig]] = {}
    for config in configs:
        by_key.setdefault(pack_key(config), []).append(config)
    return [group[i : i + size] for group in by_key.values()
            for i in range(0, len(group), size)]


def pack_id(members: list[TrialConfig]) -> str:
    """The Tune grid value of a pack: a one-trial pack is its trial's id (so a sweep run with
    ``--pack-size 1`` names its Tune trials as before); a larger one hashes its members'."""
    if len(members) == 1:
        return members[0].trial_id
    blob = ",".join(c.trial_id for c in members)
    return "pack-" + hashlib.sha256(blob.encode()).hexdigest()[:11]


def plan_packs(todo: list[TrialConfig], size: int, trial_axes: dict[str, dict[str, Any]]
               ) -> tuple[dict[str, list[TrialConfig]], dict[str, dict[str, Any]]]:
    """The packs of ``todo`` by ``pack_id``, and each pack's axes for Tune's grid (a
    one-trial pack: its trial's axes, so ``--pack-size 1`` shows what it always showed; a
    larger one: its first member's, with ``pack_members``)."""
    packs = {pack_id(members): members for members in group_packs(todo, size)}
    grid = {pid: (trial_axes[members[0].trial_id] if len(members) == 1 else
                  {**trial_axes[members[0].trial_id], "pack_members": len(members)})
            for pid, members in packs.items()}
    return packs, grid


def member_bytes(shape: ModelShape, batch_size: int, max_seq_length: int,
                 vocab_size: int = DEFAULT_VOCAB) -> int:
    """Estimated GPU memory of one fp32 member: weights, gradients and two AdamW moments (16
    bytes per parameter) plus the activations a step keeps for its backward pass
    (Korthikanti et al. 2022: s·b·h·(34 + 5·a·s/h) bytes per layer in 16 bits; doubled for
    fp32, at the longest sequence)."""
    h = shape.hidden_size or 768
    heads = shape.num_heads or max(1, h // 64)
    params = shape.parameter_count(vocab_size)
    s, b = max_seq_length, batch_size
    activations = 2 * shape.num_layers * s * b * h * (34 + 5 * heads * s / h)
    return int(16 * params + activations)


def members_that_fit(free_bytes: int, shape: ModelShape, batch_size: int,
                     max_seq_length: int) -> int:
    """How many members ``auto`` packs on a GPU with ``free_bytes`` free (at least 1, at
    most ``MAX_AUTO_PACK``)."""
    each = member_bytes(shape, batch_size, max_seq_length)
    return max(1, min(MAX_AUTO_PACK, int(free_bytes * MEMORY_HEADROOM // each)))


def resolve_pack_size(pack_size: int | str, configs: list[TrialConfig],
                      shapes: dict[str, ModelShape], gpus_per_trial: float,
                      free_bytes: Callable[[], int | None] | None = None) -> int:
    """``--pack-size`` as a number. ``auto``: 1 when trials run on CPUs (a pack is no faster
    there: ``benchmarks/RESULTS.md``) or no GPU is visible here to measure; on a GPU, what
    fits the free memory of the trial's share of it for the largest member in ``configs``."""
    if pack_size != "auto":
        return int(pack_size)
    if gpus_per_trial <= 0 or not configs:
        return 1
    free = (free_bytes or cuda_free_bytes)()
    if free is None:
        return 1
    free = int(free * min(1.0, gpus_per_trial))
    return min(members_that_fit(free, shapes[c.model], c.batch_size, c.max_seq_length)
               for c in configs if c.model in shapes and shapes[c.model].hidden_size)


def cuda_free_bytes() -> int | None:
    """Free memory of this machine's first GPU, or None without one."""
    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.mem_get_info(0)[0])


def execute_pack(
    configs: list[TrialConfig],
    *,
    data_dir: str | None = None,
    use_gpu: bool = True,
    report: Callable[[str, TrialOutcome], None] | None = None,
    log_every: int = 0,
    every_epoch: bool = True,
    allow_subset: bool = False,
) -> dict[str, tuple[list[dict[str, Any]], str | None]]:
    """Train ``configs`` (one ``pack_key``) as one pack; return, per trial id, the per-epoch
    reports its unpacked ``execute`` would return and the error it would have raised (None
    when it finished). ``report(trial_id, outcome)`` gets each epoch's outcome as it comes."""
    first = configs[0]
    start = time.perf_counter()
    memory_start = cuda_memory_start(use_gpu)
    train, devs, provenance = trial_data(first, data_dir, allow_subset)
    models = [build_model(c) for c in configs]
    num_layers = len(layer_stack(models[0]))
    setup_time = (time.perf_counter() - start) / len(configs)
    outcomes = {c.trial_id: TrialOutcome(c.trial_id, num_layers=num_layers,
                                         setup_time_s=setup_time, resumed_from_epoch=0,
                                         gpu_memory_start_bytes=memory_start, **provenance)
                for c in configs}
    bases = dict(outcomes)

    def on_epoch(i: int, result: EpochResult, setup: TrainSetup) -> None:
        config = configs[i]
        outcome = epoch_outcome(bases[config.trial_id], config, result, setup)
        outcomes[config.trial_id] = outcomes[config.trial_id].then(outcome)
        if report is not None:
            report(config.trial_id, outcome)

    members, _ = train_pack(models, configs, train, devs, use_gpu=use_gpu, on_epoch=on_epoch,
                            log_every=log_every, every_epoch=every_epoch)
    return {c.trial_id: (outcomes[c.trial_id].reports(), m.error)
            for c, m in zip(configs, members, strict=True)}


def run_pack(params: dict[str, Any], packs: dict[str, list[TrialConfig]],
             runtime: TrialRuntime, claims: Context | None = None) -> None:
    """Ray Tune function trainable of a pack: ``params["trial"]["trial_id"]`` picks the pack
    from ``packs``. A one-trial pack is ``run_trial`` (checkpoints, similarity and all).
    Each member's outcomes are reported (``TrialOutcome.tune_metrics``) with ``MEMBER`` set
    to its trial id; a member that diverged reports a diverged outcome. Infrastructure failures
    propagate (Tune retries the whole pack from scratch: packs do not checkpoint); any other
    error fails every member that had not finished, as ``run_trial`` reports it. With
    ``claims``, members another driver holds or stored report ``SKIPPED`` and the pack
    trains the rest."""
    members = packs[params["trial"]["trial_id"]]
    if len(members) == 1:
        run_trial(params, {params["trial"]["trial_id"]: members[0]}, runtime, claims)
        return
    import datasets
    import ray
    from ray import tune
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    context = ray.get_runtime_context()
    assigned = context.get_assigned_resources()
    torch.set_num_threads(max(1, int(assigned.get("CPU", 1))))
    worker = worker_fields()
    done: set[str] = set()
    skipped = {c.trial_id: why for c in members
               if (why := begin(claims, c.trial_id)) is not None}

    def report(trial_id: str, outcome: TrialOutcome) -> None:
        tune.report({**dataclasses.replace(outcome, **worker).tune_metrics(),
                     MEMBER: trial_id})

    for trial_id, why in skipped.items():
        report(trial_id, TrialOutcome(trial_id, Status.SKIPPED, error=why))
    members = [c for c in members if c.trial_id not in skipped]
    if not members:
        return

    try:
        results = execute_pack(
            members, data_dir=runtime.data_dir, use_gpu=assigned.get("GPU", 0) > 0,
            report=report, log_every=runtime.log_every,
            every_epoch=runtime.evaluate == "every-epoch", allow_subset=runtime.allow_subset)
        for trial_id, (_, error) in results.items():
            done.add(trial_id)
            if error is not None:  # it diverged (``train_pack``)
                report(trial_id, TrialOutcome(trial_id, Status.DIVERGED, error=error))
    except Exception as e:  # noqa: BLE001 - sorted by kind just below
        if is_infrastructure_failure(e):
            raise
        traceback.print_exc()
        for config in members:
            if config.trial_id not in done:
                report(config.trial_id, failure_outcome(config.trial_id, e))


def pack_note(pack_size: int, runtime: TrialRuntime) -> str | None:
    """Why a sweep asked for packs runs unpacked, or None (packs cannot save models or
    measure similarity: those read one finetuned model)."""
    if pack_size > 1 and (runtime.similarity is not None or runtime.models_dir):
        return "--pack-size: --similarity and --save-model need each trial's own model; " \
               "running unpacked"
    return None

