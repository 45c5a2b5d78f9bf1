"""The finetuning loop: Accelerate for device and precision, AdamW, per-epoch dev evaluation.

Optimization is what 003 §2 used through transformers' ``run_glue.py`` defaults: AdamW
(betas 0.9/0.999, eps 1e-8, no weight decay), linear decay of the learning rate to 0 with no
warmup, gradients clipped to norm 1.0; batch 8 and lr 2e-5 come from the ``TrialConfig``.
The loop never copies a value to the host inside an epoch, so GPU steps are not serialized.
The optimizer updates only the word-embedding rows that the training data reaches, which is
exact (``reinit_tune.vocab_rows``). On the CPU, freed memory is kept for reuse
(``retain_freed_memory``): otherwise every step maps and page-faults fresh gradient buffers
(tens of MB for the embedding matrix alone).

Resumption (O3): after each epoch ``TrainSetup.state()`` returns everything the rest of the run
depends on (weights, optimizer moments, scheduler step, the batch-order generator and the
dropout RNG); ``finetune(resume=state)`` continues from the next epoch and computes exactly what
the uninterrupted run would have.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache, partial

import numpy as np
import torch
from torch import nn

from reinit_tune import metrics
from reinit_tune.config import TrialConfig
from reinit_tune.data import Encoded
from reinit_tune.seeding import derive_seed
from reinit_tune.tasks import get_task
from reinit_tune.vocab_rows import VocabRows

EVAL_BATCH_SIZE = 64
MAX_GRAD_NORM = 1.0


@dataclass
class EpochResult:
    epoch: int  # 1-based
    train_loss: float
    eval_loss: float
    metrics: dict[str, float]
    train_time_s: float
    eval_time_s: float
    train_examples: int
    train_tokens: int

    @property
    def train_examples_per_s(self) -> float:
        return self.train_examples / self.train_time_s if self.train_time_s > 0 else float("nan")


@dataclass
class TrainSetup:
    device: str
    precision: str  # what actually ran: "bf16" or "fp32"
    notes: list[str] = field(default_factory=list)
    # Inside ``on_epoch``: the resumable state after the epoch just reported (see
    # ``training_state``); a getter, so epochs that are not checkpointed pay nothing.
    state: Callable[[], dict] | None = None


def make_accelerator(use_gpu: bool, precision: str):
    """A fresh Accelerator for this trial, on the GPU when one is visible and wanted."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import is_bf16_available

    # Accelerate keeps process-wide state; a reused Ray actor runs many trials, possibly with
    # different precisions, so start each trial from a clean state.
    AcceleratorState._reset_state(reset_partial_state=True)
    cpu = not (use_gpu and torch.cuda.is_available())
    mixed = "no"
    notes = []
    if precision == "bf16":
        if cpu or is_bf16_available(ignore_tpu=True):
            mixed = "bf16"
        else:
            notes.append("bf16 unsupported on this GPU; ran fp32")
    accelerator = Accelerator(cpu=cpu, mixed_precision=mixed)
    device = str(accelerator.device)
    if accelerator.device.type == "cuda":
        device += f" ({torch.cuda.get_device_name(accelerator.device)})"
    return accelerator, TrainSetup(device, "bf16" if mixed == "bf16" else "fp32", notes)



@cache
def retain_freed_memory() -> bool:
    """Make glibc's malloc keep freed memory in the process instead of unmapping it.

    PyTorch's CPU tensors come from malloc; large buffers (gradients, autocast copies; the
    embedding gradient alone is 47 MB for MiniLM) are otherwise mapped fresh, page-faulted and
    unmapped on every step, which cost a fifth of a CPU step's CPU time here and more of its
    wall time on a busy machine (benchmarks/RESULTS.md). It is what the jemalloc/tcmalloc
    preload that PyTorch's CPU tuning guide recommends achieves, without the preload; it
    changes no number. Returns whether it applied (glibc only)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl): leave the allocator alone
        return False
    m_trim_threshold, m_mmap_max = -1, -4  # from glibc's malloc.h
    return bool(mallopt(m_mmap_max, 0)) and bool(mallopt(m_trim_threshold, 1 << 30))


def param_groups(
    model: nn.Module, lr: float, layers: Iterable[int] = (), multiplier: float = 1.0
) -> list[dict]:
    """Optimizer groups: the encoder layers at ``layers`` train at ``lr × multiplier`` (all
    their parameters, S8, 003 App. E: "5x larger rate on the reinitialized layers"), every
    other trainable parameter (embeddings, other layers, pooler, classifier) at ``lr``."""
    from reinit_tune.surgery import layer_stack

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


def make_optimizer(groups: list[dict], device_type: str) -> torch.optim.Optimizer:
    """AdamW with run_glue's settings, run by the fused kernel (CPU and CUDA): one pass over
    parameters, gradients and moments per step instead of a dozen for the foreach
    implementation; the same update up to float rounding (``tests/test_batching.py``)."""
    # weight_decay must be explicit: torch's AdamW defaults to 0.01, run_glue to 0.
    return torch.optim.AdamW(
        groups, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
        fused=device_type in ("cuda", "cpu"),
    )


def train_loader(
    train: Encoded, batch_size: int, seed: int, length_grouped: bool = False
) -> torch.utils.data.DataLoader:
    """Batches of ``train`` in a seeded order that changes every epoch.

    ``length_grouped`` draws the order with transformers' ``LengthGroupedSampler`` (the
    Trainer's ``group_by_length``): shuffle, cut into mega-batches of up to 50 batches, sort
    each by length, so a batch holds examples of similar length and carries little padding.
    Otherwise batches are uniformly shuffled, as run_glue's default sampler does.
    """
    generator = torch.Generator().manual_seed(derive_seed(seed, "batch-order"))
    if length_grouped:
        from transformers.trainer_pt_utils import LengthGroupedSampler

        sampler = LengthGroupedSampler(
            batch_size, lengths=train.lengths.tolist(), generator=generator
        )
        # The loader holds the generator too, so resumption can save and restore it.
        return torch.utils.data.DataLoader(
            train, batch_size=batch_size, sampler=sampler, generator=generator,
            collate_fn=train.collate,
        )
    return torch.utils.data.DataLoader(
        train, batch_size=batch_size, shuffle=True, generator=generator, collate_fn=train.collate
    )


def eval_batches(dev: Encoded) -> list[list[int]]:
    # Sorting by length keeps padding minimal; metrics do not depend on example order.
    order = np.argsort(dev.lengths, kind="stable")
    return [order[i : i + EVAL_BATCH_SIZE].tolist() for i in range(0, len(order), EVAL_BATCH_SIZE)]


def evaluate(model: nn.Module, dev: Encoded, task: str, device: torch.device) -> tuple[float, dict]:
    """Mean dev loss and the task's metrics over the whole dev split."""
    spec = get_task(task)
    model.eval()
    outputs, loss_sum = [], torch.zeros((), device=device)
    batches = eval_batches(dev)
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


