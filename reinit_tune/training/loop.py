"""The one training loop: device and precision, seeded batches, AdamW, schedule, clipping, per-
epoch evaluation, resumable state. Finetuning and probing (and any later objective) are
``Objective``s this loop trains; none of them has a loop of its own.

Optimization is what 003 §2 used through transformers' ``run_glue.py`` defaults: AdamW (betas
0.9/0.999, eps 1e-8, no weight decay), linear decay of the learning rate to 0 with no warmup,
gradients clipped to norm 1.0; batch 8 and lr 2e-5 come from the ``TrialConfig``
(``Optimization.of``). The schedule can also warm up linearly first, or be 002's slanted
triangular one (``schedule_factor``). The loop never copies a value to the host inside an epoch,
so GPU steps are not serialized. When the objective trains a model's word embeddings, the
optimizer updates only the rows the training data reaches, which is exact (``vocab_rows``). On
the CPU, freed memory is kept for reuse (``retain_freed_memory``): otherwise every step maps and
page-faults fresh gradient buffers (tens of MB for the embedding matrix alone).

Dropout draws no random numbers: every mask is a pure function of the trial's dropout key,
the optimizer step, the call and the element (``reinit_tune.training.dropout``), the one
definition a trial run alone and a member of any pack draw; the model runs its eager attention
so its attention dropout is one of those calls.

Resumption: after each epoch ``TrainSetup.state()`` returns everything the rest of the run
depends on (weights, optimizer moments, scheduler step, the batch-order generator);
``train(..., resume=state)`` continues from the next epoch and computes exactly what the
uninterrupted run would have (its dropout masks follow from the step).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from accelerate.utils import is_bf16_available
from torch import nn
from transformers import get_linear_schedule_with_warmup
from transformers.trainer_pt_utils import LengthGroupedSampler

from reinit_tune.config import default
from reinit_tune.data import Encoded
from reinit_tune.errors import TrialDiverged
from reinit_tune.seeding import derive_seed
from reinit_tune.tasks import get_task
from reinit_tune.training import beats
from reinit_tune.training.dropout import (
    CounterDropout,
    check_masks,
    eager_attention,
    keys_tensor,
)
from reinit_tune.training.vocab_rows import VocabRows

if TYPE_CHECKING:
    from reinit_tune.config import TrialConfig

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
    # With ``log_every`` > 0: (step, training loss of that step, learning rate it used) for
    # every log_every-th optimizer step of the epoch (steps count from 1 over the whole run).
    steps: list[tuple[int, float, float]] = field(default_factory=list)

    @property
    def train_examples_per_s(self) -> float:
        return self.train_examples / self.train_time_s if self.train_time_s > 0 else float("nan")


@dataclass
class TrainSetup:
    device: str
    precision: str  # what actually ran: "bf16" or "fp32"
    notes: list[str] = field(default_factory=list)
    # Seconds from the start of training to its first step that no epoch's time counts
    # (a pack's members copied into its buffers and onto the device)
    setup_s: float = 0.0
    # Inside ``on_epoch``: the resumable state after the epoch just reported (see
    # ``training_state``); a getter, so epochs that are not checkpointed pay nothing.
    state: Callable[[], dict] | None = None


@dataclass(frozen=True)
class Optimization:
    """How a trial trains: its learning rate, batching, epochs, seed and precision. The
    defaults are ``TrialConfig``'s, but batches are uniformly shuffled unless asked."""

    lr: float = default("lr")
    batch_size: int = default("batch_size")
    epochs: int = default("epochs")
    seed: int = default("seed")
    precision: str = default("precision")
    length_grouped: bool = False
    schedule: str = default("schedule")
    warmup_ratio: float = default("warmup_ratio")
    # the stride of the sequence dimensions in dropout's element index (no batch is longer)
    max_seq_length: int = default("max_seq_length")

    @classmethod
    def of(cls, config: TrialConfig) -> Optimization:
        """The training settings of ``config`` (the one place that maps a trial's fields
        onto the loop); a config whose dropout masks this version cannot draw is refused."""
        check_masks(config)
        return cls(lr=config.lr, batch_size=config.batch_size, epochs=config.epochs,
                   seed=config.seed, precision=config.precision,
                   length_grouped=config.length_grouped, schedule=config.schedule,
                   warmup_ratio=config.warmup_ratio, max_seq_length=config.max_seq_length)


