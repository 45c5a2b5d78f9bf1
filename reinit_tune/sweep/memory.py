"""How much host memory a trial needs at its peak, and whether a Ray error is a memory kill.

A sweep gives Ray each trial's estimate as the trial's ``memory`` resource, so Ray never
places more trials on a node than its memory holds, and pre-flight refuses a trial that fits
no node (``reinit_tune.sweep.cluster.check_resources``). The estimate is an upper bound of
the peak resident set of the trial's worker process:

    baseline                      Python + torch + transformers + datasets + the Ray worker
  + 4 P  (x2 while loading)       fp32 weights, and the pretrained copy surgery starts from
  + 12 P                          gradients and AdamW's two moments (fp32 master weights)
  + 2 P  (bf16 only)              autocast's bf16 copies of the weights
  + train activations             Korthikanti et al. 2022, fp32, at the longest sequence
  + eval activations              one layer's forward at the eval batch (no graph kept)
  + tokenized splits              the whole train and dev splits as Python lists

with P the parameter count; on a GPU trial only the baseline, the loading copy and the
tokenized splits live in host memory. The constants below were fitted to measured peaks
(``benchmarks/bench_memory.py``; the table in ``benchmarks/RESULTS.md``, section "trial
memory") and the total is multiplied by ``MARGIN``.

Ray 2.60 reports a worker killed by its memory monitor (``ray.exceptions.OutOfMemoryError``)
or lost with its node (``NodeDiedError``, ``WorkerCrashedError``) to Tune's actor manager as
an exception it does not handle, and ``tuner.fit()`` raises ``RuntimeError("Caught unexpected
exception: ...")`` from it; ``is_memory_kill`` and ``is_lost_worker`` recognise those.
"""

from __future__ import annotations

import math

from reinit_tune.config import TrialConfig
from reinit_tune.model.shape import ModelShape

GiB = 2**30
# A fresh process that imported the trial code and Ray and trained nothing peaks at 0.46 GiB
# (bench_memory.py); the rest is an allowance, not measured here, for what a live Ray worker
# adds (its core worker, gRPC threads, Tune's session).
BASELINE_BYTES = 900 * 2**20
CUDA_CONTEXT_BYTES = 1 * GiB  # host memory the CUDA runtime and its kernels map
EVAL_BATCH = {False: 64, True: 256}  # reinit_tune.training.loop.EVAL_BATCH_SIZE, on a GPU
# Bytes per stored token of a tokenized split held as Python lists (int objects and list
# slots for input_ids and token_type_ids, ~44, with room for datasets' copies); QA windows
# add a (start, end) offset tuple per token (~120 more). Counted, not measured.
TOKEN_BYTES = 80
QA_TOKEN_BYTES = 170
MARGIN = 1.3  # the estimate's headroom over the fitted terms (allocator slack, noise)
SHARED_SLACK = 1.25  # the most a trial's memory request exceeds its estimate, to share workers


