"""Probing (T5; 003 §3 and App. D, 000 §4.4): a linear classifier on frozen hidden states.

The encoder is frozen (eval mode, no gradients) and run only up to layer k; its hidden states
are mean-pooled over the non-padding tokens and fed to a linear layer with a softmax (003 §3:
"averages the hidden states of each layer, then passes the pooled representation through a
linear layer and softmax"). k = 0 is the embeddings output, k = L the last layer.

A frozen encoder in eval mode is a fixed function, so the pooled features are computed once
per split and the probe trains on them: the same numbers as recomputing them every epoch, for
a fraction of the cost. Optimization is the finetuning loop's (``reinit_tune.train``): AdamW,
linear decay, gradient clipping, the seeded batch order, dev evaluation after every epoch.
The probe is the model's classification head, drawn by ``build_model``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from reinit_tune import metrics
from reinit_tune.data import Encoded
from reinit_tune.seeding import derive_seed
from reinit_tune.surgery import classifier_head, layer_stack
from reinit_tune.tasks import get_task
from reinit_tune.train import (
    MAX_GRAD_NORM,
    EpochResult,
    TrainSetup,
    eval_batches,
    make_accelerator,
    make_optimizer,
)


@contextmanager
def truncated(model: nn.Module, k: int) -> Iterator[nn.Module]:
    """The base model with only its first ``k`` layers, so layers above k are not computed;
    the full layer list is put back on exit."""
    layers = layer_stack(model)
    if not 0 <= k <= len(layers):
        raise IndexError(f"probe layer {k} out of range 0..{len(layers)}")
    encoder = model.base_model.encoder
    encoder.layer = nn.ModuleList(list(layers)[:k])
    try:
        yield model.base_model
    finally:
        encoder.layer = layers


@torch.no_grad()  # not inference_mode: the probe's backward pass saves these features
def pooled_features(base: nn.Module, data: Encoded, device: torch.device) -> torch.Tensor:
    """Mean over non-padding tokens of ``base``'s last hidden state, one float32 row per
    example, in the order of ``data``."""
    base.eval()
    features = torch.empty(len(data), base.config.hidden_size, device=device)
    for idx in eval_batches(data):
        batch = data.collate(idx)
        mask = batch["attention_mask"].to(device)
        hidden = base(
            input_ids=batch["input_ids"].to(device),
            token_type_ids=batch["token_type_ids"].to(device),
            attention_mask=mask,
        ).last_hidden_state.float()
        weights = mask.unsqueeze(-1).float()
        features[torch.as_tensor(idx, device=device)] = (hidden * weights).sum(1) / weights.sum(1)
    return features


def probe_loss(logits: torch.Tensor, labels: torch.Tensor, regression: bool) -> torch.Tensor:
    # The losses transformers' sequence classifiers use: MSE for STS-B, cross-entropy else.
    if regression:
        return nn.functional.mse_loss(logits.squeeze(-1), labels.float())
    return nn.functional.cross_entropy(logits, labels)


def train_probe(
    model: nn.Module,
    train: Encoded,
    dev: Encoded,
    *,
    layer: int,
    task: str,
    lr: float,
    batch_size: int,
    epochs: int,
    seed: int,
    precision: str = "fp32",
    use_gpu: bool = True,
    on_epoch: Callable[[EpochResult, TrainSetup], None] | None = None,
) -> tuple[list[EpochResult], TrainSetup]:
    """Train a linear probe on hidden state ``layer`` of the frozen ``model``.

    Feature extraction counts in epoch 1's train and eval times (it is the probe's real cost).
    """
    from transformers import get_linear_schedule_with_warmup

    spec = get_task(task)
    probe = classifier_head(model)
    if not isinstance(probe, nn.Linear):
        raise TypeError(f"probing needs a linear classification head, got {type(probe).__name__}")
    accelerator, setup = make_accelerator(use_gpu, precision)
    device = accelerator.device
    model.requires_grad_(False).eval().to(device)
    probe.requires_grad_(True)

    start = time.perf_counter()
    with truncated(model, layer) as base, accelerator.autocast():
        x_train = pooled_features(base, train, device)
        extract_train = time.perf_counter() - start
        x_dev = pooled_features(base, dev, device)
    extract_dev = time.perf_counter() - start - extract_train
    y_train = torch.as_tensor(train.labels, device=device)
    y_dev = torch.as_tensor(dev.labels, device=device)

    generator = torch.Generator().manual_seed(derive_seed(seed, "batch-order"))
    loader = torch.utils.data.DataLoader(
        range(len(train)), batch_size=batch_size, shuffle=True, generator=generator
    )
    optimizer = make_optimizer([{"params": list(probe.parameters()), "lr": lr}], device.type)
    scheduler = get_linear_schedule_with_warmup(optimizer, 0, epochs * len(loader))
    tokens = int(train.lengths.sum())
    results: list[EpochResult] = []
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        for idx in loader:
            idx = idx.to(device)
            loss = probe_loss(probe(x_train[idx]), y_train[idx], spec.is_regression)
            loss.backward()
            nn.utils.clip_grad_norm_(probe.parameters(), MAX_GRAD_NORM)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            loss_sum += loss.detach()
        train_time = time.perf_counter() - start + (extract_train if epoch == 1 else 0.0)
        start = time.perf_counter()
        with torch.inference_mode():
            logits = probe(x_dev)
            eval_loss = float(probe_loss(logits, y_dev, spec.is_regression))
        logits = logits.cpu().numpy()
        preds = logits[:, 0] if spec.is_regression else logits.argmax(axis=-1)
        scores = metrics.compute(task, preds, dev.labels)
        eval_time = time.perf_counter() - start + (extract_dev if epoch == 1 else 0.0)
        result = EpochResult(epoch, float(loss_sum.item()) / len(loader), eval_loss, scores,
                             train_time, eval_time, len(train), tokens)
        results.append(result)
        if on_epoch is not None:
            on_epoch(result, setup)
    return results, setup