class Objective(Protocol):
    """What the loop trains and how it scores it.

    ``prepare`` runs once the accelerator exists: it moves what it needs to the device and
    returns the optimizer's parameter groups. The loop then draws batches of example indices
    (``num_examples``; by ``lengths`` when length-grouped), turns them into batches with
    ``collate``, and for each calls ``loss`` (the mean loss of the batch and its real tokens).
    ``evaluate`` gives the dev loss and metrics after every epoch. ``module`` is what trains
    (its train mode is set each epoch and its weights are the resumable state);
    ``vocab_ids``, when not None, are the token ids of the training data, so the optimizer can
    skip unreachable word-embedding rows. ``first_epoch_extra_s`` is (train, eval) seconds of
    work done in ``prepare`` that belongs to epoch 1's times.
    """

    module: nn.Module
    num_examples: int
    lengths: np.ndarray
    vocab_ids: list[list[int]] | None
    first_epoch_extra_s: tuple[float, float]

    def prepare(self, accelerator: Any, opt: Optimization) -> list[dict]: ...

    def collate(self, indices: list[int]) -> Any: ...

    def loss(self, batch: Any) -> tuple[torch.Tensor, int]: ...

    def evaluate(self) -> tuple[float, dict[str, float]]: ...


def named_devs(task: str, dev: Encoded | Mapping[str, Encoded]) -> dict[str, Encoded]:
    """Every dev split to score, by name; a single ``Encoded`` is the task's first one."""
    if isinstance(dev, Encoded):
        return {get_task(task).dev_splits[0]: dev}
    return dict(dev)


def make_accelerator(use_gpu: bool, precision: str):
    """A fresh Accelerator for this trial, on the GPU when one is visible and wanted."""
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


def make_optimizer(groups: list[dict], device_type: str,
                   capturable: bool = False) -> torch.optim.Optimizer:
    """AdamW with run_glue's settings, run by the fused kernel (CPU and CUDA): one pass over
    parameters, gradients and moments per step instead of a dozen for the foreach
    implementation; the same update up to float rounding (``tests/training``).
    ``capturable``: its step may be captured in a CUDA graph (its step counts stay on the
    device; the groups' learning rates are then device tensors)."""
    # weight_decay must be explicit: torch's AdamW defaults to 0.01, run_glue to 0.
    return torch.optim.AdamW(
        groups, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
        fused=device_type in ("cuda", "cpu"), capturable=capturable,
    )


# Slanted triangular learning rates (Howard & Ruder 2018, eq. 3), with the constants the
# paper recommends and 002 §2 does not change: 10% of the steps rising, lr_max / 32 at the ends.
STLR_CUT_FRAC = 0.1
STLR_RATIO = 32


def schedule_factor(step: int, total_steps: int, schedule: str = "linear",
                    warmup_ratio: float = 0.0) -> float:
    """The learning rate of optimizer step ``step`` (0-based) as a fraction of the peak.

    - "linear" (run_glue): rise from 0 over the first ceil(warmup_ratio * T) steps (as
      transformers' ``warmup_ratio``), then decay linearly to 0 at step T.
    - "slanted-triangular" (Howard & Ruder 2018, eq. 3): cut = floor(T · cut_frac);
      p = t / cut for t < cut, else 1 - (t - cut) / (cut · (1/cut_frac - 1));
      factor = (1 + p · (ratio - 1)) / ratio.
    """
    if schedule == "linear":
        warmup = math.ceil(total_steps * warmup_ratio)
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))
    if schedule == "slanted-triangular":
        cut = max(1, math.floor(total_steps * STLR_CUT_FRAC))
        if step < cut:
            p = step / cut
        else:
            p = 1 - (step - cut) / (cut * (1 / STLR_CUT_FRAC - 1))
        return (1 + max(0.0, p) * (STLR_RATIO - 1)) / STLR_RATIO
    raise ValueError(f"schedule: {schedule!r}")


