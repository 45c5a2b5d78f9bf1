"""Trial packs: finetuning trials trained as one fused model, each computing what it would
compute run alone.

Trials that share their training recipe (``pack_key``: task, train size, epochs, batch,
learning rate and schedule, precision, model, sequence length, batching) may share a pack
whatever their surgery, and, for the BERT family (``mixes_seeds``), whatever their seed. A
member keeps everything its trial has alone: its weights, gradients, gradient clipping (norm
1.0 per member, as run_glue), AdamW moments and learning rates, its seed's train subset and
batch order (each seed's own ``batch_loader``) and its dropout masks
(``reinit_tune.training.dropout``). ``train_pack`` runs M members with one forward and
one backward per step: each step takes every seed's next batch, pads them to a common length
(right padding that the attention mask hides, so no real token sees it) and gives each
member its seed's batch. Evaluation is fused too (every member scores the same dev
batches). A member whose loss stops being finite is reported as diverged with the loop's
message and reported no further; the others go on.

This module owns the fused training and evaluation and the rule of what may share a pack
(``pack_key``, ``packable``); ``reinit_tune.sweep.packs`` runs a pack as a sweep trial.

Design: ``torch.func`` (``functional_call`` + ``vmap``) over the model's own code, not
member-stacked modules. It runs every supported architecture (``reinit_tune.model.stacks``)
unchanged, with no second implementation whose numbers could drift from the unpacked one.
Dropout draws no random numbers (``reinit_tune.training.dropout``): each member's masks are a
pure function of its trial's key, the step, the call and the element's coordinates, the masks
its trial draws alone, computed for every member by one operator per call whatever the
members and seeds; the template runs the model's eager attention, as every trial does, so its
attention dropout is one of those calls.

Parameters live in one flat ``(members, P)`` buffer (the model's tensors are views of it in
the forward pass), so the optimizer is torch's fused AdamW (run_glue's betas 0.9/0.999, eps
1e-8, no weight decay: the unpacked loop's kernel) over one tensor, or over each member's
runs of equal learning rate where 003 App. E's multiplier gives layers their own; clipping
is two whole-buffer operations. As in the loop, only the word-embedding rows the members'
training data reach get optimizer state (``VocabRows``' argument: every other row has a zero
gradient, so AdamW leaves it bit-identical), and the gradient norm is taken over what the
optimizer holds. On CUDA each batch shape's step is a CUDA graph replay (``PackStep``). Packs
do not checkpoint: a retried pack starts over.

What "computing what it would compute alone" means exactly: the masks, the learning rates
and the update rule are the trial's own to the bit. With one torch thread on the CPU a
member's numbers do not depend on the pack around it where the padding does not (members of
one seed: a pack of 4, two of 2 and four of 1 agree to the last bit, but for weights a few
units in the last place apart where the CPU's vector reductions follow the pack's width, as
on an AVX2 CPU); padding to another seed's longer batch leaves the forward pass bit for bit
but reorders the backward pass's sums over tokens, and a BLAS library with several threads,
or CUDA, picks its reduction order by batch count, so there the numbers agree to rounding
(``benchmarks/RESULTS.md``). An unpacked trial runs the model without ``vmap``: the same
computation in other kernels, equal to rounding. bf16 adds its own rounding to each of these.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap

from reinit_tune import metrics
from reinit_tune.config import TrialConfig
from reinit_tune.data import Encoded
from reinit_tune.hardware import eval_batch_size
from reinit_tune.model.shape import model_type
from reinit_tune.tasks import get_task
from reinit_tune.training import beats
from reinit_tune.training.dropout import CounterDropout, keys_tensor
from reinit_tune.training.finetune import param_groups
from reinit_tune.training.loop import (
    MAX_GRAD_NORM,
    EpochResult,
    Optimization,
    TrainSetup,
    batch_loader,
    eval_batches,
    make_accelerator,
    make_optimizer,
    make_scheduler,
    named_devs,
    retain_freed_memory,
    schedule_factor,
)
from reinit_tune.training.vocab_rows import MAX_SHARE

# The TrialConfig fields in which members of one pack may differ: their surgery, its learning
# rate multiplier, the family that names them, and (``mixes_seeds``) the seed. Every other
# field (model, task, train size, epochs, batch, lr, schedule and warmup, precision, sequence
# length, batching, and ``init_scheme``, which only changes drawn weights but keeps a pack to
# one scheme) must be equal: a field added later is then part of the key until someone shows
# it need not be.
MEMBER_FIELDS = ("experiment", "seed", "reinit_layers", "reinit_heads", "layer_order",
                 "preserve_layernorm", "reinit_lr_multiplier")
PACK_FIELDS = tuple(f.name for f in dataclasses.fields(TrialConfig)
                    if f.name not in MEMBER_FIELDS)
# A graphed pack pads each step to a multiple of this many tokens: one CUDA graph per
# multiple (at most max_seq_length / 16 of them), at most 15 padded tokens a sequence more.
GRAPH_BUCKET = 16
# Model types whose transformers code pads and masks as BERT's does (batch-first activations,
# a 4-D additive mask taken as given by its eager attention): their packs may mix seeds, whose
# batches are padded to a common length.
SEED_MIXING_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "camembert", "electra"})


@lru_cache(maxsize=64)
def mixes_seeds(model: str) -> bool:
    """Whether packs of ``model`` may hold several seeds (its type is in
    ``SEED_MIXING_TYPES``; a model whose type cannot be told here packs one seed at a time)."""
    try:
        return model_type(model) in SEED_MIXING_TYPES
    except Exception:  # noqa: BLE001 - an unreadable model is refused elsewhere; pack alone
        return False


def packable(config: TrialConfig) -> bool:
    """Whether ``config`` can train inside a pack: finetuning of a sequence classifier or
    regressor. Probing (``probe_layer``) trains features of a frozen encoder, sequential
    trials (``intermediate_task``) two phases, QA a span head: they run unpacked."""
    return (config.probe_layer is None and config.intermediate_task is None
            and not config.task_spec.is_qa)


def pack_key(config: TrialConfig) -> tuple:
    """What configs must share to train in one pack (``PACK_FIELDS``' values, and the seed
    where the model cannot mix seeds). An unpackable config (``packable``) gets a key of its
    own, so grouping by key leaves it alone."""
    if not packable(config):
        return ("unpacked", config.trial_id)
    key = tuple((name, getattr(config, name)) for name in PACK_FIELDS)
    return key if mixes_seeds(config.model) else (*key, ("seed", config.seed))


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


def member_lrs(model: nn.Module, config: TrialConfig) -> dict[str, float]:
    """Each parameter's base learning rate in ``config``'s trial (its optimizer group's)."""
    groups = param_groups(model, config.lr, config.reinit_layers, config.reinit_lr_multiplier)
    by_id = {id(p): g["lr"] for g in groups for p in g["params"]}
    return {name: by_id[id(p)] for name, p in model.named_parameters() if id(p) in by_id}


def embedding_rows(model: nn.Module, trains: Iterable[Encoded]) -> tuple[str, torch.Tensor] | None:
    """(name, rows) of the word-embedding matrix whose rows reached by any of ``trains``
    alone get optimizer state, or None where the loop's ``VocabRows`` would not apply. A row
    one member's data reaches and another's does not has a zero gradient in the other, so
    its update there is zero: exact for every member."""
    weight = getattr(model.get_input_embeddings(), "weight", None)
    names = {id(p): n for n, p in model.named_parameters()}
    if weight is None or not weight.requires_grad or id(weight) not in names:
        return None
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if output is not None and getattr(output, "weight", None) is weight:
        return None
    used = np.unique(np.fromiter((t for train in trains for ids in train.input_ids
                                  for t in ids), dtype=np.int64))
    if len(used) > MAX_SHARE * weight.shape[0]:
        return None
    return names[id(weight)], torch.from_numpy(used)


class FusedMembers:
    """M models of one architecture as one flat parameter buffer, run through the first
    one's code. ``add`` copies member i's weights in (so only one member at a time need
    exist outside the buffer); ``rows`` names the word-embedding matrix kept out of the
    buffer, whose reachable rows the optimizer holds on their own."""

    def __init__(self, first: nn.Module, members: int, device: torch.device,
                 rows: str | None = None):
        self.template = copy.deepcopy(first).to("meta")
        if hasattr(self.template, "set_attn_implementation"):  # a transformers model
            self.template.set_attn_implementation("eager")
        self.members, self.device, self.rows_name = members, device, rows
        params = dict(first.named_parameters())
        self.names = [n for n, p in params.items() if n != rows]
        self.shapes = {n: params[n].shape for n in params}
        self.sizes = [params[n].numel() for n in self.names]
        self.flat = torch.empty(members, sum(self.sizes), device=device)
        self.table = (torch.empty(members, *params[rows].shape, device=device)
                      if rows is not None else None)
        self.buffers = {n: b.to(device) for n, b in first.named_buffers()}
        self.added = 0

    @torch.no_grad()
    def add(self, model: nn.Module) -> None:
        """Member ``self.added``'s weights, from ``model`` (which must share the first
        member's buffers: they are held once)."""
        i, params = self.added, dict(model.named_parameters())
        offset = 0
        for name, size in zip(self.names, self.sizes, strict=True):
            self.flat[i, offset:offset + size].copy_(params[name].reshape(-1))
            offset += size
        if self.table is not None:
            self.table[i].copy_(params[self.rows_name])
        for name, buffer in model.named_buffers():
            if not torch.equal(buffer.to(self.device), self.buffers[name]):
                raise ValueError(f"train_pack: members differ in buffer {name}")
        self.added += 1

    def start(self) -> None:
        """After the last ``add``: the buffers become the leaves training differentiates."""
        if self.added != self.members:
            raise ValueError(f"train_pack: {self.added} of {self.members} members added")
        self.flat.requires_grad_(True)
        if self.table is not None:
            self.table.requires_grad_(True)

    def params(self) -> dict[str, torch.Tensor]:
        """Every parameter of every member, ``(members, *shape)``: views of the buffers
        inside the autograd graph, so a step's gradient lands in ``flat.grad`` whole."""
        out = {name: piece.view(self.members, *self.shapes[name]) for name, piece in
               zip(self.names, self.flat.split(self.sizes, dim=1), strict=True)}
        if self.table is not None:
            out[self.rows_name] = self.table
        return out

    def __call__(self, batch: dict[str, torch.Tensor], train: bool, per_member: bool = False,
                 masks: CounterDropout | None = None):
        """Every member's (loss, logits) on ``batch``: one batch for all (``per_member``
        False) or one per member (fields stacked on a first dimension of size M). Training
        needs ``masks`` (its keys one per member): every dropout call draws from them, and
        nothing may draw from a random generator (``vmap``'s ``randomness="error"``)."""
        self.template.train(train)
        if train and masks is None:
            raise ValueError("FusedMembers: a training forward needs its dropout masks")

        def one(params, buffers, batch, keys):
            if masks is not None:
                masks.forward(keys)  # this member's key, vmap-batched
            out = functional_call(self.template, (params, buffers), args=(), kwargs=batch)
            return out.loss, out.logits

        keys = masks.keys if masks is not None else torch.zeros(self.members, device=self.device)
        with warnings.catch_warnings():
            # functorch's notice that an operator falls back to a loop over members
            # (measured, and said in this module's docstring)
            warnings.filterwarnings("ignore", "There is a performance drop", UserWarning)
            return vmap(one, in_dims=(0, None, 0 if per_member else None, 0),
                        randomness="error")(self.params(), self.buffers, batch, keys)

    def member_state(self, i: int) -> dict[str, torch.Tensor]:
        """Member i's weights, named as in the model's ``state_dict``."""
        with torch.no_grad():
            state = {n: p[i].detach().clone() for n, p in self.params().items()}
        return {**state, **{n: b.clone() for n, b in self.buffers.items()}}


def _runs(names: list[str], sizes: list[int], lrs: Mapping[str, float]
          ) -> list[tuple[int, int, float]]:
    """Contiguous (start, end, lr) spans of the flat buffer's row with one learning rate."""
    runs: list[tuple[int, int, float]] = []
    offset = 0
    for name, size in zip(names, sizes, strict=True):
        lr = lrs[name]
        if runs and runs[-1][2] == lr:
            runs[-1] = (runs[-1][0], offset + size, lr)
        else:
            runs.append((offset, offset + size, lr))
        offset += size
    return runs


class PackOptimizer:
    """The unpacked loop's optimizer, for every member at once: per-member gradient
    clipping to ``MAX_GRAD_NORM`` over what the optimizer holds, then torch's fused AdamW
    (``loop.make_optimizer``) with the loop's schedule (``loop.make_scheduler``) at each
    (member, parameter)'s own learning rate; ``rows`` restricts the embedding matrix's state
    to those rows."""

    def __init__(self, fused: FusedMembers, lrs: list[dict[str, float]],
                 rows: torch.Tensor | None, opt: Optimization, total_steps: int,
                 capturable: bool = False):
        self.fused = fused
        self.rows = None if rows is None else rows.to(fused.device)
        data = fused.flat.detach()
        runs = [_runs(fused.names, fused.sizes, member) for member in lrs]
        # (optimizer tensor, where its gradient is in flat.grad or the rows' gradient)
        self.entries: list[tuple[torch.Tensor, tuple]] = []
        groups: dict[float, list[torch.Tensor]] = {}
        if all(r == runs[0] for r in runs) and len(runs[0]) == 1:
            self.entries.append((data, ("flat",)))
            groups.setdefault(runs[0][0][2], []).append(data)
        else:
            for m, member in enumerate(runs):
                for start, end, lr in member:
                    view = data[m, start:end]
                    self.entries.append((view, ("flat", m, start, end)))
                    groups.setdefault(lr, []).append(view)
        self.table_rows = None
        if self.rows is not None:
            self.table_rows = fused.table.detach().index_select(1, self.rows)
            table_lrs = {member[fused.rows_name] for member in lrs}
            if len(table_lrs) == 1:
                self.entries.append((self.table_rows, ("rows",)))
                groups.setdefault(table_lrs.pop(), []).append(self.table_rows)
            else:
                for m, member in enumerate(lrs):
                    view = self.table_rows[m]
                    self.entries.append((view, ("rows", m)))
                    groups.setdefault(member[fused.rows_name], []).append(view)
        # captured in a CUDA graph (``PackStep``), the learning rates are device tensors the
        # scheduler fills and the kernel reads
        self.optimizer = make_optimizer(
            [{"params": p, "lr": torch.tensor(lr, device=fused.device) if capturable else lr}
             for lr, p in groups.items()], fused.device.type, capturable=capturable)
        self.scheduler = make_scheduler(self.optimizer, opt, total_steps)

    @torch.no_grad()
    def step(self) -> None:
        """Clip each member's gradient and take one AdamW step (``advance`` then moves the
        schedule on: outside a captured step)."""
        fused = self.fused
        flat_grad = fused.flat.grad
        norms = [torch.linalg.vector_norm(flat_grad, dim=1)]
        rows_grad = None
        if self.rows is not None:
            rows_grad = fused.table.grad.index_select(1, self.rows)
            fused.table.grad = None
            norms.append(torch.linalg.vector_norm(rows_grad.flatten(1), dim=1))
        # clip_grad_norm_: the norm of what is held, coefficient clamped at 1
        total = torch.linalg.vector_norm(torch.stack(norms, 1), dim=1)
        coef = (MAX_GRAD_NORM / (total + 1e-6)).clamp(max=1.0)
        flat_grad.mul_(coef[:, None])
        if rows_grad is not None:
            rows_grad.mul_(coef.view(-1, *(1,) * (rows_grad.dim() - 1)))
        for tensor, (kind, *where) in self.entries:
            source = flat_grad if kind == "flat" else rows_grad
            if not where:
                tensor.grad = source
            elif kind == "flat":
                m, start, end = where
                tensor.grad = source[m, start:end]
            else:
                tensor.grad = source[where[0]]
        self.optimizer.step()
        if self.rows is not None:
            fused.table.detach().index_copy_(1, self.rows, self.table_rows)
        for tensor, _ in self.entries:
            tensor.grad = None
        fused.flat.grad = None

    def advance(self) -> None:
        """The next step's learning rates."""
        with warnings.catch_warnings():  # a tensor learning rate filled in place: intended
            warnings.simplefilter("ignore")
            self.scheduler.step()


def _pad(batch: dict[str, torch.Tensor], length: int, pad_id: int) -> dict[str, torch.Tensor]:
    """``batch`` right-padded to ``length`` tokens (ids with ``pad_id``, masks and segment
    ids with 0): what ``Encoded.collate`` pads with."""
    extra = length - batch["input_ids"].shape[1]
    if extra == 0:
        return batch
    out = dict(batch)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        if name in batch:
            value = pad_id if name == "input_ids" else 0
            out[name] = torch.nn.functional.pad(batch[name], (0, extra), value=value)
    return out


def additive_mask(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A 2-D padding mask as the 4-D additive mask eager attention adds to its scores: 0
    where a key is attended, the dtype's lowest value where it is padding (what
    transformers' ``eager_mask`` builds; passed 4-D, the model takes it as given)."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
        mask == 0, torch.finfo(dtype).min)[..., None, None, :]


def bucket_length(length: int, bucket: int, most: int) -> int:
    """``length`` rounded up to a multiple of ``bucket`` tokens, at most ``most``: the padded
    lengths a graphed pack captures one CUDA graph each for (``PackStep``)."""
    return min(most, -(-length // bucket) * bucket) if bucket > 1 else length


class SeedBatches:
    """The training steps of a pack: each seed's own batches (its ``batch_loader``, as its
    trial draws them), padded per step to the longest (rounded up to a multiple of
    ``bucket`` tokens), stacked per member. Iterating yields (batch, each seed's real
    tokens); with one seed and ``bucket`` 1 the batch is that seed's own, shared by every
    member, and the model masks its padding itself; otherwise the attention mask is the 4-D
    additive one eager attention takes as given (``additive_mask``)."""

    def __init__(self, trains: Sequence[Encoded], seeds: Sequence[int], opt: Optimization,
                 member_seed: Sequence[int], device: torch.device, bucket: int = 1):
        self.trains = list(trains)
        self.loaders = [batch_loader(len(t), opt.batch_size, s, collate=t.collate,
                                     lengths=t.lengths.tolist() if opt.length_grouped else None)
                        for t, s in zip(self.trains, seeds, strict=True)]
        if len({len(loader) for loader in self.loaders}) != 1:
            raise ValueError("train_pack: the seeds' train subsets differ in size")
        self.index = torch.tensor(list(member_seed), dtype=torch.long)
        self.device, self.bucket, self.most = device, bucket, opt.max_seq_length

    def __len__(self) -> int:
        return len(self.loaders[0])

    def __iter__(self):
        for batches in zip(*self.loaders, strict=True):
            tokens = [int(b["attention_mask"].sum()) for b in batches]
            padded = bucket_length(max(b["input_ids"].shape[1] for b in batches), self.bucket,
                                   max(self.most, *(b["input_ids"].shape[1] for b in batches)))
            if len(batches) == 1 and self.bucket == 1:  # as its trials see it
                yield ({k: v.to(self.device, non_blocking=True) for k, v in batches[0].items()},
                       tokens)
                continue
            stacked = {name: torch.stack([_pad(b, padded, t.pad_id)[name] for b, t in
                                          zip(batches, self.trains, strict=True)])
                       for name in batches[0]}
            stacked["attention_mask"] = additive_mask(stacked["attention_mask"])
            if len(batches) == 1:
                shared = {k: v[0] for k, v in stacked.items()}
                yield {k: v.to(self.device, non_blocking=True) for k, v in shared.items()}, tokens
                continue
            members = {k: v.index_select(0, self.index) for k, v in stacked.items()}
            yield ({k: v.to(self.device, non_blocking=True) for k, v in members.items()},
                   tokens)


class PackStep:
    """One training step of a pack: every member's forward and backward pass, clipping and
    AdamW (``PackOptimizer.step``); returns the members' losses (fp32, on the device).

    With ``graphs`` (CUDA), each batch shape (batch size, padded length) is captured once as
    a CUDA graph and replayed after: its first step runs eagerly on a side stream (warming
    cuBLAS, Triton and the optimizer's state), its second is captured and replayed, and from
    then on the host copies the batch into the graph's input buffers and issues one replay,
    instead of the thousands of operators ``vmap`` dispatches. All shapes share one memory
    pool; the dropout step and the learning rates are device tensors the graph reads, so a
    replay computes exactly what the eager step of that shape computes. ``captured`` counts
    the graphs, ``fallback`` says why graphs were not used where they were asked for."""

    def __init__(self, fused: FusedMembers, optimizer: PackOptimizer, masks: CounterDropout,
                 autocast, per_member: bool, graphs: bool = False):
        self.fused, self.optimizer, self.masks = fused, optimizer, masks
        self.autocast, self.per_member = autocast, per_member
        self.graphs = graphs and fused.device.type == "cuda"
        self.seen: dict[tuple, int] = {}
        self.captured: dict[tuple, tuple] = {}
        self.pool = torch.cuda.graph_pool_handle() if self.graphs else None
        self.fallback: str | None = None

    def _eager(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        with self.autocast, self.masks:
            losses, _ = self.fused(batch, train=True, per_member=self.per_member,
                                   masks=self.masks)
        losses = losses.float()
        losses.sum().backward()  # members are independent: each gets its own gradient
        self.optimizer.step()
        return losses.detach()

    def __call__(self, batch: dict[str, torch.Tensor], step: int) -> torch.Tensor:
        self.masks.step.fill_(step)
        if not self.graphs:
            return self._eager(batch)
        key = tuple((k, tuple(v.shape)) for k, v in sorted(batch.items()))
        if key in self.captured:
            graph, inputs, losses = self.captured[key]
            for name, value in batch.items():
                inputs[name].copy_(value, non_blocking=True)
            graph.replay()
            return losses
        count = self.seen[key] = self.seen.get(key, 0) + 1
        if count == 1:  # warm: eager, on a side stream as graph capture wants
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                losses = self._eager(batch)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.empty_cache()  # its activations' memory, for the graph's pool
            return losses
        inputs = {name: value.clone() for name, value in batch.items()}
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=self.pool):
                losses = self._eager(inputs)
        except RuntimeError as e:  # an operator that cannot be captured: stay eager
            self.graphs, self.fallback = False, f"CUDA graphs off ({e})".splitlines()[0]
            self.fused.flat.grad = None
            return self._eager(batch)
        self.captured[key] = (graph, inputs, losses)
        graph.replay()
        return losses


def _evaluate_members(fused: FusedMembers, devs: dict[str, Encoded], task: str,
                      device: torch.device, bf16: bool
                      ) -> list[tuple[float, dict[str, float]]]:
    """``finetune.evaluate`` of every member over every dev split, fused: (dev loss of the
    first split, scores) per member. With ``bf16`` the forward runs under autocast, as the
    unpacked model's does (Accelerate wraps its forward for training and evaluation alike)."""
    spec = get_task(task)
    members = fused.members
    losses: list[list[float]] = [[] for _ in range(members)]
    scores: list[dict[str, float]] = [{} for _ in range(members)]
    for split, dev in devs.items():
        batches = eval_batches(dev.lengths, eval_batch_size(device.type))
        outputs, loss_sum = [], torch.zeros(members, device=device)
        with torch.no_grad(), (torch.autocast(device.type, dtype=torch.bfloat16) if bf16
                               else contextlib.nullcontext()):
            for idx in batches:
                batch = {k: v.to(device, non_blocking=True) for k, v in dev.collate(idx).items()}
                loss, logits = fused(batch, train=False)
                loss_sum += loss.float() * len(idx)
                outputs.append(logits.float())
                beats.beat()
        logits = torch.cat(outputs, dim=1).cpu().numpy()
        order = np.concatenate([np.asarray(b) for b in batches])
        labels = dev.labels[order]
        names = spec.split_metrics(split)
        sums = loss_sum.tolist()
        for m in range(members):
            preds = logits[m, :, 0] if spec.is_regression else logits[m].argmax(axis=-1)
            with np.errstate(invalid="ignore"):  # a diverged member's NaN logits
                values = metrics.compute(task, preds, labels).values()
            scores[m].update(dict(zip(names, values, strict=True)))
            losses[m].append(sums[m] / len(dev))
    return [(losses[m][0], scores[m]) for m in range(members)]


def _as_trains(train_split: Encoded | Mapping[int, Encoded], seeds: list[int]
               ) -> list[Encoded]:
    if isinstance(train_split, Encoded):
        if len(seeds) != 1:
            raise ValueError("train_pack: members of several seeds need each seed's train "
                             "subset (a mapping seed -> Encoded)")
        return [train_split]
    return [train_split[s] for s in seeds]


def train_pack(
    models: Iterable[nn.Module],
    configs: list[TrialConfig],
    train_split: Encoded | Mapping[int, Encoded],
    dev: Encoded | Mapping[str, Encoded],
    *,
    use_gpu: bool = True,
    on_epoch: Callable[[int, EpochResult, TrainSetup], None] | None = None,
    log_every: int = 0,
    every_epoch: bool = True,
    keep_weights: bool = False,
    graphs: bool | None = None,
) -> tuple[list[MemberOutcome], TrainSetup]:
    """Finetune ``models`` (member i built from ``configs[i]``, all of one ``pack_key``) as
    one pack; ``train_split`` is each seed's train subset (a mapping seed -> split; one split
    where every member has one seed). ``models`` may be a generator: each model is copied
    into the pack and can be dropped before the next is built. Evaluate on the dev split(s)
    after every epoch, or after the last one with ``every_epoch=False``. ``on_epoch(i,
    result, setup)`` gets member i's result of each epoch it finished. Returns each member's
    outcome, in ``configs`` order, with its final weights when ``keep_weights`` and it did
    not diverge.

    An epoch's ``train_time_s`` and ``eval_time_s`` are the pack's wall time divided among
    the members it ran (each member's share of the device). ``graphs``: replay each batch
    shape's step as a CUDA graph (``PackStep``; default: on CUDA, padding each step to a
    multiple of ``GRAPH_BUCKET`` tokens); ``setup.notes`` says if graphs had to be turned
    off."""
    keys = {pack_key(c) for c in configs}
    if len(keys) != 1 or not all(packable(c) for c in configs):
        raise ValueError("train_pack: the configs do not share one pack_key")
    began = time.perf_counter()
    opt = Optimization.of(configs[0])
    seeds = list(dict.fromkeys(c.seed for c in configs))
    member_seed = [seeds.index(c.seed) for c in configs]
    trains = _as_trains(train_split, seeds)
    task = configs[0].task
    devs = named_devs(task, dev)
    accelerator, setup = make_accelerator(use_gpu, opt.precision)
    device = accelerator.device
    if device.type == "cpu":
        retain_freed_memory()
    models = iter(models)
    first = next(models)
    rows = embedding_rows(first, trains)
    fused = FusedMembers(first, len(configs), device, rows=None if rows is None else rows[0])
    lrs = []
    for config, model in zip(configs, _chain(first, models), strict=True):
        lrs.append(member_lrs(model, config))
        fused.add(model)
    del first, model
    fused.start()
    graphed = device.type == "cuda" if graphs is None else graphs and device.type == "cuda"
    batches = SeedBatches(trains, seeds, opt, member_seed, device,
                          bucket=GRAPH_BUCKET if graphed else 1)
    total_steps = opt.epochs * len(batches)
    optimizer = PackOptimizer(fused, lrs, None if rows is None else rows[1], opt, total_steps,
                              capturable=graphed)
    # a captured step must cast its weights inside the graph: no cast cached across steps
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=not graphed)
                if setup.precision == "bf16" else contextlib.nullcontext())
    masks = CounterDropout(keys_tensor([c.seed for c in configs], device),
                           torch.zeros((), dtype=torch.int64, device=device), opt.max_seq_length)
    train_step = PackStep(fused, optimizer, masks, autocast, per_member=len(seeds) > 1,
                          graphs=graphed)
    setup.setup_s = time.perf_counter() - began
    live = set(range(len(configs)))  # members still training (the dead ones are not reported)
    outcomes = [MemberOutcome([]) for _ in configs]
    step = 0
    for epoch in range(1, opt.epochs + 1):
        start = time.perf_counter()
        loss_sum = torch.zeros(len(configs), device=device)
        seed_tokens = [0] * len(seeds)
        logged: list[tuple[int, torch.Tensor, float]] = []
        for batch, tokens in batches:
            seed_tokens = [a + b for a, b in zip(seed_tokens, tokens, strict=True)]
            losses = train_step(batch, step)
            optimizer.advance()
            lr = opt.lr * schedule_factor(step, total_steps, opt.schedule, opt.warmup_ratio)
            loss_sum += losses
            step += 1
            if log_every and step % log_every == 0:
                logged.append((step, losses.clone(), lr))
            beats.beat()
        if train_step.fallback and train_step.fallback not in setup.notes:
            setup.notes.append(train_step.fallback)
        train_losses = [v / len(batches) for v in loss_sum.tolist()]  # the loop's division
        train_time = (time.perf_counter() - start) / len(live)
        for i, v in enumerate(train_losses):
            if i in live and not math.isfinite(v):
                outcomes[i].error = diverged_loss_text(epoch, v, opt.lr)
                live.discard(i)
        if not live:
            break
        start = time.perf_counter()
        if every_epoch or epoch == opt.epochs:
            evaluated = _evaluate_members(fused, devs, task, device,
                                          bf16=setup.precision == "bf16")
        else:
            evaluated = [(math.nan, {})] * len(configs)
        eval_time = (time.perf_counter() - start) / len(live)
        step_losses = torch.stack([v for _, v, _ in logged]).tolist() if logged else []
        for i in sorted(live):
            eval_loss, scores = evaluated[i]
            bad = {name: value for name, value in {"dev loss": eval_loss, **scores}.items()
                   if not math.isfinite(value)} if scores else {}
            if bad:
                outcomes[i].error = diverged_eval_text(epoch, bad, train_losses[i])
                live.discard(i)
                continue
            result = EpochResult(epoch, train_losses[i], eval_loss, scores, train_time,
                                 eval_time, trains[member_seed[i]].num_examples,
                                 seed_tokens[member_seed[i]],
                                 [(s, row[i], lr) for (s, _, lr), row in
                                  zip(logged, step_losses, strict=True)])
            outcomes[i].results.append(result)
            if on_epoch is not None:
                on_epoch(i, result, setup)
        if not live:
            break
    if keep_weights:
        for i in live:
            outcomes[i].weights = fused.member_state(i)
    return outcomes, setup


def _chain(first: nn.Module, rest: Iterable[nn.Module]) -> Iterable[nn.Module]:
    yield first
    yield from rest
