"""Trial packs: the finetuning trials of one seed trained as one fused model, computing what
each would compute run alone.

Trials that share everything but their surgery (``pack_key``: task, seed, train size,
epochs, batch, learning rate and schedule, precision, model, sequence length, batching) draw
the same train subset, the same batch order and the same dropout stream; they differ only in
their starting weights and, with 003 App. E's multiplier, in the learning rate of some
layers. ``train_pack`` runs M such members with one forward and one backward per step over
the shared batch: every member keeps its own weights, gradients, gradient clipping (norm 1.0
per member, as run_glue), AdamW moments and learning rates, and gets its own per-epoch train
loss and dev scores (evaluation is fused too). A member whose loss stops being finite is
reported as diverged with the loop's message and dropped; the others go on.

This module owns the fused training and evaluation and the rule of what may share a pack
(``pack_key``, ``packable``); ``reinit_tune.sweep.packs`` runs a pack as a sweep trial.

Design: ``torch.func`` (``stack_module_state`` + ``functional_call`` + ``vmap(randomness=
"same")``) over the model's own code, not member-stacked modules. Why:

- It is exact where it matters most, dropout. The unpacked loop seeds the global RNG once per
  trial (``derive_seed(seed, "dropout")``) and every dropout call of every step draws its
  mask from it. Under ``vmap(randomness="same")`` each dropout call draws one mask of the
  unbatched shape from the same global RNG and applies it to every member, so the draws and
  their order are those of an unpacked run: member m gets exactly the masks trial m gets
  alone, and the RNG state after a step is the one after an unpacked step (checked on
  torch 2.13 CPU, with the SDPA attention whose dropout runs inside the attention op;
  ``tests/training/test_pack.py`` compares whole runs). On CUDA this holds because every
  CUDA trial, packed or not, runs eager attention and ``bernoulli_`` dropout
  (``reinit_tune.training.exact``: CUDA's own dropout and fused attention kernels draw
  differently from vmap's rule; measured on an H200, pack against members apart within
  1.7e-7 in fp32). Member-stacked modules would have to reproduce that per-shape draw order
  by hand in every dropout site.
- It runs every supported architecture (``reinit_tune.model.stacks``) unchanged: no
  per-architecture rewrite of attention, norms and embeddings that member-stacked modules
  need, and no second implementation whose numbers could drift from the unpacked one.
- Its cost: there is no vmap batching rule for the CPU SDPA kernel, so on the CPU attention
  falls back to a per-member loop inside the fused step; on CUDA nothing falls back, but
  attention is eager (2.3-2.7x the fused kernel's time for attention alone on an H200, and
  still faster than a per-member loop of the fused kernel). The matmuls, norms, embeddings,
  losses and the optimizer are batched over members. Measured in ``benchmarks/RESULTS.md``
  (``bench_pack.py`` on CPUs; ``bench_gpu.py`` and ``gpu_checks.py`` on an H200: a 13-member
  bert-base pack ran 10.8x one trial per GPU at 500 examples).

The optimizer is AdamW written over the stacked tensors (run_glue's betas 0.9/0.999, eps
1e-8, no weight decay) with a learning rate per member and parameter: the same update as the
loop's fused AdamW up to float rounding. As in the loop, only the word-embedding rows the
training subset reaches get optimizer state (``VocabRows``' argument: every other row has a
zero gradient, so AdamW leaves it bit-identical), and the gradient norm is taken over what
the optimizer holds. Packs do not checkpoint: a retried pack starts over.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from reinit_tune import metrics
from reinit_tune.config import TrialConfig
from reinit_tune.data import Encoded
from reinit_tune.hardware import eval_batch_size
from reinit_tune.seeding import derive_seed
from reinit_tune.tasks import get_task
from reinit_tune.training.exact import exact_on
from reinit_tune.training.finetune import param_groups
from reinit_tune.training.loop import (
    MAX_GRAD_NORM,
    EpochResult,
    Optimization,
    TrainSetup,
    batch_loader,
    eval_batches,
    make_accelerator,
    named_devs,
    retain_freed_memory,
    schedule_factor,
)
from reinit_tune.training.vocab_rows import MAX_SHARE

# The TrialConfig fields in which members of one pack may differ: their surgery, its learning
# rate multiplier, and the family that names them. Every other field (model, task, train size,
# seed, epochs, batch, lr, schedule and warmup, precision, sequence length, batching, and
# ``init_scheme``, which only changes drawn weights but keeps a pack to one scheme) must be
# equal: a field added later is then part of the key until someone shows it need not be.
MEMBER_FIELDS = ("experiment", "reinit_layers", "reinit_heads", "layer_order",
                 "preserve_layernorm", "reinit_lr_multiplier")
PACK_FIELDS = tuple(f.name for f in dataclasses.fields(TrialConfig)
                    if f.name not in MEMBER_FIELDS)

BETAS = (0.9, 0.999)
EPS = 1e-8
CLIP_EPS = 1e-6  # torch.nn.utils.clip_grad_norm_'s


def packable(config: TrialConfig) -> bool:
    """Whether ``config`` can train inside a pack: finetuning of a sequence classifier or
    regressor. Probing (``probe_layer``) trains features of a frozen encoder, sequential
    trials (``intermediate_task``) two phases, QA a span head: they run unpacked."""
    return (config.probe_layer is None and config.intermediate_task is None
            and not config.task_spec.is_qa)


def pack_key(config: TrialConfig) -> tuple:
    """What configs must share to train in one pack (``PACK_FIELDS``' values). An unpackable
    config (``packable``) gets a key of its own, so grouping by key leaves it alone."""
    if not packable(config):
        return ("unpacked", config.trial_id)
    return tuple((name, getattr(config, name)) for name in PACK_FIELDS)


def diverged_loss_text(epoch: int, train_loss: float, lr: float) -> str:
    """``TrialDiverged``'s message for a non-finite training loss (the loop's wording)."""
    return (f"diverged: the training loss of epoch {epoch} is {train_loss} (learning rate "
            f"{lr:g}); lower the learning rate, or check the training labels")


def diverged_eval_text(epoch: int, bad: Mapping[str, float], train_loss: float) -> str:
    """``TrialDiverged``'s message for a non-finite dev loss or score (the loop's wording)."""
    return (f"diverged: after epoch {epoch} " + ", ".join(f"{k} is {v}" for k, v in bad.items())
            + f" (training loss {train_loss:.4g}); check the dev labels, or lower the "
            "learning rate")


@dataclass
class MemberOutcome:
    """What one member of a pack ended with: its epochs' results (as the loop returns them)
    and, when it diverged, the error the unpacked trial would have raised."""

    results: list[EpochResult]
    error: str | None = None
    weights: dict[str, torch.Tensor] | None = None  # with train_pack(keep_weights=True)


def _member_lrs(model: nn.Module, config: TrialConfig) -> dict[str, float]:
    """Each parameter's base learning rate in ``config``'s trial (its optimizer group's)."""
    groups = param_groups(model, config.lr, config.reinit_layers, config.reinit_lr_multiplier)
    by_id = {id(p): g["lr"] for g in groups for p in g["params"]}
    return {name: by_id[id(p)] for name, p in model.named_parameters() if id(p) in by_id}


def _embedding_rows(model: nn.Module, train: Encoded, names: dict[int, str]
                    ) -> tuple[str, torch.Tensor] | None:
    """(name, rows) of the word-embedding matrix whose reachable rows alone get optimizer
    state, or None where the loop's ``VocabRows`` would not apply."""
    weight = getattr(model.get_input_embeddings(), "weight", None)
    if weight is None or not weight.requires_grad or id(weight) not in names:
        return None
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if output is not None and getattr(output, "weight", None) is weight:
        return None
    used = np.unique(np.fromiter((t for ids in train.input_ids for t in ids), dtype=np.int64))
    if len(used) > MAX_SHARE * weight.shape[0]:
        return None
    return names[id(weight)], torch.from_numpy(used)


class FusedMembers:
    """M models of one architecture as stacked tensors, run through the first one's code."""

    def __init__(self, models: list[nn.Module], device: torch.device):
        self.template = copy.deepcopy(models[0]).to("meta")
        self.params, self.buffers = stack_module_state([m.to(device) for m in models])

    def keep(self, index: torch.Tensor) -> None:
        """Drop every member not in ``index`` (positions in the stack)."""
        self.params = {n: p.detach()[index].requires_grad_(p.requires_grad)
                       for n, p in self.params.items()}
        self.buffers = {n: b[index] for n, b in self.buffers.items()}

    def __call__(self, batch: dict[str, torch.Tensor], train: bool):
        """The model's output of every member on the shared ``batch`` (fields stacked)."""
        self.template.train(train)

        def one(params, buffers, batch):
            out = functional_call(self.template, (params, buffers), args=(), kwargs=batch)
            return out.loss, out.logits

        with warnings.catch_warnings():
            # functorch's notice that attention falls back to a loop over members (no CPU
            # batching rule): expected, measured, and said in this module's docstring
            warnings.filterwarnings("ignore", "There is a performance drop", UserWarning)
            return vmap(one, in_dims=(0, 0, None), randomness="same")(
                self.params, self.buffers, batch)

    def member_state(self, i: int) -> dict[str, torch.Tensor]:
        """Member i's weights, named as in the model's ``state_dict``."""
        return {n: t[i].detach() for n, t in {**self.params, **self.buffers}.items()}


class StackedAdamW:
    """AdamW over stacked parameters with one learning rate per (parameter, member), and
    per-member gradient clipping; ``rows`` restricts one parameter's state to those rows."""

    def __init__(self, params: dict[str, torch.Tensor], base_lrs: dict[str, list[float]],
                 rows: tuple[str, torch.Tensor] | None):
        self.names = list(params)
        self.base_lrs = base_lrs
        self.rows = None if rows is None else (rows[0], rows[1].to(params[rows[0]].device))
        self.step_count = 0
        self.exp_avg: dict[str, torch.Tensor] = {}
        self.exp_avg_sq: dict[str, torch.Tensor] = {}
        for name in self.names:
            shape = self._held(name, params[name].detach()).shape
            zeros = torch.zeros(shape, dtype=params[name].dtype, device=params[name].device)
            self.exp_avg[name], self.exp_avg_sq[name] = zeros, zeros.clone()

    def _held(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        if self.rows is not None and name == self.rows[0]:
            return tensor.index_select(1, self.rows[1])
        return tensor

    def keep(self, index: torch.Tensor, keep_list: list[int]) -> None:
        for state in (self.exp_avg, self.exp_avg_sq):
            for name in self.names:
                state[name] = state[name][index]
        self.base_lrs = {n: [lrs[i] for i in keep_list] for n, lrs in self.base_lrs.items()}

    @torch.no_grad()
    def step(self, params: dict[str, torch.Tensor], factor: float) -> None:
        """Clip each member's gradient to norm ``MAX_GRAD_NORM``, then one AdamW step at
        ``base lr × factor`` (the schedule's factor of this step)."""
        grads = {n: self._held(n, params[n].grad) for n in self.names if params[n].grad is not None}
        members = next(iter(params.values())).shape[0]
        # clip_grad_norm_: the norm of the per-tensor norms, coefficient clamped at 1
        norms = torch.stack([g.reshape(members, -1).norm(dim=1) for g in grads.values()], 1)
        coef = (MAX_GRAD_NORM / (norms.norm(dim=1) + CLIP_EPS)).clamp(max=1.0)
        self.step_count += 1
        correction1 = 1 - BETAS[0] ** self.step_count
        correction2_sqrt = math.sqrt(1 - BETAS[1] ** self.step_count)
        lr_tensors: dict[tuple[float, ...], torch.Tensor] = {}
        for name, grad in grads.items():
            view = (members,) + (1,) * (grad.dim() - 1)
            grad.mul_(coef.view(view))
            lrs = tuple(lr * factor for lr in self.base_lrs[name])  # as LambdaLR computes it
            if lrs not in lr_tensors:
                lr_tensors[lrs] = torch.tensor(lrs, dtype=grad.dtype, device=grad.device)
            step_size = (lr_tensors[lrs] / correction1).view(view)
            exp_avg, exp_avg_sq = self.exp_avg[name], self.exp_avg_sq[name]
            exp_avg.lerp_(grad, 1 - BETAS[0])
            exp_avg_sq.mul_(BETAS[1]).addcmul_(grad, grad, value=1 - BETAS[1])
            denom = (exp_avg_sq.sqrt() / correction2_sqrt).add_(EPS)
            update = exp_avg / denom * step_size
            param = params[name]
            if self.rows is not None and name == self.rows[0]:
                param.index_add_(1, self.rows[1], -update)
            else:
                param.sub_(update)
        for name in self.names:
            params[name].grad = None


def _evaluate_members(fused: FusedMembers, devs: dict[str, Encoded], task: str,
                      device: torch.device, live: int, bf16: bool
                      ) -> list[tuple[float, dict[str, float]]]:
    """``finetune.evaluate`` of every member over every dev split, fused: (dev loss of the
    first split, scores) per member. With ``bf16`` the forward runs under autocast, as the
    unpacked model's does (Accelerate wraps its forward for training and evaluation alike)."""
    spec = get_task(task)
    losses: list[list[float]] = [[] for _ in range(live)]
    scores: list[dict[str, float]] = [{} for _ in range(live)]
    for split, dev in devs.items():
        batches = eval_batches(dev.lengths, eval_batch_size(device.type))
        outputs, loss_sum = [], torch.zeros(live, device=device)
        with torch.no_grad(), (torch.autocast(device.type, dtype=torch.bfloat16) if bf16
                               else contextlib.nullcontext()):
            for idx in batches:
                batch = {k: v.to(device, non_blocking=True) for k, v in dev.collate(idx).items()}
                loss, logits = fused(batch, train=False)
                loss_sum += loss.float() * len(idx)
                outputs.append(logits.float())
        logits = torch.cat(outputs, dim=1).cpu().numpy()
        order = np.concatenate([np.asarray(b) for b in batches])
        labels = dev.labels[order]
        names = spec.split_metrics(split)
        sums = loss_sum.tolist()
        for m in range(live):
            preds = logits[m, :, 0] if spec.is_regression else logits[m].argmax(axis=-1)
            values = metrics.compute(task, preds, labels).values()
            scores[m].update(dict(zip(names, values, strict=True)))
            losses[m].append(sums[m] / len(dev))
    return [(losses[m][0], scores[m]) for m in range(live)]


def train_pack(
    models: list[nn.Module],
    configs: list[TrialConfig],
    train_split: Encoded,
    dev: Encoded | Mapping[str, Encoded],
    *,
    use_gpu: bool = True,
    on_epoch: Callable[[int, EpochResult, TrainSetup], None] | None = None,
    log_every: int = 0,
    every_epoch: bool = True,
    keep_weights: bool = False,
) -> tuple[list[MemberOutcome], TrainSetup]:
    """Finetune ``models`` (member i built from ``configs[i]``, all of one ``pack_key``) as
    one pack on ``train_split``; evaluate on the dev split(s) after every epoch, or after the
    last one with ``every_epoch=False``. ``on_epoch(i, result, setup)`` gets member i's
    result of each epoch it finished. Returns each member's outcome, in ``configs`` order,
    with its final weights when ``keep_weights`` and it did not diverge.

    An epoch's ``train_time_s`` and ``eval_time_s`` are the pack's wall time divided among
    the members it ran (each member's share of the device)."""
    keys = {pack_key(c) for c in configs}
    if len(keys) != 1 or not all(packable(c) for c in configs):
        raise ValueError("train_pack: the configs do not share one pack_key")
    if len(models) != len(configs):
        raise ValueError("train_pack: one model per config")
    opt = Optimization.of(configs[0])
    task = configs[0].task
    devs = named_devs(task, dev)
    accelerator, setup = make_accelerator(use_gpu, opt.precision)
    device = accelerator.device
    if device.type == "cpu":
        retain_freed_memory()
    torch.manual_seed(derive_seed(opt.seed, "dropout"))  # the loop's one dropout stream
    loader = batch_loader(
        len(train_split), opt.batch_size, opt.seed, collate=train_split.collate,
        lengths=train_split.lengths.tolist() if opt.length_grouped else None,
    )
    names = {id(p): n for n, p in models[0].named_parameters()}
    member_lrs = [_member_lrs(m, c) for m, c in zip(models, configs, strict=True)]
    rows = _embedding_rows(models[0], train_split, names)
    fused = FusedMembers(models, device)
    trained = [n for n in fused.params if n in member_lrs[0]]
    for name, p in fused.params.items():
        p.requires_grad_(name in trained)
    adamw = StackedAdamW({n: fused.params[n] for n in trained},
                         {n: [lrs[n] for lrs in member_lrs] for n in trained}, rows)
    total_steps = opt.epochs * len(loader)
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16)
                if setup.precision == "bf16" else None)
    live = list(range(len(configs)))  # config positions of the members still training
    outcomes = [MemberOutcome([]) for _ in configs]
    step = 0
    with exact_on(device, [fused.template]):
        for epoch in range(1, opt.epochs + 1):
            start = time.perf_counter()
            loss_sum = torch.zeros(len(live), device=device)
            tokens = 0
            logged: list[tuple[int, torch.Tensor, float]] = []
            for batch in loader:
                factor = schedule_factor(step, total_steps, opt.schedule, opt.warmup_ratio)
                tokens += int(batch["attention_mask"].sum())
                batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
                if autocast is not None:
                    with autocast:
                        losses, _ = fused(batch, train=True)
                    losses = losses.float()
                else:
                    losses, _ = fused(batch, train=True)
                losses.sum().backward()  # members are independent: each gets its own gradient
                adamw.step({n: fused.params[n] for n in trained}, factor)
                loss_sum += losses.detach().float()
                step += 1
                if log_every and step % log_every == 0:
                    logged.append((step, losses.detach().float(), opt.lr * factor))
            train_losses = [v / len(loader) for v in loss_sum.tolist()]  # the loop's division
            train_time = (time.perf_counter() - start) / len(live)
            finite = [i for i, v in enumerate(train_losses) if math.isfinite(v)]
            for i, v in enumerate(train_losses):
                if not math.isfinite(v):
                    outcomes[live[i]].error = diverged_loss_text(epoch, v, opt.lr)
            start = time.perf_counter()
            if len(finite) < len(live):
                _keep(fused, adamw, finite)
                logged = [(s, v[finite], lr) for s, v, lr in logged]
                train_losses = [train_losses[i] for i in finite]
                live = [live[i] for i in finite]
            if not live:
                break
            if every_epoch or epoch == opt.epochs:
                evaluated = _evaluate_members(fused, devs, task, device, len(live),
                                              bf16=autocast is not None)
            else:
                evaluated = [(math.nan, {})] * len(live)
            eval_time = (time.perf_counter() - start) / len(live)
            step_losses = torch.stack([v for _, v, _ in logged]).tolist() if logged else []
            still = []
            for i, member in enumerate(live):
                eval_loss, scores = evaluated[i]
                bad = {name: value for name, value in {"dev loss": eval_loss, **scores}.items()
                       if not math.isfinite(value)} if scores else {}
                if bad:
                    outcomes[member].error = diverged_eval_text(epoch, bad, train_losses[i])
                    continue
                still.append(i)
                result = EpochResult(epoch, train_losses[i], eval_loss, scores, train_time,
                                     eval_time, len(train_split), tokens,
                                     [(s, row[i], lr) for (s, _, lr), row in
                                      zip(logged, step_losses, strict=True)])
                outcomes[member].results.append(result)
                if on_epoch is not None:
                    on_epoch(member, result, setup)
            if len(still) < len(live):
                _keep(fused, adamw, still)
                live = [live[i] for i in still]
                if not live:
                    break
        if keep_weights:
            for i, member in enumerate(live):
                outcomes[member].weights = fused.member_state(i)
    return outcomes, setup


def _keep(fused: FusedMembers, adamw: StackedAdamW, positions: list[int]) -> None:
    """Go on with the members at ``positions`` of the live stack only."""
    index = torch.tensor(positions, dtype=torch.long,
                         device=next(iter(fused.params.values())).device)
    fused.keep(index)
    adamw.keep(index, positions)