def make_scheduler(optimizer: torch.optim.Optimizer, opt: Optimization, total_steps: int):
    """The learning-rate scheduler of ``opt.schedule``: transformers' own linear schedule
    (what trials ran before other schedules existed, to the bit), else ``schedule_factor``."""
    if opt.schedule == "linear":
        warmup = math.ceil(total_steps * opt.warmup_ratio)
        return get_linear_schedule_with_warmup(optimizer, warmup, total_steps)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, partial(schedule_factor, total_steps=total_steps, schedule=opt.schedule))


def batch_loader(num_examples: int, batch_size: int, seed: int, *,
                 lengths: Iterable[int] | None = None,
                 collate: Callable[[list[int]], Any] | None = None
                 ) -> torch.utils.data.DataLoader:
    """Batches of example indices 0..n-1 in a seeded order that changes every epoch.

    With ``lengths`` the order comes from transformers' ``LengthGroupedSampler`` (the
    Trainer's ``group_by_length``): shuffle, cut into mega-batches of up to 50 batches, sort
    each by length, so a batch holds examples of similar length and carries little padding.
    Otherwise batches are uniformly shuffled, as run_glue's default sampler does. The loader
    holds the generator, so resumption can save and restore it.
    """
    generator = torch.Generator().manual_seed(derive_seed(seed, "batch-order"))
    examples = range(num_examples)
    collate = collate or torch.tensor
    if lengths is not None:
        sampler = LengthGroupedSampler(batch_size, lengths=list(lengths), generator=generator)
        return torch.utils.data.DataLoader(examples, batch_size=batch_size, sampler=sampler,
                                           generator=generator, collate_fn=collate)
    return torch.utils.data.DataLoader(examples, batch_size=batch_size, shuffle=True,
                                       generator=generator, collate_fn=collate)


def eval_batches(lengths: np.ndarray, batch_size: int = EVAL_BATCH_SIZE) -> list[list[int]]:
    """Example indices in length-sorted batches: minimal padding; metrics do not depend on
    the order of the examples."""
    order = np.argsort(lengths, kind="stable")
    return [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]


def training_state(epoch: int, module: nn.Module, optimizer, scheduler,
                   data_order: torch.Generator) -> dict:
    """What ``train(resume=...)`` needs to continue after ``epoch`` (tensors and plain Python
    values only, so ``torch.load(weights_only=True)`` reads it back). The tensors are the
    live ones, not copies: save or copy the state before training goes on."""
    return {
        "epoch": epoch,
        "model": module.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "data_order": data_order.get_state(),
    }


