"""Experiment trackers: ``--logger`` names map to Ray Tune's own logger callbacks.

Each tracker receives every trial's config (its experiment axes, ``reinit_tune.sweep.progress``)
and every epoch's metrics: TensorBoard event files with the axes as hparams (Tune's
``TBXLoggerCallback``, needs ``tensorboardX``), a Weights & Biases run per trial
(``WandbLoggerCallback``, needs ``wandb`` and a logged-in account or ``WANDB_MODE=offline``), an
MLflow run per trial (``MLflowLoggerCallback``, needs ``mlflow``; ``MLFLOW_TRACKING_URI`` picks
the server) and CSV files (``CSVLoggerCallback``). TensorBoard and CSV files land in each
trial's folder under ``--storage``. Missing packages are reported before anything starts.
"""

from __future__ import annotations

import importlib.util
from typing import Any

# logger name -> (module it needs, pip extra that installs it)
LOGGERS: dict[str, tuple[str | None, str | None]] = {
    "tensorboard": ("tensorboardX", None),  # a base dependency
    "wandb": ("wandb", "wandb"),
    "mlflow": ("mlflow", "mlflow"),
    "csv": (None, None),
}


def check(names: tuple[str, ...]) -> list[str]:
    """One problem line per unknown logger or logger whose package is not installed."""
    problems = []
    for name in names:
        if name not in LOGGERS:
            problems.append(f"--logger {name}: allowed: {', '.join(LOGGERS)}")
            continue
        module, extra = LOGGERS[name]
        if module and importlib.util.find_spec(module) is None:
            how = f"pip install 'reinit-tune[{extra}]'" if extra else f"pip install {module}"
            problems.append(f"--logger {name} needs the {module} package: {how}")
    return problems


def callbacks(names: tuple[str, ...], project: str) -> list[Any]:
    """Tune logger callbacks for ``names``; ``project`` names the W&B project / MLflow
    experiment."""
    out: list[Any] = []
    for name in names:
        if name == "tensorboard":
            from ray.tune.logger import TBXLoggerCallback

            out.append(TBXLoggerCallback())
        elif name == "csv":
            from ray.tune.logger import CSVLoggerCallback

            out.append(CSVLoggerCallback())
        elif name == "wandb":
            from ray.air.integrations.wandb import WandbLoggerCallback

            out.append(WandbLoggerCallback(project=f"reinit-tune-{project}"))
        elif name == "mlflow":
            from ray.air.integrations.mlflow import MLflowLoggerCallback

            out.append(MLflowLoggerCallback(experiment_name=f"reinit-tune-{project}"))
    return out
