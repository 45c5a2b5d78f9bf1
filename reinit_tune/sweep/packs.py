"""Running trial packs in a sweep: which trials share a pack, how many fit a
device, and the Ray Tune trainable that trains one pack and reports each member as the trial
it stands for.

``group_packs`` cuts the trials to run into packs of up to ``--pack-size`` trials of one
``reinit_tune.training.pack.pack_key`` (probing, sequential and QA trials always alone), in
packs of even sizes; with seeds on demand a pack holds one group's trials of one seed, so a
closed group never trains on inside another's pack. ``resolve_pack_size`` turns ``auto``
into 1 on CPUs and, on GPUs, the members that fit the free memory measured on a GPU of the
cluster (``members_that_fit``; no fixed cap), at most what spreads the trials over every GPU.
``execute_pack`` is ``reinit_tune.sweep.trial.execute`` for a pack: every member's per-epoch
reports are the records its unpacked trial would report, so the store gets one row per
member under the member's own trial id, and resume, reuse and the analyses see no
difference. A pack larger than its worker's GPU holds, or one that runs out of GPU memory,
is split and its members trained in smaller packs (``PackSplit`` says so once); they are
never stored as failed for it. ``run_pack`` is the Tune trainable: one Tune trial per pack,
with the resources of one trial; each report carries the member's trial id (``MEMBER``). A
one-trial pack runs exactly the unpacked trainable (``run_trial``).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import logging
import math
import time
import traceback
from collections import deque
from collections.abc import Callable, Hashable
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
    beat_sink,
    epoch_outcome,
    failure_outcome,
    is_infrastructure_failure,
    run_trial,
    trial_data,
    worker_device,
    worker_fields,
)
from reinit_tune.training import beats
from reinit_tune.training.loop import EpochResult, TrainSetup
from reinit_tune.training.pack import pack_key, packable, train_pack
from reinit_tune.wording import counted

log = logging.getLogger("reinit_tune")

# The report field that names which member of a pack a record belongs to.
MEMBER = "pack_member"
# The report field of the first record after a pack was split (its text, said once).
SPLIT = "pack_split"
# Share of the free GPU memory ``auto`` plans to fill (allocator fragmentation, CUDA context
# growth, evaluation batches).
MEMORY_HEADROOM = 0.8
DEFAULT_VOCAB = 30522  # BERT's; the estimate's embedding term only
# How long the driver waits for a GPU of the cluster to report its free memory.
PROBE_TIMEOUT_S = 60.0
# GPU memory in GB (vendor datasheets) by the name a node type gives its GPUs (Ray's
# ``accelerator_type`` resource, or a cloud instance type's family): what ``--pack-size
# auto`` plans for before any GPU of an autoscaling cluster is up. Longer names first.
GPU_MEMORY_GB = {
    "H200": 141, "H100": 80, "A100-80G": 80, "A100": 40, "L40S": 48, "A10G": 24, "L4": 24,
    "A10": 24, "V100": 16, "T4": 16,
    # instance families (AWS, GCP)
    "p5e": 141, "p5": 80, "p4de": 80, "p4d": 40, "g6e": 48, "g6": 24, "g5": 24, "g4dn": 16,
    "a3-": 80, "a2-ultragpu": 80, "a2-": 40, "g2-": 24,
}


def group_packs(configs: list[TrialConfig], size: int,
                split: Callable[[TrialConfig], Hashable] | None = None
                ) -> list[list[TrialConfig]]:
    """``configs`` in packs of up to ``size`` trials sharing a ``pack_key`` (and, with
    ``split``, its value), in the order their keys first appear (so a sweep's first results
    come when they would unpacked); a key's trials are cut into packs of even sizes (27 at
    size 13: 9, 9, 9, not 13, 13, 1)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InputError(f"--pack-size: must be a positive integer or 'auto', got {size!r}")
    by_key: dict[tuple, list[TrialConfig]] = {}
    for config in configs:
        key = (pack_key(config), None if split is None else split(config))
        by_key.setdefault(key, []).append(config)
    return [pack for group in by_key.values()
            for pack in even_split(group, math.ceil(len(group) / size))]


def pack_id(members: list[TrialConfig]) -> str:
    """The Tune grid value of a pack: a one-trial pack is its trial's id (so a sweep run with
    ``--pack-size 1`` names its Tune trials as before); a larger one hashes its members'."""
    if len(members) == 1:
        return members[0].trial_id
    blob = ",".join(c.trial_id for c in members)
    return "pack-" + hashlib.sha256(blob.encode()).hexdigest()[:11]


