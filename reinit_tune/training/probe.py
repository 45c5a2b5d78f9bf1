"""Probing (003 §3 and App. D, 000 §4.4): a linear classifier on frozen hidden states.

The encoder is frozen (eval mode, no gradients) and run only up to layer k; its hidden states
are mean-pooled over the non-padding tokens and fed to a linear layer with a softmax (003 §3:
"averages the hidden states of each layer, then passes the pooled representation through a
linear layer and softmax"). k = 0 is the embeddings output, k = L the last layer.

A frozen encoder in eval mode is a fixed function, so the pooled features are computed once
per split and the probe trains on them: the same numbers as recomputing them every epoch, for
a fraction of the cost. ``Probe`` is the training loop's objective (``reinit_tune.training.
loop``: AdamW, linear decay, gradient clipping, the seeded batch order, dev evaluation after
every epoch). The probe is the model's classification head, drawn by ``build_model``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from reinit_tune import metrics
from reinit_tune.data import Encoded
from reinit_tune.hardware import eval_batch_size
from reinit_tune.model.stacks import locate
from reinit_tune.model.surgery import classifier_head
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


@contextmanager
def truncated(model: nn.Module, k: int) -> Iterator[nn.Module]:
    """The base model with only its first ``k`` layers, so layers above k are not computed;
    the full layer list is put back on exit."""
    stack = locate(model)
    layers = stack.layers
    if not 0 <= k <= len(layers):
        raise IndexError(f"probe layer {k} out of range 0..{len(layers)}")
    stack.set_layers(model, nn.ModuleList(list(layers)[:k]))
    try:
        yield model.base_model
    finally:
        stack.set_layers(model, layers)


@torch.no_grad()  # not inference_mode: the probe's backward pass saves these features
def pooled_features(base: nn.Module, data: Encoded, device: torch.device) -> torch.Tensor:
    """Mean over non-padding tokens of ``base``'s last hidden state, one float32 row per
    example, in the order of ``data``."""
    base.eval()
    features = torch.empty(len(data), base.config.hidden_size, device=device)
    for idx in eval_batches(data.lengths, eval_batch_size(device.type)):
        batch = data.collate(idx)
        mask = batch["attention_mask"].to(device)
        inputs = {k: batch[k].to(device) for k in ("input_ids", "token_type_ids") if k in batch}
        hidden = base(**inputs, attention_mask=mask).last_hidden_state.float()
        weights = mask.unsqueeze(-1).float()
        features[torch.as_tensor(idx, device=device)] = (hidden * weights).sum(1) / weights.sum(1)
        beats.beat()
    return features


def probe_loss(logits: torch.Tensor, labels: torch.Tensor, regression: bool) -> torch.Tensor:
    # The losses transformers' sequence classifiers use: MSE for STS-B, cross-entropy else.
    if regression:
        return nn.functional.mse_loss(logits.squeeze(-1), labels.float())
    return nn.functional.cross_entropy(logits, labels)


class Probe:
    """The probing objective: the classification head of ``model`` trains on the pooled
    hidden state ``layer`` of the frozen encoder. Feature extraction happens in ``prepare``
    and counts in epoch 1's train and eval times (it is the probe's real cost)."""

    def __init__(self, model: nn.Module, train: Encoded, dev: Encoded | Mapping[str, Encoded],
                 task: str, layer: int):
        head = classifier_head(model)
        if not isinstance(head, nn.Linear):
            raise TypeError(f"probing needs a linear classification head, got "
                            f"{type(head).__name__}")
        self.model, self.module = model, head
        self.train, self.devs, self.layer = train, named_devs(task, dev), layer
        self.task, self.regression = task, get_task(task).is_regression
        self.num_examples = len(train)
        self.lengths = train.lengths
        self.vocab_ids = None  # the embeddings are frozen
        self.first_epoch_extra_s = (0.0, 0.0)

    def prepare(self, accelerator: Any, opt: Optimization) -> list[dict]:
        device = self.device = accelerator.device
        self.model.requires_grad_(False).eval().to(device)
        self.module.requires_grad_(True)
        start = time.perf_counter()
        with truncated(self.model, self.layer) as base, accelerator.autocast():
            self.x_train = pooled_features(base, self.train, device)
            extract_train = time.perf_counter() - start
            self.x_devs = {split: pooled_features(base, dev, device)
                           for split, dev in self.devs.items()}
        self.first_epoch_extra_s = (extract_train, time.perf_counter() - start - extract_train)
        self.y_train = torch.as_tensor(self.train.labels, device=device)
        return [{"params": list(self.module.parameters()), "lr": opt.lr}]

    def collate(self, indices: list[int]) -> torch.Tensor:
        return torch.tensor(indices)

    def loss(self, batch: torch.Tensor) -> tuple[torch.Tensor, int]:
        tokens = int(self.lengths[batch.numpy()].sum())
        idx = batch.to(self.device)
        return probe_loss(self.module(self.x_train[idx]), self.y_train[idx],
                          self.regression), tokens

    def evaluate(self) -> tuple[float, dict[str, float]]:
        losses, scores = [], {}
        spec = get_task(self.task)
        for split, dev in self.devs.items():
            with torch.inference_mode():
                logits = self.module(self.x_devs[split])
                labels = torch.as_tensor(dev.labels, device=self.device)
                losses.append(float(probe_loss(logits, labels, self.regression)))
            logits = logits.cpu().numpy()
            preds = logits[:, 0] if self.regression else logits.argmax(axis=-1)
            split_scores = metrics.compute(self.task, preds, dev.labels)
            scores.update(zip(spec.split_metrics(split), split_scores.values(), strict=True))
        return losses[0], scores


def train_probe(
    model: nn.Module,
    train_split: Encoded,
    dev: Encoded,
    *,
    layer: int,
    task: str,
    opt: Optimization,
    use_gpu: bool = True,
    on_epoch: Callable[[EpochResult, TrainSetup], None] | None = None,
    resume: dict | None = None,
    log_every: int = 0,
    every_epoch: bool = True,
) -> tuple[list[EpochResult], TrainSetup]:
    """Train a linear probe on hidden state ``layer`` of the frozen ``model``. Batches are
    uniformly shuffled: the probe trains on fixed-size features, so there is no padding for
    length grouping to save."""
    objective = Probe(model, train_split, dev, task, layer)
    return train(objective, dataclasses.replace(opt, length_grouped=False), use_gpu=use_gpu,
                 on_epoch=on_epoch, resume=resume, log_every=log_every,
                 every_epoch=every_epoch)
