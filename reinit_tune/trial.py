"""One trial: build the model from its ``TrialConfig``, finetune, report every epoch (W1).

The config picks the mode: finetuning (optionally after an intermediate task, T6) or a
linear probe on a frozen layer (T5).

``run_trial`` is the Ray Tune function trainable; ``execute`` does the same work without Ray
(tests, benchmarks, debugging one config). Each epoch's report is a flat dict that the
driver turns into store rows (``reinit_tune.runner.StoreWriter``).

Long trials checkpoint (O3): an epoch that took at least ``checkpoint_after_s`` seconds (and
is not the last) is reported with a Tune checkpoint of the full training state, so a trial
whose worker dies (a preempted node) is retried by Tune from its last checkpointed epoch
instead of from scratch. Short trials skip checkpoints: rerunning them costs less than writing them.
"""

from __future__ import annotations

import copy
import json
import math
import os
import platform
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reinit_tune import data, sequential
from reinit_tune.config import TrialConfig
from reinit_tune.layer_similarity import BATCH_SIZE, SimilarityOptions, compare_models, json_safe
from reinit_tune.models import build_model
from reinit_tune.probing import train_probe
from reinit_tune.train import EpochResult, TrainSetup, finetune_config

# Checkpoint an epoch that took this long: a preempted bert-base trial on 50k examples then
# loses at most one epoch, while the many short trials of a sweep never pay for checkpoints.
DEFAULT_CHECKPOINT_AFTER_S = 300.0
STATE_FILE = "train_state.pt"


def library_versions() -> str:
    import accelerate
    import torch
    import transformers

    import reinit_tune

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


def epoch_report(
    config: TrialConfig, result: EpochResult, setup: TrainSetup, setup_time_s: float
) -> dict[str, Any]:
    spec = config.task_spec
    return {
        "epoch": result.epoch,
        "train_loss": result.train_loss,
        "eval_loss": result.eval_loss,
        **{f"eval_{name}": value for name, value in result.metrics.items()},
        "score": result.metrics[spec.primary],
        "train_time_s": result.train_time_s,
        "eval_time_s": result.eval_time_s,
        "train_examples_per_s": result.train_examples_per_s,
        "train_examples": result.train_examples,
        "setup_time_s": setup_time_s,
        "device": setup.device,
        "precision_used": setup.precision,
    }


def wants_checkpoint(result: EpochResult, epochs: int, checkpoint_after_s: float) -> bool:
    """Checkpoint after an epoch that took ``checkpoint_after_s`` or longer, unless it was the
    last one (a finished trial is stored, never resumed)."""
    return result.epoch < epochs and result.train_time_s + result.eval_time_s >= checkpoint_after_s


def execute(
    config: TrialConfig,
    *,
    data_dir: str | None = None,
    use_gpu: bool = True,
    report: Callable[[dict[str, Any], dict | None], None] | None = None,
    resume: dict | None = None,
    checkpoint_after_s: float = math.inf,
    similarity: SimilarityOptions | None = None,
    model_dir: str | None = None,
) -> list[dict[str, Any]]:
    """Run one trial and return its per-epoch reports.

    Each report goes to ``report(record, state)``; ``state`` is the resumable training state
    (``reinit_tune.train.training_state``) when ``wants_checkpoint`` says so, else None.
    ``resume`` continues from such a state: only the epochs after it run and are returned.
    With ``similarity`` the final epoch's report carries ``similarity_rows`` (JSON, one row
    per layer, ``reinit_tune.layer_similarity``); with ``model_dir`` the finetuned model and
    its tokenizer are saved there (``save_pretrained``).
    """
    start = time.perf_counter()
    train, dev = data.train_and_dev(
        config.task, config.model, config.max_seq_length, config.train_size, config.seed, data_dir
    )
    if config.intermediate_task is not None:
        model = sequential.build_final_model(config, data_dir=data_dir, use_gpu=use_gpu)
    else:
        model = build_model(config)
    reference = copy.deepcopy(model) if similarity is not None else None
    setup_time = time.perf_counter() - start
    reports: list[dict[str, Any]] = []

    def on_epoch(result: EpochResult, setup: TrainSetup) -> None:
        record = epoch_report(config, result, setup, setup_time)
        record["resumed_from_epoch"] = resume["epoch"] if resume else 0
        if result.epoch == config.epochs:  # the model is final: measure and save it now
            if reference is not None:
                record["similarity_rows"] = json.dumps(
                    final_similarity(model, reference, dev, similarity))
            if model_dir is not None:
                save_model(model, config.model, model_dir)
        reports.append(record)
        if report is not None:
            checkpoint = wants_checkpoint(result, config.epochs, checkpoint_after_s)
            report(record, setup.state() if checkpoint and setup.state else None)

    if config.probe_layer is not None:  # the probe trains on fixed features: no padding
        train_probe(model, train, dev, layer=config.probe_layer, task=config.task, lr=config.lr,
                    batch_size=config.batch_size, epochs=config.epochs, seed=config.seed,
                    precision=config.precision, use_gpu=use_gpu, on_epoch=on_epoch)
    else:
        finetune_config(model, train, dev, config, use_gpu=use_gpu, on_epoch=on_epoch,
                        resume=resume)
    return reports


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
    import torch

    torch.save(state, Path(folder) / STATE_FILE)


def load_state(folder: str | Path) -> dict:
    import torch

    return torch.load(Path(folder) / STATE_FILE, map_location="cpu", weights_only=True)


def run_trial(
    params: dict[str, Any],
    configs: dict[str, dict[str, Any]],
    checkpoint_after_s: float = DEFAULT_CHECKPOINT_AFTER_S,
) -> None:
    """Ray Tune function trainable. ``params["trial_id"]`` picks the config from ``configs``
    (shipped once through the object store by ``tune.with_parameters``). A retried trial
    resumes from its last checkpoint, if it wrote one."""
    import ray
    import torch
    from ray import tune

    config = TrialConfig.from_dict(configs[params["trial_id"]])
    context = ray.get_runtime_context()
    assigned = context.get_assigned_resources()
    # Ray pins OMP threads per worker; torch must match the CPUs this trial was given.
    torch.set_num_threads(max(1, int(assigned.get("CPU", 1))))
    static = {"node_id": context.get_node_id(), "versions": library_versions()}
    resume = None
    if (checkpoint := tune.get_checkpoint()) is not None:
        with checkpoint.as_directory() as folder:
            resume = load_state(folder)

    def report(record: dict[str, Any], state: dict | None) -> None:
        if state is None:
            tune.report({**record, **static})
            return
        with tempfile.TemporaryDirectory(prefix="reinit-tune-ckpt-") as folder:
            save_state(state, folder)  # Tune copies the folder to storage before returning
            tune.report({**record, **static},
                        checkpoint=tune.Checkpoint.from_directory(folder))

    options = params.get("similarity")
    models_dir = params.get("models_dir")
    execute(
        config,
        data_dir=params.get("data_dir"),
        use_gpu=assigned.get("GPU", 0) > 0,
        report=report,
        resume=resume,
        checkpoint_after_s=checkpoint_after_s,
        similarity=SimilarityOptions(**options) if options else None,
        model_dir=os.path.join(models_dir, config.trial_id) if models_dir else None,
    )
