"""Finetuning a whole model end to end, as 003 §2 does: a sequence classifier (or regressor,
STS-B), or a span extractor for question answering (001 §5.1.1).

``SequenceClassification`` and ``SpanExtraction`` are the loop's objectives: the whole model
trains on padded batches of the training subset with its own loss (cross-entropy, MSE for
regression, start/end cross-entropy for spans), and every dev split of the task is scored
after every epoch. ``param_groups`` gives the reinitialized layers their own learning rate
when 003 App. E's multiplier asks for one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from reinit_tune import metrics, qa
from reinit_tune.data import Encoded
from reinit_tune.hardware import eval_batch_size
from reinit_tune.model.surgery import layer_stack
from reinit_tune.tasks import get_task
from reinit_tune.training import beats
from reinit_tune.training.loop import (
    EpochResult,
    Optimization,
    TrainSetup,
    eval_batches,
    named_devs,
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


def evaluate(model: nn.Module, dev: Encoded, task: str, device: torch.device,
             split: str | None = None) -> tuple[float, dict]:
    """Mean dev loss and the task's metrics over the whole dev split (named as ``split``'s,
    default the task's first dev split)."""
    spec = get_task(task)
    model.eval()
    outputs, loss_sum = [], torch.zeros((), device=device)
    batches = eval_batches(dev.lengths, eval_batch_size(device.type))
    with torch.inference_mode():
        for idx in batches:
            batch = {k: v.to(device, non_blocking=True) for k, v in dev.collate(idx).items()}
            out = model(**batch)
            loss_sum += out.loss.float() * len(idx)
            outputs.append(out.logits.float())
            beats.beat()
    logits = torch.cat(outputs).cpu().numpy()
    order = np.concatenate([np.asarray(b) for b in batches])
    labels = dev.labels[order]
    preds = logits[:, 0] if spec.is_regression else logits.argmax(axis=-1)
    scores = metrics.compute(task, preds, labels)
    names = spec.split_metrics(split or spec.dev_splits[0])
    return float(loss_sum.item()) / len(dev), dict(zip(names, scores.values(), strict=True))



class SequenceClassification:
    """The finetuning objective: ``model`` (a transformers sequence classifier with its
    labels in the batch) trains on ``train`` and is scored on every dev split; the loss
    reported is the first split's."""

    def __init__(self, model: nn.Module, train: Encoded, dev: Encoded | Mapping[str, Encoded],
                 task: str, groups: list[dict] | None = None):
        self.module = model
        self.train, self.devs, self.task = train, named_devs(task, dev), task
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
        losses, scores = [], {}
        for split, dev in self.devs.items():
            loss, split_scores = evaluate(self.module, dev, self.task, self.device, split)
            losses.append(loss)
            scores.update(split_scores)
        return losses[0], scores


class SpanExtraction(SequenceClassification):
    """The extractive QA objective (SQuAD 2.0, 001 §5.1.1): ``model`` (a transformers
    question-answering model, start and end positions in the batch) trains on answer windows;
    after every epoch the dev windows' logits become one answer per question (the null answer
    where it scores higher, ``reinit_tune.qa.postprocess``), scored with the official SQuAD
    2.0 exact match and F1. The dev loss is over the windows' gold positions."""

    def evaluate(self) -> tuple[float, dict[str, float]]:
        losses, scores = [], {}
        spec = get_task(self.task)
        self.module.eval()
        for split, dev in self.devs.items():
            batches = eval_batches(dev.lengths, eval_batch_size(self.device.type))
            loss_sum = torch.zeros((), device=self.device)
            start_rows, end_rows = [], []
            with torch.inference_mode():
                for idx in batches:
                    batch = {k: v.to(self.device, non_blocking=True)
                             for k, v in dev.collate(idx).items()}
                    out = self.module(**batch)
                    beats.beat()
                    loss_sum += out.loss.float() * len(idx)
                    start_rows += list(out.start_logits.float().cpu().numpy())
                    end_rows += list(out.end_logits.float().cpu().numpy())
            order = np.concatenate([np.asarray(b) for b in batches])
            starts, ends = [None] * len(dev), [None] * len(dev)
            for position, i in enumerate(order):
                starts[i], ends[i] = start_rows[position], end_rows[position]
            answers = qa.postprocess(dev.examples.contexts, dev.examples.ids, dev.qa_features(),
                                     starts, ends)
            official = qa.squad_v2_scores(answers, dict(zip(dev.examples.ids,
                                                            dev.examples.answers, strict=True)))
            names = spec.split_metrics(split)
            scores.update({name: official[key] for name, key in zip(names, QA_KEYS,
                                                                    strict=True)})
            losses.append(float(loss_sum.item()) / len(dev))
        return losses[0], scores


# reinit_tune.tasks.QA_METRICS, in the official script's names
QA_KEYS = ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1")


def finetune(
    model: nn.Module,
    train_split: Encoded,
    dev: Encoded | Mapping[str, Encoded],
    *,
    task: str,
    opt: Optimization,
    groups: list[dict] | None = None,
    use_gpu: bool = True,
    on_epoch: Callable[[EpochResult, TrainSetup], None] | None = None,
    resume: dict | None = None,
    log_every: int = 0,
    every_epoch: bool = True,
) -> tuple[list[EpochResult], TrainSetup]:
    """Finetune ``model`` on ``train_split``, evaluating on the dev split(s) after every
    epoch or the last one (``reinit_tune.training.loop.train`` says what the other arguments
    do)."""
    kind = SpanExtraction if get_task(task).is_qa else SequenceClassification
    objective = kind(model, train_split, dev, task, groups)
    return train(objective, opt, use_gpu=use_gpu, on_epoch=on_epoch, resume=resume,
                 log_every=log_every, every_epoch=every_epoch)


def finetune_config(
    model: nn.Module, train_split: Encoded, dev: Encoded, config: TrialConfig, **kwargs
) -> tuple[list[EpochResult], TrainSetup]:
    """``finetune`` with every training setting of ``config``; ``kwargs`` are the run's own
    (``use_gpu``, ``on_epoch``, ``resume``)."""
    groups = param_groups(model, config.lr, config.reinit_layers, config.reinit_lr_multiplier)
    return finetune(model, train_split, dev, task=config.task, opt=Optimization.of(config),
                    groups=groups, **kwargs)