def plan_packs(todo: list[TrialConfig], size: int, trial_axes: dict[str, dict[str, Any]],
               split: Callable[[TrialConfig], Hashable] | None = None
               ) -> tuple[dict[str, list[TrialConfig]], dict[str, dict[str, Any]]]:
    """The packs of ``todo`` by ``pack_id``, and each pack's axes for Tune's grid (a
    one-trial pack: its trial's axes, so ``--pack-size 1`` shows what it always showed; a
    larger one: its first member's, with ``pack_members``)."""
    packs = {pack_id(members): members for members in group_packs(todo, size, split)}
    grid = {pid: (trial_axes[members[0].trial_id] if len(members) == 1 else
                  {**trial_axes[members[0].trial_id], "pack_members": len(members)})
            for pid, members in packs.items()}
    return packs, grid


def member_bytes(shape: ModelShape, batch_size: int, max_seq_length: int,
                 vocab_size: int = DEFAULT_VOCAB, bf16: bool = True) -> int:
    """Estimated GPU memory of one member of a pack (``reinit_tune.training.pack``): fp32
    weights, two AdamW moments and the gradient (16 bytes per parameter), autocast's bf16
    copies of the weights (2 more, with ``bf16``), and the activations a step keeps for its
    backward pass (Korthikanti et al. 2022: s·b·h·(34 + 5·a·s/h) bytes per layer in 16 bits,
    at the longest sequence). Measured on an H200 (``benchmarks/RESULTS.md``): a bert-base
    member of a 28-member pack peaked at 0.98 of this at 8 x 128 tokens and 0.84 on SST-2's
    batches; a pack that does not fit after all is split (``execute_pack``)."""
    h = shape.hidden_size or 768
    heads = shape.num_heads or max(1, h // 64)
    params = shape.parameter_count(vocab_size)
    s, b = max_seq_length, batch_size
    activations = shape.num_layers * s * b * h * (34 + 5 * heads * s / h)
    return int((18 if bf16 else 16) * params + activations)


def members_that_fit(free_bytes: int, shape: ModelShape, batch_size: int,
                     max_seq_length: int, bf16: bool = True) -> int:
    """How many members a pack may hold on a GPU with ``free_bytes`` free (at least 1)."""
    each = member_bytes(shape, batch_size, max_seq_length, bf16=bf16)
    return max(1, int(free_bytes * MEMORY_HEADROOM // each))


def fit_configs(configs: list[TrialConfig], shapes: dict[str, ModelShape],
                free_bytes: int) -> int:
    """``members_that_fit`` for the largest member of ``configs``."""
    return min((members_that_fit(free_bytes, shapes[c.model], c.batch_size, c.max_seq_length,
                                 c.precision == "bf16")
                for c in configs if c.model in shapes and shapes[c.model].hidden_size),
               default=1)


def gpu_memory(name: str) -> int | None:
    """Bytes of memory of the GPU ``name`` names (``GPU_MEMORY_GB``), or None."""
    for key, gb in GPU_MEMORY_GB.items():
        if key.lower() in name.lower():
            return gb * 10**9
    return None


def planned_free_bytes(names: list[str]) -> tuple[int, str]:
    """The free memory packs are planned for where no GPU of the cluster can measure its
    own: the smallest of the GPUs ``names`` names, else the recorded cost table's GPU; and
    which it is."""
    from reinit_tune.sweep import cost

    known = sorted((gpu_memory(n), n) for n in names if gpu_memory(n))
    if known:
        size, name = known[0]
        return int(size * 0.97), f"a {name}'s memory, as its node type names it"
    return cost.RECORDED_GPU_FREE, (f"an {cost.RECORDED_GPU_DEVICE}'s memory (no node type "
                                    "names its GPU)")


def resolve_pack_size(pack_size: int | str, configs: list[TrialConfig],
                      shapes: dict[str, ModelShape], gpus_per_trial: float,
                      free_bytes: Callable[[], int | None] | None = None,
                      gpus: float = 1.0, gpu_types: Callable[[], list[str]] | None = None
                      ) -> int:
    """``--pack-size`` as a number. ``auto``: 1 when trials run on CPUs (a pack is no faster
    there: ``benchmarks/RESULTS.md``); on GPUs, what fits the free memory of the trial's
    share of one (``free_bytes``: measured on a GPU of the cluster) for the largest member of
    ``configs``, and no more than spreads the packable trials over the cluster's ``gpus``.
    Where no GPU can measure (an autoscaling cluster starts its GPU nodes only once trials
    queue; every GPU busy), the packs are planned for the memory of the GPU the cluster's
    node types name (``gpu_types``), else the recorded table's, and said so: a worker whose
    GPU holds fewer trains its pack in parts (``execute_pack``)."""
    if pack_size != "auto":
        return int(pack_size)
    if gpus_per_trial <= 0 or not configs:
        return 1
    free = (free_bytes or gpu_free_bytes)()
    planned = None
    if free is None:
        from reinit_tune.sweep.cluster import scalable_gpu_types

        free, planned = planned_free_bytes((gpu_types or scalable_gpu_types)())
    fit = fit_configs(configs, shapes, int(free * min(1.0, gpus_per_trial)))
    slots = max(1, int(gpus / gpus_per_trial))
    packable_trials = sum(packable(c) for c in configs)
    size = max(1, min(fit, math.ceil(packable_trials / slots)))
    if planned is not None:
        log.warning("--pack-size auto: no GPU of the cluster could measure its free memory; "
                    "packs of up to %s planned for %s; a worker whose GPU holds fewer trains "
                    "its pack in parts (--pack-size N sets the size)",
                    counted(size, "trial"), planned)
    return size


def cuda_free_bytes() -> int | None:
    """Free memory of this process's current GPU, or None without one."""
    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.mem_get_info()[0])


def gpu_free_bytes(timeout_s: float = PROBE_TIMEOUT_S) -> int | None:
    """Free memory of a GPU the sweep's trials will run on: this machine's, else (a Ray
    cluster whose GPUs are on other nodes, as ``ray up`` makes it) one GPU's, measured by a
    task placed there; None where no GPU answers within ``timeout_s``."""
    here = cuda_free_bytes()
    if here is not None:
        return here
    import ray

    if not ray.is_initialized() or ray.cluster_resources().get("GPU", 0) <= 0:
        return None  # no GPU node up yet (an autoscaler starts them as trials queue)
    # max_calls=1: the worker exits after it, taking its CUDA context off the GPU
    probe = ray.remote(num_gpus=0.01, num_cpus=0, max_calls=1)(cuda_free_bytes).remote()
    try:
        return ray.get(probe, timeout=timeout_s)
    except Exception as e:  # noqa: BLE001 - no GPU free in time: the sweep runs unpacked
        ray.cancel(probe, force=True)
        log.warning("no GPU of the cluster reported its free memory within %.0f s (%s: "
                    "every GPU busy?)", timeout_s, type(e).__name__)
        return None


def even_split(members: list[TrialConfig], parts: int) -> list[list[TrialConfig]]:
    """``members`` in ``parts`` packs, in order, whose sizes differ by at most one."""
    small, extra = divmod(len(members), parts)
    bounds = [0]
    for i in range(parts):
        bounds.append(bounds[-1] + small + (i < extra))
    return [members[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def worker_fit(configs: list[TrialConfig], use_gpu: bool) -> int:
    """How many of ``configs`` one pack may hold on this worker's GPU (its free memory,
    measured now), or all of them off GPUs."""
    free = cuda_free_bytes() if use_gpu else None
    if free is None:
        return len(configs)
    from reinit_tune.model.shape import model_shape

    shapes = {m: model_shape(m) for m in {c.model for c in configs}}
    return fit_configs(configs, shapes, free)


def execute_pack(
    configs: list[TrialConfig],
    *,
    data_dir: str | None = None,
    use_gpu: bool = True,
    report: Callable[[str, TrialOutcome], None] | None = None,
    log_every: int = 0,
    every_epoch: bool = True,
    allow_subset: bool = False,
    on_split: Callable[[str], None] | None = None,
) -> dict[str, tuple[list[dict[str, Any]], str | None]]:
    """Train ``configs`` (one ``pack_key``) as one pack; return, per trial id, the per-epoch
    reports its unpacked ``execute`` would return and the error it would have raised (None
    when it finished). ``report(trial_id, outcome)`` gets each epoch's outcome as it comes.

    A pack larger than this worker's GPU holds (``worker_fit``) trains as several smaller
    packs one after another; a pack that runs out of GPU memory is split in two and both
    halves train anew, reporting every epoch again: each outcome carries the pack it trained
    in (``pack_size``) and how it came to be (``pack_history``), and a member's stored epochs
    are all from that one run (the store's writer replaces the earlier run's). ``on_split``
    is told each split in a sentence."""
    fit = worker_fit(configs, use_gpu)
    queue = deque((chunk, None) for chunk in even_split(configs, math.ceil(len(configs) / fit)))
    if len(queue) > 1:
        why = (f"a pack of {len(configs)} trials is more than this GPU's free memory holds "
               f"({fit}); trained as {len(queue)} packs of up to {len(queue[0][0])}")
        queue = deque((chunk, why) for chunk, _ in queue)
        if on_split is not None:
            on_split(why)
    results: dict[str, tuple[list[dict[str, Any]], str | None]] = {}
    while queue:
        chunk, history = queue.popleft()
        out_of_memory = False
        try:
            results.update(_train(chunk, data_dir, use_gpu, report, history, log_every,
                                  every_epoch, allow_subset))
        except torch.cuda.OutOfMemoryError:
            if len(chunk) == 1:
                raise  # an infrastructure failure: Tune retries the trial
            out_of_memory = True
        if out_of_memory:  # outside the handler: its traceback held the pack's tensors
            gc.collect()
            torch.cuda.empty_cache()
            halves = even_split(chunk, 2)
            why = (f"a pack of {len(chunk)} trials ran out of GPU memory; trained as packs of "
                   f"{' and '.join(str(len(h)) for h in halves)}")
            history = why if history is None else f"{history}; {why}"
            queue.extendleft(reversed([(half, history) for half in halves]))
            if on_split is not None:
                on_split(why)
    return results


def _train(configs: list[TrialConfig], data_dir: str | None, use_gpu: bool,
           report: Callable[[str, TrialOutcome], None] | None, history: str | None,
           log_every: int, every_epoch: bool, allow_subset: bool
           ) -> dict[str, tuple[list[dict[str, Any]], str | None]]:
    """``execute_pack`` of one pack that fits."""
    start = time.perf_counter()
    memory_start = cuda_memory_start(use_gpu)
    data = {}  # seed -> (train subset, dev splits, provenance): each seed's own data
    for config in configs:
        if config.seed not in data:
            data[config.seed] = trial_data(config, data_dir, allow_subset)
    devs = data[configs[0].seed][1]
    first = build_model(configs[0])
    num_layers = len(layer_stack(first))
    data_s = time.perf_counter() - start
    outcomes: dict[str, TrialOutcome] = {}
    bases: dict[str, TrialOutcome] = {}

    def on_epoch(i: int, result: EpochResult, setup: TrainSetup) -> None:
        config = configs[i]
        if config.trial_id not in bases:
            bases[config.trial_id] = outcomes[config.trial_id] = TrialOutcome(
                config.trial_id, num_layers=num_layers,
                setup_time_s=(data_s + setup.setup_s) / len(configs), resumed_from_epoch=0,
                gpu_memory_start_bytes=memory_start, pack_size=len(configs),
                pack_history=history, **data[config.seed][2])
        outcome = epoch_outcome(bases[config.trial_id], config, result, setup)
        outcomes[config.trial_id] = outcomes[config.trial_id].then(outcome)
        if report is not None:
            report(config.trial_id, outcome)

    models = _built(first, configs[1:])
    del first  # the pack copies each member in: one model at a time outside it
    members, _ = train_pack(models, configs, {s: d[0] for s, d in data.items()}, devs,
                            use_gpu=use_gpu, on_epoch=on_epoch, log_every=log_every,
                            every_epoch=every_epoch)
    return {c.trial_id: (outcomes[c.trial_id].reports() if c.trial_id in outcomes else [],
                         m.error) for c, m in zip(configs, members, strict=True)}


def _built(first, rest: list[TrialConfig]):
    yield first
    for config in rest:
        yield build_model(config)


def run_pack(params: dict[str, Any], packs: dict[str, list[TrialConfig]],
             runtime: TrialRuntime, claims: Context | None = None) -> None:
    """Ray Tune function trainable of a pack: ``params["trial"]["trial_id"]`` picks the pack
    from ``packs``. A one-trial pack is ``run_trial`` (checkpoints, similarity and all).
    Each member's outcomes are reported (``TrialOutcome.tune_metrics``) with ``MEMBER`` set
    to its trial id; a member that diverged reports a diverged outcome; the first report
    after the pack was split carries why (``SPLIT``). Infrastructure failures propagate
    (Tune retries the whole pack from scratch: packs do not checkpoint); any other error
    fails every member that had not finished, as ``run_trial`` reports it. With ``claims``,
    members another driver holds or stored report ``SKIPPED`` and the pack trains the
    rest."""
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
    notes: list[str] = []

    def report(trial_id: str, outcome: TrialOutcome) -> None:
        metrics = {**dataclasses.replace(outcome, **worker).tune_metrics(), MEMBER: trial_id}
        if notes:
            metrics[SPLIT] = "; ".join(notes)
            notes.clear()
        tune.report(metrics)

    for trial_id, why in skipped.items():
        report(trial_id, TrialOutcome(trial_id, Status.SKIPPED, error=why))
    members = [c for c in members if c.trial_id not in skipped]
    if not members:
        return

    try:
        with beats.sending_to(beat_sink(runtime, params["trial"]["trial_id"])):
            results = execute_pack(
                members, data_dir=runtime.data_dir, use_gpu=worker_device(assigned),
                report=report, log_every=runtime.log_every,
                every_epoch=runtime.evaluate == "every-epoch",
                allow_subset=runtime.allow_subset, on_split=notes.append)
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
        return ("--pack-size: --similarity and --save-model need each trial's own model; "
                "running unpacked, one trial a GPU: about 5x the GPU time of full packs "
                "(benchmarks/RESULTS.md)")
    return None

