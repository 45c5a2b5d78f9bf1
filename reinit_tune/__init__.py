"""reinit-tune: how much does each pretrained part of a transformer contribute to finetuning?

Public API: ``TrialConfig`` (one trial), ``build_model`` (the surgically modified model),
``reinit_tune.metrics.compute`` and ``reinit_tune.store.load_trials``.
"""

from reinit_tune.config import TrialConfig
from reinit_tune.models import EMBEDDED_MODEL, build_model

__version__ = "0.1.0"
__all__ = ["EMBEDDED_MODEL", "TrialConfig", "build_model", "__version__"]