def training_state(epoch: int, model: nn.Module, optimizer, scheduler,
                   data_order: torch.Generator) -> dict:
    """What ``finetune(resume=...)`` needs to continue after ``epoch`` (tensors and plain
    Python values only, so ``torch.load(weights_only=True)`` reads it back). The tensors are
    the live ones, not copies: save or copy the state before training goes on."""
    return {
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "data_order": data_order.get_state(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def finetune(
    model: nn.Module,
    train: Encoded,
    dev: Encoded,
    *,
    task: str,
    lr: float,
    batch_size: int,
    epochs: int,
    seed: int,
    precision: str = "fp32",
    length_grouped: bool = False,
    use_gpu: bool = True,
    groups: list[dict] | None = None,
    on_epoch: Callable[[EpochResult, TrainSetup], None] | None = None,
    resume: dict | None = None,
) -> tuple[list[EpochResult], TrainSetup]:
    """Finetune ``model`` on ``train`` and evaluate on ``dev`` after every epoch.

    ``resume`` is a ``training_state`` taken after some epoch e of the same trial: training
    continues at epoch e+1 and only epochs e+1.. are returned and passed to ``on_epoch``.
    """
    from transformers import get_linear_schedule_with_warmup

    accelerator, setup = make_accelerator(use_gpu, precision)
    if accelerator.device.type == "cpu":
        retain_freed_memory()
    torch.manual_seed(derive_seed(seed, "dropout"))  # dropout draws from the global generator
    loader = train_loader(train, batch_size, seed, length_grouped)
    if resume is not None:  # before the embedding rows are copied out of the model
        model.load_state_dict(resume["model"])
    model = accelerator.prepare(model)
    groups = groups or param_groups(model, lr)
    rows = VocabRows.for_model(accelerator.unwrap_model(model), train.input_ids, groups)
    if rows is not None:
        groups = rows.swap_into(groups)
    adamw = make_optimizer(groups, accelerator.device.type)
    trained = [p for g in adamw.param_groups for p in g["params"]]
    scheduler = get_linear_schedule_with_warmup(adamw, 0, epochs * len(loader))
    optimizer = accelerator.prepare(adamw)
    if resume is not None:  # after prepare: the optimizer state follows the weights' device
        optimizer.load_state_dict(resume["optimizer"])
        scheduler.load_state_dict(resume["scheduler"])
        loader.generator.set_state(resume["data_order"])
        torch.set_rng_state(resume["torch_rng"])
        if resume["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(resume["cuda_rng"])
    device = accelerator.device
    results: list[EpochResult] = []
    for epoch in range(1 + (resume["epoch"] if resume else 0), epochs + 1):
        model.train()
        start = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        tokens = 0
        for batch in loader:
            tokens += int(batch["attention_mask"].sum())  # computed on the CPU copy: no sync
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            out = model(**batch)
            accelerator.backward(out.loss)
            if rows is not None:
                rows.gather_grad()
            # run_glue's clipping, over what the optimizer holds (the embedding rows, not
            # the matrix whose gradient gather_grad moved)
            torch.nn.utils.clip_grad_norm_(trained, MAX_GRAD_NORM)
            optimizer.step()
            if rows is not None:
                rows.scatter()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            loss_sum += out.loss.detach().float()
        train_loss = float(loss_sum.item()) / len(loader)
        train_time = time.perf_counter() - start
        start = time.perf_counter()
        eval_loss, scores = evaluate(model, dev, task, device)
        result = EpochResult(
            epoch, train_loss, eval_loss, scores, train_time, time.perf_counter() - start,
            len(train), tokens,
        )
        results.append(result)
        if on_epoch is not None:
            setup.state = partial(training_state, epoch, accelerator.unwrap_model(model),
                                  optimizer, scheduler, loader.generator)
            on_epoch(result, setup)
    return results, setup


def finetune_config(
    model: nn.Module, train: Encoded, dev: Encoded, config: TrialConfig, **kwargs
) -> tuple[list[EpochResult], TrainSetup]:
    """``finetune`` with every training setting of ``config`` (the one place that maps a
    trial's fields onto the loop); ``kwargs`` are the run's own (``use_gpu``, ``on_epoch``,
    ``resume``)."""
    return finetune(
        model, train, dev, task=config.task, lr=config.lr, batch_size=config.batch_size,
        epochs=config.epochs, seed=config.seed, precision=config.precision,
        length_grouped=config.length_grouped,
        groups=param_groups(model, config.lr, config.reinit_layers, config.reinit_lr_multiplier),
        **kwargs,
    )
