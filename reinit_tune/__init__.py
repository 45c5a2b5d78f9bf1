"""reinit-tune: how much does each pretrained part of a transformer contribute to finetuning?

Public API: ``TrialConfig`` (one trial), ``build_model`` (the surgically modified model),
``reinit_tune.families`` (the experiment families and their grids),
``reinit_tune.sweep.runner.run_sweep`` (run configs on Ray Tune), ``reinit_tune.metrics``,
and ``reinit_tune.store.load_trials`` (the results). The command line is ``reinit-tune``.
"""

from reinit_tune.config import TrialConfig
from reinit_tune.model.shape import EMBEDDED_MODEL

__version__ = "0.3.0"
__all__ = ["EMBEDDED_MODEL", "TrialConfig", "build_model", "__version__"]


def __getattr__(name: str):
    if name == "build_model":  # torch stays out of ``import reinit_tune``
        from reinit_tune.model.build import build_model

        return build_model
    raise AttributeError(f"module 'reinit_tune' has no attribute {name!r}")
