"""One trial: build the model from its ``TrialConfig``, train it, report every epoch.

The config picks the mode: finetuning (optionally after an intermediate task, 001 Exp 1) or a
linear probe on a frozen layer (003 §3).

``run_trial`` is the Ray Tune function trainable; ``execute`` does the same work without Ray
(tests, benchmarks, debugging one config). Each epoch is reported as the trial's
``reinit_tune.outcome.TrialOutcome``, which the driver writes to the store
(``reinit_tune.sweep.writer.StoreWriter``).

Long trials checkpoint: an epoch that took at least ``checkpoint_after_s`` seconds (and is
not the last) is reported with a Tune checkpoint of the full training state, so a trial whose
worker dies (a preempted node) is retried by Tune from its last checkpointed epoch instead of
from scratch. Short trials skip checkpoints: rerunning them costs less than writing them.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import os
import platform
import shutil
import socket
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import accelerate
import torch
import transformers

import reinit_tune
from reinit_tune import data, metrics, qa
from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError, TrialDiverged
from reinit_tune.hardware import cuda_memory_peak, cuda_memory_start
from reinit_tune.model.build import build_model, load_pretrained
from reinit_tune.model.fingerprint import model_fingerprint
from reinit_tune.model.surgery import layer_stack
from reinit_tune.outcome import EpochRecord, Status, TrialOutcome
from reinit_tune.similarity.layers import (
    BATCH_SIZE,
    compare_models,
    json_safe,
    pretrained_distances,
)
from reinit_tune.sweep.claims import Context, begin
from reinit_tune.sweep.options import SimilarityOptions, TrialRuntime
from reinit_tune.tasks import get_task
from reinit_tune.training import beats, sequential
from reinit_tune.training.finetune import finetune_config
from reinit_tune.training.loop import EpochResult, Optimization, TrainSetup
from reinit_tune.training.probe import train_probe

STATE_FILE = "train_state.pt"


def library_versions() -> str:
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "accelerate": accelerate.__version__,
        "reinit_tune": reinit_tune.__version__,
    }
    try:
        import ray

        versions["ray"] = ray.__version__
    except ImportError:  # execute() without Ray installed
        pass
    return json.dumps(versions, sort_keys=True)


def epoch_outcome(base: TrialOutcome, config: TrialConfig, result: EpochResult,
                  setup: TrainSetup, similarity: tuple = ()) -> TrialOutcome:
    """``base`` (the trial's outcome before any epoch) with the one epoch ``result``: what
    the worker reports after each epoch."""
    record = EpochRecord(
        epoch=result.epoch,
        train_loss=result.train_loss,
        eval_loss=result.eval_loss if result.metrics else None,  # None: not evaluated
        score=result.metrics.get(config.task_spec.primary),
        metrics=dict(result.metrics),
        train_time_s=result.train_time_s,
        eval_time_s=result.eval_time_s,
        train_examples_per_s=result.train_examples_per_s,
        train_examples=result.train_examples,
        device=setup.device,
        precision_used=setup.precision,
        steps=tuple(tuple(s) for s in result.steps or ()),
    )
    return dataclasses.replace(base, epochs=(record,), similarity=similarity,
                               gpu_memory_peak_bytes=cuda_memory_peak(setup.device))


def worker_fields() -> dict[str, Any]:
    """What a trial's outcome records of the Ray worker that ran it."""
    import ray

    return {"node_id": ray.get_runtime_context().get_node_id(),
            "hostname": socket.gethostname(), "versions": library_versions(),
            "worker_pid": os.getpid()}


def failure_outcome(trial_id: str, error: BaseException, **worker: Any) -> TrialOutcome:
    """The outcome of a trial that raised ``error`` (not an infrastructure failure)."""
    status = Status.DIVERGED if isinstance(error, TrialDiverged) else Status.FAILED
    return TrialOutcome(trial_id, status, error=failure_text(error), **worker)


def wants_checkpoint(result: EpochResult, epochs: int, checkpoint_after_s: float) -> bool:
    """Checkpoint after an epoch that took ``checkpoint_after_s`` or longer, unless it was the
    last one (a finished trial is stored, never resumed)."""
    return result.epoch < epochs and result.train_time_s + result.eval_time_s >= checkpoint_after_s


def trial_data(config: TrialConfig, data_dir: str | None, allow_subset: bool
               ) -> tuple[data.Encoded, dict[str, data.Encoded], dict[str, Any]]:
    """The seeded train subset and dev splits of ``config`` (``data.TrialData``, found once)
    and what every report of the trial records about its data: whether a subset file held
    fewer examples than the size asks (``data_subset``), the data's fingerprint and source,
    the model's fingerprint, and the scores of not learning on the primary dev split
    (``majority_score``, ``chance_score``)."""
    found = data.TrialData.of(config, data_dir, allow_subset)
    train, devs = found.load(config.model, config.max_seq_length)
    fingerprint, source = found.identity()
    majority, chance = reference_scores(config.task, next(iter(devs.values())))
    # The intermediate phase trains at the trial's size too: a subset there counts alike.
    return train, devs, {"data_subset": found.short(train.num_examples),
                         "data_fingerprint": fingerprint, "data_source": source,
                         "majority_score": majority, "chance_score": chance,
                         "model_fingerprint": model_fingerprint(config.model)}


def execute(
    config: TrialConfig,
    *,
    data_dir: str | None = None,
    use_gpu: bool = True,
    report: Callable[[TrialOutcome, dict | None], None] | None = None,
    resume: dict | None = None,
    checkpoint_after_s: float = math.inf,
    similarity: SimilarityOptions | None = None,
    model_dir: str | None = None,
    log_every: int = 0,
    every_epoch: bool = True,
    allow_subset: bool = False,
) -> list[dict[str, Any]]:
    """Run one trial and return its per-epoch reports (``TrialOutcome.reports``).

    Each epoch's outcome (``epoch_outcome``) goes to ``report(outcome, state)``; ``state`` is
    the resumable training state (``reinit_tune.training.loop.training_state``) when
    ``wants_checkpoint`` says so, else None. ``resume`` continues from such a state: only the
    epochs after it run and are returned. With ``similarity`` the final epoch's outcome
    carries its ``similarity`` rows (one per layer, ``reinit_tune.similarity.layers``); with
    ``model_dir`` the finetuned model and its tokenizer are saved there
    (``save_pretrained``). With ``log_every`` each epoch carries ``steps``: (step, loss, lr)
    of every log_every-th step of its epoch.
    ``every_epoch=False`` scores the dev split after the last epoch only. ``allow_subset``
    trains on all of a subset train file where it holds fewer examples than the size asks
    of the official split (else ``data.SubsetError``); every report says whether it did
    (``data_subset``), which data the trial saw (``data_fingerprint``, ``data_source``) and
    which weights (``model_fingerprint``).
    """
    start = time.perf_counter()
    memory_start = cuda_memory_start(use_gpu)
    train, devs, provenance = trial_data(config, data_dir, allow_subset)
    beats.beat()
    dev = next(iter(devs.values()))  # the primary dev split: what similarity compares on
    if config.intermediate_task is not None:
        model = sequential.build_final_model(config, data_dir=data_dir, use_gpu=use_gpu,
                                             allow_subset=allow_subset)
    else:
        model = build_model(config)
    beats.beat()
    num_layers = len(layer_stack(model))
    reference = copy.deepcopy(model) if similarity is not None else None
    setup_time = time.perf_counter() - start
    base = TrialOutcome(config.trial_id, num_layers=num_layers, setup_time_s=setup_time,
                        pack_size=1,
                        resumed_from_epoch=resume["epoch"] if resume else 0,
                        gpu_memory_start_bytes=memory_start, **provenance)
    reported: list[TrialOutcome] = []

    def on_epoch(result: EpochResult, setup: TrainSetup) -> None:
        rows = ()
        if result.epoch == config.epochs:  # the model is final: measure and save it now
            if reference is not None:
                rows = final_similarity(model, reference, dev, similarity)
                from_pretrained = pretrained_distances(
                    model, load_pretrained(config.model, config.task))
                for row in rows:
                    row["w_output_spectral_pretrained"] = from_pretrained.get(row["layer"])
            if model_dir is not None:
                save_model(model, config.model, model_dir)
        outcome = epoch_outcome(base, config, result, setup, tuple(rows))
        reported.append(outcome)
        if report is not None:
            checkpoint = wants_checkpoint(result, config.epochs, checkpoint_after_s)
            report(outcome, setup.state() if checkpoint and setup.state else None)

    run = dict(use_gpu=use_gpu, on_epoch=on_epoch, resume=resume, log_every=log_every,
               every_epoch=every_epoch)
    if config.probe_layer is not None:
        train_probe(model, train, devs, layer=config.probe_layer, task=config.task,
                    opt=Optimization.of(config), **run)
    else:
        finetune_config(model, train, devs, config, **run)
    return functools.reduce(TrialOutcome.then, reported, base).reports()


def reference_scores(task: str, dev: data.Encoded) -> tuple[float, float | None]:
    """The primary metric of predicting the majority class (for QA: no answer) on ``dev``,
    and of random guessing (None where undefined: QA)."""
    if dev.examples is not None:
        no_answer = {qid: "" for qid in dev.examples.ids}
        gold = dict(zip(dev.examples.ids, dev.examples.answers, strict=True))
        return qa.squad_v2_scores(no_answer, gold)[get_task(task).primary], None
    return metrics.reference_scores(task, dev.labels)


def final_similarity(model, reference, dev: data.Encoded, options: SimilarityOptions) -> list:
    """``compare_models`` on the first ``options.examples`` dev examples, length-batched."""
    n = len(dev) if options.examples is None else min(options.examples, len(dev))
    subset = dev.select(range(n))
    order = sorted(range(n), key=lambda i: len(subset.input_ids[i]))
    batches = (subset.collate(order[i : i + BATCH_SIZE]) for i in range(0, n, BATCH_SIZE))
    return json_safe(compare_models(model, reference, batches,
                                    layer_replacement=options.layer_replacement))


def save_model(model, model_name: str, path: str) -> None:
    """``save_pretrained`` the model and tokenizer to ``path``, atomically (a crash leaves
    no half-written folder; a re-run replaces an earlier save)."""
    dest = os.path.abspath(path)
    tmp = os.path.join(os.path.dirname(dest), f".{os.path.basename(dest)}.{uuid.uuid4().hex}")
    try:
        model.save_pretrained(tmp)
        data.load_tokenizer(model_name).save_pretrained(tmp)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def save_state(state: dict, folder: str | Path) -> None:
    torch.save(state, Path(folder) / STATE_FILE)


def load_state(folder: str | Path) -> dict:
    return torch.load(Path(folder) / STATE_FILE, map_location="cpu", weights_only=True)


# Failures that a retry can cure: a lost node or worker, a flaky network or filesystem, a GPU
# or host whose memory another trial held at that moment (a worker Ray's memory monitor kills
# never gets here: the driver sees ray.exceptions.OutOfMemoryError, reinit_tune.sweep.memory).
_TRANSIENT = (ConnectionError, TimeoutError, MemoryError, torch.cuda.OutOfMemoryError)


def worker_device(assigned: Mapping[str, float]) -> bool:
    """Whether this Ray worker trains on a GPU: where Ray gave it one. A worker given a GPU
    whose PyTorch cannot use CUDA (a CPU-only build on one node, a driver that does not
    match) would train a GPU-sized pack on its CPUs: refused in one line naming the node,
    stored as the trial's error."""
    gpus = assigned.get("GPU", 0)
    if gpus <= 0:
        return False
    if torch.cuda.is_available():
        return True
    why = ("its PyTorch is built without CUDA" if torch.version.cuda is None else
           f"its PyTorch (CUDA {torch.version.cuda}) sees no CUDA device: no driver, or one "
           "too old for it")
    try:
        import ray

        where = f"{socket.gethostname()} ({ray.util.get_node_ip_address()})"
    except Exception:  # noqa: BLE001 - outside Ray: the host name says enough
        where = socket.gethostname()
    raise InputError(f"node {where} was given {gpus:g} GPU by Ray, but {why}; install a "
                     "CUDA build of PyTorch on it, or start it with --num-gpus 0 so only "
                     "CPU trials go there")


def is_infrastructure_failure(error: BaseException) -> bool:
    """Whether ``error`` may not recur when the trial runs again (so Tune should retry it)."""
    if isinstance(error, _TRANSIENT):
        return True
    try:
        from ray.exceptions import RayError
    except ImportError:  # pragma: no cover - run_trial always has Ray
        return False
    return isinstance(error, RayError)


def failure_text(error: BaseException) -> str:
    """The stored error of a trial that failed deterministically: the message alone for our
    own errors (they name what to change), else the exception type and message."""
    if isinstance(error, TrialDiverged | InputError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def beat_sink(runtime: TrialRuntime, pid: str) -> Callable[[], object] | None:
    """Where this worker's progress beats go (``training.beats``): the sweep's board, as
    Tune trial ``pid`` (None where the run has no board)."""
    board = runtime.beats
    return None if board is None else (lambda: board.beat.remote(pid))


def run_trial(params: dict[str, Any], configs: dict[str, TrialConfig],
              runtime: TrialRuntime, claims: Context | None = None) -> None:
    """Ray Tune function trainable. ``params["trial"]["trial_id"]`` picks the config from
    ``configs`` (shipped once through the object store by ``tune.with_parameters``, with the
    run's ``runtime``). A retried trial resumes from its last checkpoint, if it wrote one.

    Only infrastructure failures (``is_infrastructure_failure``) propagate to Tune, which
    retries them; any other exception is reported as a failed (or diverged) outcome and
    the trial ends, since running it again would fail the same way. With ``claims`` (several
    drivers on one store) a trial another driver holds or stored is not trained: its outcome
    is ``Status.SKIPPED`` with why (``reinit_tune.sweep.claims``). Every report is
    ``TrialOutcome.tune_metrics``."""
    import datasets
    import ray  # here, not above: ``execute`` runs without Ray (benchmarks, a GPU box)
    from ray import tune
    from transformers.utils import logging as hf_logging

    # Per-trial progress bars would flood the driver's console (Ray forwards worker output);
    # the sweep prints one line per finished trial instead.
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    config = configs[params["trial"]["trial_id"]]
    context = ray.get_runtime_context()
    assigned = context.get_assigned_resources()
    # Ray pins OMP threads per worker; torch must match the CPUs this trial was given.
    torch.set_num_threads(max(1, int(assigned.get("CPU", 1))))
    worker = worker_fields()
    if (why := begin(claims, config.trial_id)) is not None:
        tune.report(TrialOutcome(config.trial_id, Status.SKIPPED, error=why,
                                 **worker).tune_metrics())
        return
    resume = None
    if (checkpoint := tune.get_checkpoint()) is not None:
        with checkpoint.as_directory() as folder:
            resume = load_state(folder)

    def report(outcome: TrialOutcome, state: dict | None) -> None:
        metrics = dataclasses.replace(outcome, **worker).tune_metrics()
        if state is None:
            tune.report(metrics)
            return
        with tempfile.TemporaryDirectory(prefix="reinit-tune-ckpt-") as folder:
            save_state(state, folder)  # Tune copies the folder to storage before returning
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))

    try:
        with beats.sending_to(beat_sink(runtime, params["trial"]["trial_id"])):
            execute(
                config,
                data_dir=runtime.data_dir,
                use_gpu=worker_device(assigned),
                report=report,
                resume=resume,
                checkpoint_after_s=runtime.checkpoint_after_s,
                similarity=runtime.similarity,
                model_dir=(os.path.join(runtime.models_dir, config.trial_id)
                           if runtime.models_dir else None),
                log_every=runtime.log_every,
                every_epoch=runtime.evaluate == "every-epoch",
                allow_subset=runtime.allow_subset,
            )
    except Exception as e:  # noqa: BLE001 - sorted by kind just below
        if is_infrastructure_failure(e):
            raise  # Tune retries it (up to --max-failures), from the last checkpoint
        # A bad config, model, data or number fails the same way on every attempt: report
        # it once instead of retrying, so the driver stores it and can stop a sweep whose
        # trials all fail alike.
        traceback.print_exc()  # the trial's log (and the driver's console) keep the stack
        tune.report(failure_outcome(config.trial_id, e, **worker).tune_metrics())
