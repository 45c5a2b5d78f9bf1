"""Sequential transfer (001 Exp 1): finetune on an intermediate task, then on the final one.

The intermediate phase is the trial's own config with ``task`` set to the intermediate task
(same model, surgery, seed, train size, epochs and optimization; 001 §5.3.1 trains 3 epochs on
each task). It does not depend on the final task, so its model is trained once and cached on
disk, where every final task's trial finds it:
``$REINIT_TUNE_CACHE/intermediate/<key>.safetensors``, with ``<key>.json`` beside it holding the
intermediate config and its per-epoch dev results; ``<key>`` is the intermediate config's
trial id. A file lock makes concurrent trials on one machine wait for one training instead of
repeating it; files are written under temporary names and renamed into place.

The final model is the intermediate model with its classification head replaced by a fresh one
for the final task (``reset_classifier``, as in direct finetuning); the surgery is not redone.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

from filelock import FileLock
from safetensors.torch import load_file, save_file

from reinit_tune import data, env
from reinit_tune.config import TrialConfig
from reinit_tune.model.build import build_model, load_pretrained, reset_classifier
from reinit_tune.training.finetune import finetune_config

log = logging.getLogger("reinit_tune")

CACHE_FOLDER = "intermediate"


def cache_path(config: TrialConfig) -> Path:
    """Where the intermediate model of ``config`` is (or will be) stored."""
    key = config.intermediate_phase().trial_id
    return env.cache_dir() / CACHE_FOLDER / f"{key}.safetensors"


def _replace_atomic(path: Path, write) -> None:
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def train_intermediate(config: TrialConfig, path: Path, *, data_dir=None,
                       use_gpu: bool = True, allow_subset: bool = False) -> None:
    """Finetune the intermediate phase ``config`` and save its weights to ``path``
    (``allow_subset``: as ``data.train_and_devs``)."""
    train, dev = data.train_and_devs(config.task, config.model, config.max_seq_length,
                                     config.train_size, config.seed, data_dir,
                                     allow_subset=allow_subset)
    model = build_model(config)
    results, setup = finetune_config(model, train, dev, config, use_gpu=use_gpu)
    state = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in model.state_dict().items()}
    meta: dict[str, Any] = {
        "config": config.to_dict(),
        "device": setup.device,
        "epochs": [{"epoch": r.epoch, "train_loss": r.train_loss, "eval_loss": r.eval_loss,
                    **{f"eval_{k}": v for k, v in r.metrics.items()}} for r in results],
    }
    # Metadata first: a weights file always has its description beside it.
    _replace_atomic(path.with_suffix(".json"),
                    lambda tmp: tmp.write_text(json.dumps(meta, indent=1, sort_keys=True)))
    _replace_atomic(path, lambda tmp: save_file(state, str(tmp)))


def intermediate_state(config: TrialConfig, *, data_dir=None, use_gpu: bool = True,
                       allow_subset: bool = False) -> dict:
    """The weights after the intermediate phase: from the cache, or trained now (once)."""
    path = cache_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_suffix(".lock"))):
        if path.is_file():
            try:
                return load_file(str(path))
            except Exception as e:  # noqa: BLE001 - truncated or corrupted: train it again
                log.warning("intermediate model cache %s is unreadable (%s: %s); training it "
                            "again", path, type(e).__name__, e)
                path.unlink()
        train_intermediate(config.intermediate_phase(), path, data_dir=data_dir,
                           use_gpu=use_gpu, allow_subset=allow_subset)
        return load_file(str(path))


def build_final_model(config: TrialConfig, *, data_dir=None, use_gpu: bool = True,
                      allow_subset: bool = False):
    """The model that finetunes on ``config.task``: the intermediate model's encoder and
    pooler with a fresh classification head for the final task."""
    state = intermediate_state(config, data_dir=data_dir, use_gpu=use_gpu,
                               allow_subset=allow_subset)
    model = load_pretrained(config.model, config.task)
    head = {k for k in model.state_dict() if k.split(".")[0] == "classifier"}
    missing, unexpected = model.load_state_dict(
        {k: v for k, v in state.items() if k not in head}, strict=False
    )
    if set(missing) != head or unexpected:
        raise RuntimeError(
            f"intermediate model {cache_path(config)} does not match {config.model}: "
            f"missing {sorted(set(missing) - head)}, unexpected {sorted(unexpected)}"
        )
    return reset_classifier(model, config.seed)