def train(
    objective: Objective,
    opt: Optimization,
    *,
    use_gpu: bool = True,
    on_epoch: Callable[[EpochResult, TrainSetup], None] | None = None,
    resume: dict | None = None,
    log_every: int = 0,
    every_epoch: bool = True,
) -> tuple[list[EpochResult], TrainSetup]:
    """Train ``objective`` for ``opt.epochs`` epochs and evaluate it after every epoch, or,
    with ``every_epoch=False``, after the last one only (then the other epochs' results have
    a NaN dev loss and no metrics).

    ``resume`` is a ``training_state`` taken after some epoch e of the same run: training
    continues at epoch e+1 and only epochs e+1.. are returned and passed to ``on_epoch``.
    ``log_every`` > 0 records the loss of every log_every-th step (``EpochResult.steps``);
    the losses stay on the device until the epoch ends, so logging costs no synchronization.
    """
    accelerator, setup = make_accelerator(use_gpu, opt.precision)
    if accelerator.device.type == "cpu":
        retain_freed_memory()
    loader = batch_loader(
        objective.num_examples, opt.batch_size, opt.seed, collate=objective.collate,
        lengths=objective.lengths.tolist() if opt.length_grouped else None,
    )
    if resume is not None:  # before the embedding rows are copied out of the model
        objective.module.load_state_dict(resume["model"])
    groups = objective.prepare(accelerator, opt)
    rows = None
    if objective.vocab_ids is not None:
        rows = VocabRows.for_model(accelerator.unwrap_model(objective.module),
                                   objective.vocab_ids, groups)
    if rows is not None:
        groups = rows.swap_into(groups)
    adamw = make_optimizer(groups, accelerator.device.type)
    trained = [p for g in adamw.param_groups for p in g["params"]]
    scheduler = make_scheduler(adamw, opt, opt.epochs * len(loader))
    optimizer = accelerator.prepare(adamw)
    if resume is not None:  # after prepare: the optimizer state follows the weights' device
        optimizer.load_state_dict(resume["optimizer"])
        scheduler.load_state_dict(resume["scheduler"])
        loader.generator.set_state(resume["data_order"])
    device = accelerator.device
    masks = CounterDropout(keys_tensor([opt.seed], device)[0],
                           torch.zeros((), dtype=torch.int64, device=device), opt.max_seq_length)
    extra_train_s, extra_eval_s = objective.first_epoch_extra_s
    results: list[EpochResult] = []
    with eager_attention(accelerator.unwrap_model(objective.module)):
        for epoch in range(1 + (resume["epoch"] if resume else 0), opt.epochs + 1):
            objective.module.train()
            start = time.perf_counter()
            loss_sum = torch.zeros((), device=device)
            tokens = 0
            logged: list[tuple[int, torch.Tensor, float]] = []
            for batch in loader:
                lr = scheduler.get_last_lr()[0]  # the rate this step uses
                masks.step.fill_(scheduler.last_epoch)  # steps over the whole run
                with masks.forward():
                    loss, batch_tokens = objective.loss(batch)
                tokens += batch_tokens
                accelerator.backward(loss)
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
                loss_sum += loss.detach().float()
                step = scheduler.last_epoch  # steps taken over the whole run, resumed or not
                if log_every and step % log_every == 0:
                    logged.append((step, loss.detach().float(), lr))
                beats.beat()
            train_loss = float(loss_sum.item()) / len(loader)
            if not math.isfinite(train_loss):  # no later epoch or dev score can mean anything
                raise TrialDiverged(
                    f"diverged: the training loss of epoch {epoch} is {train_loss} (learning rate "
                    f"{opt.lr:g}); lower the learning rate, or check the training labels")
            step_losses = torch.stack([v for _, v, _ in logged]).tolist() if logged else []
            train_time = time.perf_counter() - start + (extra_train_s if epoch == 1 else 0.0)
            start = time.perf_counter()
            if every_epoch or epoch == opt.epochs:
                eval_loss, scores = objective.evaluate()
            else:
                eval_loss, scores = math.nan, {}
            eval_time = time.perf_counter() - start + (extra_eval_s if epoch == 1 else 0.0)
            bad = {name: value for name, value in {"dev loss": eval_loss, **scores}.items()
                   if not math.isfinite(value)} if scores else {}
            if bad:
                raise TrialDiverged(
                    f"diverged: after epoch {epoch} " + ", ".join(f"{k} is {v}" for k, v in
                                                                bad.items())
                    + f" (training loss {train_loss:.4g}); check the dev labels, or lower the "
                    "learning rate")
            result = EpochResult(epoch, train_loss, eval_loss, scores, train_time, eval_time,
                                 objective.num_examples, tokens,
                                 [(s, v, lr) for (s, _, lr), v in zip(logged, step_losses,
                                                                        strict=True)])
            results.append(result)
            if on_epoch is not None:
                setup.state = partial(training_state, epoch,
                                      accelerator.unwrap_model(objective.module), optimizer,
                                      scheduler, loader.generator)
                on_epoch(result, setup)
    return results, setup