def train_activation_bytes(shape: ModelShape, batch: int, length: int) -> int:
    """What one training step keeps for its backward pass, in fp32: Korthikanti et al.
    2022's s·b·h·(34 + 5·a·s/h) bytes per layer in 16 bits, with the 34 doubled and the
    attention term 13·a·s/h: CPU attention with a padding mask keeps fp32 scores, fp32
    probabilities, a dropout mask and the dropped-out probabilities (4 + 4 + 1 + 4 bytes)."""
    h = shape.hidden_size or 768
    heads = shape.num_heads or max(1, h // 64)
    per_layer = length * batch * h * (68 + 13 * heads * length / h)
    return int(shape.num_layers * per_layer)


def eval_activation_bytes(shape: ModelShape, batch: int, length: int) -> int:
    """The largest live tensors of one layer's forward without a graph: hidden states, the
    4h FFN and the attention scores and probabilities, fp32."""
    h = shape.hidden_size or 768
    heads = shape.num_heads or max(1, h // 64)
    return int(4 * batch * length * (8 * h + 2 * heads * length))


def _rows(config: TrialConfig, data_dir) -> int:
    """Rows of the splits a trial tokenizes (the whole train split: the subset is drawn after
    tokenization), or a GLUE-sized guess where the files cannot be read."""
    from reinit_tune import data

    try:
        source = data.TaskSource.find(config.task, data_dir)
        return sum(source.rows(split) for split in source.spec.splits)
    except Exception:  # noqa: BLE001 - no data here (a dry run elsewhere): the official sizes
        return sum(config.task_spec.rows.values())


def token_bytes(config: TrialConfig, data_dir=None) -> int:
    """The tokenized splits in memory: every row at its mean length (cost.TASK_TOKENS, capped
    at max_seq_length; max_seq_length for a task not measured)."""
    from reinit_tune.sweep.cost import TASK_TOKENS

    tokens = TASK_TOKENS.get(config.task)
    length = config.max_seq_length if tokens is None else min(
        config.max_seq_length, tokens.shuffled * tokens.windows)
    per_token = QA_TOKEN_BYTES if config.task_spec.is_qa else TOKEN_BYTES
    return int(_rows(config, data_dir) * length * per_token)


def member_state_bytes(config: TrialConfig, shape: ModelShape, use_gpu: bool) -> int:
    """Weights, gradients, optimizer moments and step activations of one model in host
    memory (on a GPU trial only the copy the model is built in lives there)."""
    p = shape.parameter_count()
    if use_gpu:
        return 4 * p
    state = 16 * p + (2 * p if config.precision == "bf16" else 0)
    if config.probe_layer is not None:  # a frozen encoder: features and a linear probe
        return 4 * p + eval_activation_bytes(shape, EVAL_BATCH[False], config.max_seq_length)
    return state + train_activation_bytes(shape, config.batch_size, config.max_seq_length)


def trial_bytes(config: TrialConfig, shape: ModelShape, *, use_gpu: bool = False,
                data_dir=None, similarity: bool = False) -> int:
    """Estimated peak resident memory of one trial's worker (see the module docstring)."""
    p = shape.parameter_count()
    total = BASELINE_BYTES + 4 * p + member_state_bytes(config, shape, use_gpu)
    total += token_bytes(config, data_dir)
    if similarity:  # the untrained reference model and the pretrained one it compares with
        total += 8 * p
    if use_gpu:
        total += CUDA_CONTEXT_BYTES
    else:
        total += eval_activation_bytes(shape, EVAL_BATCH[use_gpu], config.max_seq_length)
    return int(math.ceil(total * MARGIN))


def pack_bytes(configs: list[TrialConfig], shape: ModelShape, *, use_gpu: bool = False,
               data_dir=None) -> int:
    """Peak memory of a pack (``reinit_tune.training.pack``): one process and one copy of the
    data, and per member its own state and activations (vmap computes each member's hidden
    states) plus the stacked copy of its weights."""
    if len(configs) == 1:
        return trial_bytes(configs[0], shape, use_gpu=use_gpu, data_dir=data_dir)
    p = shape.parameter_count()
    first = configs[0]
    total = BASELINE_BYTES + token_bytes(first, data_dir) + (CUDA_CONTEXT_BYTES if use_gpu
                                                             else 0)
    total += sum(8 * p + member_state_bytes(c, shape, use_gpu) for c in configs)
    if not use_gpu:
        total += len(configs) * eval_activation_bytes(shape, EVAL_BATCH[False],
                                                      first.max_seq_length)
    return int(math.ceil(total * MARGIN))


def gb(n: float) -> str:
    return f"{n / GiB:.1f} GB"


def too_big(need: int, largest: float, what: str) -> str:
    """The pre-flight line for a trial (or pack) whose estimate exceeds the largest node."""
    return (f"{what} needs an estimated {gb(need)} of memory at its peak, but the largest "
            f"node has {gb(largest)} for Ray's tasks; lower --batch-size or --max-seq-length, "
            "use a smaller --pack-size, or run on a node with more memory")


# -- what Ray reports when a worker dies ----------------------------------------------------
def _chain(error: BaseException | None):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


# How Ray's memory monitor words a kill, and what a trial it killed is stored with
KILLED_TEXT = "running low on memory"
KILLED = ("killed by Ray's memory monitor: its node ran low on memory. Lower --batch-size or "
          "--max-seq-length, or give each trial more memory (fewer trials per node)")


def is_memory_kill(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is Ray's memory monitor killing a worker: its
    ``OutOfMemoryError``, or the ``RuntimeError`` ``tuner.fit()`` wraps it in."""
    try:
        from ray.exceptions import OutOfMemoryError
    except ImportError:  # pragma: no cover - Ray is a dependency
        return False
    return any(isinstance(e, OutOfMemoryError) or KILLED_TEXT in str(e)
               for e in _chain(error))


def is_lost_worker(error: BaseException) -> bool:
    """Whether ``error`` (or its cause) says a trial's worker or node is gone: a memory kill,
    a dead node or a crashed worker. None of them says anything about the trial itself."""
    try:
        from ray.exceptions import NodeDiedError, OutOfMemoryError, WorkerCrashedError
    except ImportError:  # pragma: no cover
        return False
    return is_memory_kill(error) or any(
        isinstance(e, NodeDiedError | OutOfMemoryError | WorkerCrashedError)
        for e in _chain(error))


# -- a sweep's Tune trials ----------------------------------------------------------------
def describe(members: list[TrialConfig]) -> str:
    """The settings that decide a Tune trial's memory, as the user set them."""
    c = members[0]
    pack = f" (a pack of {len(members)} trials)" if len(members) > 1 else ""
    return (f"a trial of {c.model} on {c.task} with --batch-size {c.batch_size} "
            f"--max-seq-length {c.max_seq_length}{pack}")


def tune_trial_bytes(packs: dict[str, list[TrialConfig]], shapes: dict[str, ModelShape], *,
                     use_gpu: bool, data_dir=None, similarity: bool = False) -> dict[str, int]:
    """Estimated peak memory of each Tune trial (a pack, or one trial) by its grid id."""
    return {pid: (trial_bytes(members[0], shapes[members[0].model], use_gpu=use_gpu,
                              data_dir=data_dir, similarity=similarity)
                  if len(members) == 1 else
                  pack_bytes(members, shapes[members[0].model], use_gpu=use_gpu,
                             data_dir=data_dir))
            for pid, members in packs.items()}


def largest(needs: dict[str, int], packs: dict[str, list[TrialConfig]]) -> tuple[int, str]:
    """The largest estimate and what it is of (for ``cluster.check_memory``)."""
    pid = max(needs, key=needs.__getitem__)
    return needs[pid], describe(packs[pid])


def largest_trial(configs: list[TrialConfig], shapes: dict[str, ModelShape], *,
                  use_gpu: bool, data_dir=None, similarity: bool = False) -> tuple[int, str]:
    """``largest`` of the trials run one per Tune trial (pre-flight, before packs)."""
    alone = {c.trial_id: [c] for c in configs}
    return largest(tune_trial_bytes(alone, shapes, use_gpu=use_gpu, data_dir=data_dir,
                                    similarity=similarity), alone)


def fits(need: int, alive: list[dict[str, float]],
         scalable: dict[str, dict[str, float] | None] | None = None) -> bool:
    """Whether some node has ``need`` bytes of Ray's ``memory`` (or might: a node type that
    declares no memory is given the benefit of the doubt)."""
    nodes = [*alive, *(scalable or {}).values()]
    if not nodes or any(r is None or "memory" not in r for r in nodes):
        return True
    return need <= max(r["memory"] for r in nodes)


def shared_requests(needs: dict[str, int], slack: float = SHARED_SLACK) -> dict[str, int]:
    """Each estimate raised to the largest estimate within ``slack`` of it: from the largest
    down, a need joins the level above it unless that level is more than ``slack`` times the
    need, where it starts a level of its own. So trials of similar needs (other tasks, sizes
    or batch sizes of one model) ask Ray for equal resources, and none is given more than
    ``slack`` times its estimate. Tune hands a finished trial's worker on only to a trial
    whose resource request is equal (its actor cache is keyed by the PlacementGroupFactory);
    a fresh worker costs its start and imports, 4-10 s of a trial of seconds."""
    level, out = None, {}
    for pid, need in sorted(needs.items(), key=lambda item: -item[1]):
        if level is None or need * slack < level:
            level = need
        out[pid] = level
    return out


def resources(cpus: float, gpus: float, needs: dict[str, int]):
    """``tune.with_resources``'s per-trial request: the trial's CPUs, GPUs and estimated
    ``memory`` (``shared_requests``), so Ray places on a node only the trials its memory
    holds, and trials of similar needs run on the workers of those before them."""
    from ray import tune

    requests = shared_requests(needs)

    def request(config: dict):
        need = requests.get((config.get("trial") or {}).get("trial_id"), 0)
        return tune.PlacementGroupFactory([{"CPU": cpus, "GPU": gpus, "memory": need}])

    return request
