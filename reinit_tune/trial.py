"""One trial: build the model from its ``TrialConfig``, finetune, report every epoch (W1).

``run_trial`` is the Ray Tune function trainable; ``execute`` does the same work without Ray
(tests, benchmarks, debugging one config). Each epoch's report is a flat dict that the
driver turns into store rows (``reinit_tune.runner.StoreWriter``).
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from typing import Any

from reinit_tune import data
from reinit_tune.config import TrialConfig
from reinit_tune.models import build_model
from reinit_tune.train import EpochResult, TrainSetup, finetune


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


def execute(
    config: TrialConfig,
    *,
    data_dir: str | None = None,
    use_gpu: bool = True,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run one trial and return its per-epoch reports (also passed to ``report``)."""
    start = time.perf_counter()
    train, dev = data.train_and_dev(
        config.task, config.model, config.max_seq_length, config.train_size, config.seed, data_dir
    )
    model = build_model(config)
    setup_time = time.perf_counter() - start
    reports: list[dict[str, Any]] = []

    def on_epoch(result: EpochResult, setup: TrainSetup) -> None:
        record = epoch_report(config, result, setup, setup_time)
        reports.append(record)
        if report is not None:
            report(record)

    finetune(
        model, train, dev,
        task=config.task, lr=config.lr, batch_size=config.batch_size, epochs=config.epochs,
        seed=config.seed, precision=config.precision,
        length_grouped=config.length_grouped, use_gpu=use_gpu, on_epoch=on_epoch,
    )
    return reports


def run_trial(params: dict[str, Any], configs: dict[str, dict[str, Any]]) -> None:
    """Ray Tune function trainable. ``params["trial_id"]`` picks the config from ``configs``
    (shipped once through the object store by ``tune.with_parameters``)."""
    import ray
    import torch
    from ray import tune

    config = TrialConfig.from_dict(configs[params["trial_id"]])
    context = ray.get_runtime_context()
    assigned = context.get_assigned_resources()
    # Ray pins OMP threads per worker; torch must match the CPUs this trial was given.
    torch.set_num_threads(max(1, int(assigned.get("CPU", 1))))
    static = {"node_id": context.get_node_id(), "versions": library_versions()}
    execute(
        config,
        data_dir=params.get("data_dir"),
        use_gpu=assigned.get("GPU", 0) > 0,
        report=lambda record: tune.report({**record, **static}),
    )
