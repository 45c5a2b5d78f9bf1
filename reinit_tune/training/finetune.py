"""Finetuning a sequence classifier (or regressor, STS-B) end to end, as 003 §2 does.

``SequenceClassification`` is the loop's objective: the whole model trains on padded batches
of the training subset (its own loss: cross-entropy, MSE for regression), and the whole dev
split is scored after every epoch (``evaluate``). ``param_groups`` gives the reinitialized
layers their own learning rate when 003 App. E's multiplier asks for one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from reinit_tune import metrics
from reinit_tune.data import Encoded
from reinit_tune.model.surgery import layer_stack
from reinit_tune.tasks import get_task
from reinit_tune.training.loop import (
    EpochResult,
    Optimization,
    TrainSetup,
    eval_batches,
    train,
)

if TYPE_CHECKING:
    from reinit_tune.config import TrialConfig


def param_groups(
    model: nn.Module, lr: float, layers: Iterable[int] = (), multiplier: float = 1.0
) -> list[dict]:
    """Optimizer groups: the encoder layers at ``layers`` train at ``lr × multiplier`` (all
    their parameters, 003 App. E: "5x larger rate on the reinitialized layers"), every other
    trainable parameter (embeddings, other layers, pooler, classifier) at ``lr``."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    layers = list(layers)
    if multiplier == 1.0 or not layers:
        return [{"params": trainable, "lr": lr}]
    stack = layer_stack(model)
    fast = {id(p) for i in layers for p in stack[i].parameters()}
    return [
        {"params": [p for p in trainable if id(p) not in fast], "lr": lr},
        {"params": [p for p in trainable if id(p) in fast], "lr": lr * multiplier},
    ]


def evaluate(model: nn.Module, dev: Encoded, task: str, device: torch.device) -> tuple[float, dict]:
    """Mean dev loss and the task's metrics over the whole dev split."""
    spec = get_task(task)
    model.eval()
    outputs, loss_sum = [], torch.zeros((), device=device)
    batches = eval_batches(dev.lengths)
    with torch.inference_mode():
        for idx in batches:
            batch = {k: v.to(device, non_blocking=True) for k, v in dev.collate(idx).items()}
            out = model(**batch)
            loss_sum += out.loss.float() * len(idx)
            outputs.append(out.logits.float())
    logits = torch.cat(outputs).cpu().numpy()
    order = np.concatenate([np.asarray(b) for b in batches])
    labels = dev.labels[order]
    preds = logits[:, 0] if spec.is_regression else logits.argmax(axis=-1)
    return float(loss_sum.item()) / len(dev), metrics.compute(task, preds, labels)


class SequenceClassification:
    """The finetuning objective: ``model`` (a transformers sequence classifier with its
    labels in the batch) trains on ``train`` and is scored on ``dev``."""

    def __init__(self, model: nn.Module, train: Encoded, dev: Encoded, task: str,
                 groups: list[dict] | None = None):
        self.module = model
        self.train, self.dev, self.task = train, dev, task
        self.groups = groups
        self.num_examples = len(train)
        self.lengths = train.lengths
        self.vocab_ids = train.input_ids
        self.first_epoch_extra_s = (0.0, 0.0)
        self.device: torch.device | None = None

    def prepare(self, accelerator: Any, opt: Optimization) -> list[dict]:
        groups = self.groups or param_groups(self.module, opt.lr)
        self.module = accelerator.prepare(self.module)
        self.device = accelerator.device
        return groups

    def collate(self, indices: list[int]) -> dict[str, torch.Tensor]:
        return self.train.collate(indices)

    def loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
        tokens = int(batch["attention_mask"].sum())  # counted on the CPU copy: no sync
        batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        return self.module(**batch).loss, tokens

    def evaluate(self) -> tuple[float, dict[str, float]]:
        return evaluate(self.module, self.dev, self.task, self.device)


def finetune(
    model: nn.Module,
    train_split: Encoded,
    dev: Encoded,
    *,
    task: str,
    opt: Optimization,
    groups: list[dict] | None = None,
    use_gpu: bool = True,
    on_epoch: Callable[[EpochResult, TrainSetup], None] | None = None,
    resume: dict | None = None,
) -> tuple[list[EpochResult], TrainSetup]:
    """Finetune ``model`` on ``train_split``, evaluating on ``dev`` after every epoch."""
    objective = SequenceClassification(model, train_split, dev, task, groups)
    return train(objective, opt, use_gpu=use_gpu, on_epoch=on_epoch, resume=resume)


def finetune_config(
    model: nn.Module, train_split: Encoded, dev: Encoded, config: TrialConfig, **kwargs
) -> tuple[list[EpochResult], TrainSetup]:
    """``finetune`` with every training setting of ``config``; ``kwargs`` are the run's own
    (``use_gpu``, ``on_epoch``, ``resume``)."""
    groups = param_groups(model, config.lr, config.reinit_layers, config.reinit_lr_multiplier)
    return finetune(model, train_split, dev, task=config.task, opt=Optimization.of(config),
                    groups=groups, **kwargs)
