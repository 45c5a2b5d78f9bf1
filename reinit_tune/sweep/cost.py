"""What a sweep will cost before it runs: device-hours from measured per-token costs.

A trial's time is modelled from what the training loop does (``reinit_tune.training``):

    train  = steps x step_s + padded train tokens x token_s      (per epoch, summed)
    eval   = padded dev tokens x eval_token_s                    (after every epoch)
    total  = train + eval + TRIAL_SETUP_S

``step_s`` is the per-step cost that does not grow with sequence length (optimizer step over
every parameter, gradient clipping, Python and kernel launches), ``token_s`` the forward and
backward cost per token.

GPU trials run in packs (``reinit_tune.sweep.packs``): the estimate forms the packs the
sweep will form (``Estimate.packs``) and costs each as ``PACK_SETUP_S`` plus its members'
times, with coefficients measured per member inside a pack of the size that forms
(``calibrate_pack``): a member's share of the pack's step, token and setup costs. A pack
holds one GPU (``--gpus-per-trial``) for its whole duration, so GPU-hours are the packs'
times summed. Padded tokens per example come from ``TASK_TOKENS``, measured on the
GLUE splits with the BERT uncased vocabulary as the loop pads them (length-grouped or shuffled
batches of 8, dev in length-sorted batches of 64). The coefficients come from ``RECORDED``
(measured per model shape and precision on the machine named there) or from ``calibrate``,
a short synthetic run on the current device (``--calibrate``). Regenerate both tables with
``python benchmarks/calibrate_cost.py``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from reinit_tune import data, hardware
from reinit_tune.config import TrialConfig
from reinit_tune.errors import DataNotFoundError, ReinitTuneError
from reinit_tune.model.shape import BERT_VOCAB, ModelShape
from reinit_tune.tasks import get_task
from reinit_tune.wording import counted

TRIAL_SETUP_S = 1.0  # model copy + surgery + data subset + Ray bookkeeping (bench_sweep.py)
# A pack's own start on a reused worker: its data (tokenized once per worker), the dev
# splits, the first model from the cached checkpoint, CUDA's warm-up; its members' setup is
# theirs (``Coefficients.setup_s``).
PACK_SETUP_S = 5.0


@dataclass(frozen=True)
class TaskTokens:
    """Mean tokens per example after padding, at max_seq_length ``length`` and batch 8; for
    QA, per window, with ``windows`` windows per question."""

    grouped: float  # length-grouped training batches
    shuffled: float  # uniformly shuffled training batches
    dev: float  # length-sorted dev batches of 64
    windows: float = 1.0  # train windows per example (QA contexts longer than a window)
    dev_windows: float = 1.0
    length: int = 128  # the max_seq_length it was measured at


@dataclass(frozen=True)
class Coefficients:
    step_s: float
    token_s: float
    eval_token_s: float
    setup_s: float = TRIAL_SETUP_S  # per trial (per member, in a pack)
    # a member's share, measured in packs of this many members of this many seeds (1, 1:
    # trials run alone); an estimate for larger packs or more seeds extrapolates
    members: int = 1
    seeds: int = 1

    def __str__(self) -> str:
        where = (f"a member of a pack of {self.members} ({counted(self.seeds, 'seed')})"
                 if self.members > 1 else "a trial")
        return (f"{where}: {_three(1e3 * self.step_s)} ms a step + "
                f"{_three(1e6 * self.token_s)} us a token, evaluation "
                f"{_three(1e6 * self.eval_token_s)} us a token, setup {self.setup_s:.2g} s")


def _three(x: float) -> str:
    """Three significant digits, never in exponent form (1680, not 1.68e+03)."""
    return f"{float(f'{x:.3g}'):.12g}"


# Measured by benchmarks/calibrate_cost.py on the local Parquet files (QNLI on its subset).
TASK_TOKENS: dict[str, TaskTokens] = {
    "sst2": TaskTokens(13.81, 29.67, 26.96),
    "qnli": TaskTokens(50.27, 77.12, 51.66),
    "cola": TaskTokens(11.61, 18.26, 12.42),
    "mrpc": TaskTokens(53.98, 71.94, 57.29),
    "rte": TaskTokens(67.60, 118.54, 76.25),
    "stsb": TaskTokens(28.67, 53.00, 32.98),
    "wnli": TaskTokens(39.47, 64.52, 66.24),
    # MNLI on its local 9,999-row train subset; its dev from held-out train rows (no dev
    # split offline). SQuAD 2.0 at run_qa's 384-token windows, per window.
    "mnli": TaskTokens(41.23, 69.56, 40.76),
    "squad_v2": TaskTokens(176.73, 295.13, 180.87, windows=1.019, dev_windows=1.022,
                           length=384),
}

# (num_layers, hidden_size, precision) -> coefficients, measured on RECORDED_DEVICE by
# ``python benchmarks/calibrate_cost.py --shapes 6x384 12x768 --threads 1`` (load 1.0-1.5).
# One torch thread is what a sweep trial with --cpus-per-trial 1 runs, so on CPUs the
# estimate is in core-hours.
RECORDED_CPU = "AMD EPYC family 25 model 17 (avx512_bf16)"  # hardware.cpu_name() there
RECORDED_DEVICE = f"1 CPU core of an {RECORDED_CPU}, 1 torch thread"
RECORDED: dict[tuple[int, int, str], Coefficients] = {
    (6, 384, "fp32"): Coefficients(0.03814, 0.0007925, 0.0002494),
    (6, 384, "bf16"): Coefficients(0.03616, 0.0004567, 0.0001351),
    (12, 768, "fp32"): Coefficients(0.1636, 0.005805, 0.001829),
    (12, 768, "bf16"): Coefficients(0.1926, 0.003092, 0.0009721),
}


# (num_layers, hidden_size, precision) -> a member's coefficients inside a pack on
# RECORDED_GPU_DEVICE, whose free memory sizes the packs a dry run without a GPU forms
# (``RECORDED_GPU_FREE``). bert-base, bf16: fitted to two measured packs
# (``benchmarks/RESULTS.md``, "Packs that fill the GPU"): 20 members on SST-2's batches of 3
# seeds (5.24 ms a member-step at ~296 padded tokens; setup 0.52 s, eval 1.7 us a token) and
# 28 members at 8 x 128 tokens (7.95 ms a member-step).
RECORDED_GPU_DEVICE = "NVIDIA H200"
RECORDED_GPU_FREE = 139 * 2**30
RECORDED_GPU: dict[tuple[int, int, str], Coefficients] = {
    (12, 768, "bf16"): Coefficients(4.14e-3, 3.72e-6, 1.7e-6, setup_s=0.52, members=28,
                                    seeds=3),
}


def _flops_per_token(shape: ModelShape) -> float:
    return 12.0 * shape.num_layers * shape.hidden_size**2  # matmul weights per layer


def recorded_coefficients(shape: ModelShape, precision: str,
                          table: dict[tuple[int, int, str], Coefficients] | None = None
                          ) -> tuple[Coefficients, str]:
    """The coefficients of this shape in ``table`` (default ``RECORDED``), or those of the
    nearest shape there scaled by weights per token (token costs) and parameters (step cost),
    with a note saying so."""
    table = RECORDED if table is None else table
    key = (shape.num_layers, shape.hidden_size, precision)
    if key in table:
        return table[key], "recorded table"
    same_precision = [k for k in table if k[2] == precision] or list(table)
    near = min(same_precision, key=lambda k: abs(math.log(
        _flops_per_token(ModelShape(k[0], 1, k[1])) / _flops_per_token(shape))))
    base, near_shape = table[near], ModelShape(near[0], 1, near[1])
    token = _flops_per_token(shape) / _flops_per_token(near_shape)
    step = shape.parameter_count() / near_shape.parameter_count()
    return (
        Coefficients(base.step_s * step, base.token_s * token, base.eval_token_s * token,
                     base.setup_s),
        f"scaled from the recorded {near[0]}-layer, {near[1]}-wide {near[2]} model; "
        "--calibrate measures this model on this device",
    )


# A grid has thousands of trials over a handful of splits: read each Parquet footer once.
_split_rows = lru_cache(maxsize=64)(data.split_rows)
_train_count = lru_cache(maxsize=256)(data.train_count)


def trial_seconds(config: TrialConfig, coeffs: Coefficients, num_layers: int,
                  data_dir=None, every_epoch: bool = True) -> float:
    """Modelled wall time of one trial on the device ``coeffs`` describe, scoring the dev
    split after every epoch or (``every_epoch=False``) the last one (for a sequential trial,
    the final finetuning only: ``estimate`` adds each intermediate model once, as the cache
    trains it once)."""
    tokens = TASK_TOKENS[config.task]
    count = _train_count(config.task, config.train_size, data_dir)
    # what the trial trains on: a subset file (--allow-subset) gives at most what it holds
    n_train = min(count.wanted, count.available) * tokens.windows
    n_dev = sum(_split_rows(config.task, split, data_dir)
                for split in config.task_spec.dev_splits) * tokens.dev_windows
    cut = min(1.0, config.max_seq_length / tokens.length)
    if config.probe_layer is not None:
        # One forward pass through layers 1..k over both splits in length-sorted batches
        # (probing.pooled_features); training the linear probe on the features is negligible.
        depth = max(config.probe_layer, 1) / max(num_layers, 1)
        extract = (n_train * tokens.grouped + n_dev * tokens.dev) * cut * coeffs.eval_token_s
        return extract * depth + coeffs.setup_s
    per_example = (tokens.grouped if config.length_grouped else tokens.shuffled) * cut
    steps = math.ceil(n_train / config.batch_size)
    train = steps * coeffs.step_s + n_train * per_example * coeffs.token_s
    evaluate = n_dev * tokens.dev * cut * coeffs.eval_token_s
    evaluations = config.epochs if every_epoch else 1
    return config.epochs * train + evaluations * evaluate + coeffs.setup_s


@dataclass
class Estimate:
    trials: int
    device_hours: float
    device: str
    sources: list[str]
    note: str = ""  # why the figure may not hold on the device the sweep will run on
    # seconds by trial id (the intermediate phases of sequential trials under their own ids)
    per_trial_s: dict[str, float] = field(default_factory=dict)
    # GPU trials: the sizes of the packs the sweep forms (each holds one GPU while it runs)
    packs: list[int] = field(default_factory=list)

    # GPU trials: the longest pack's seconds and what it is, the GPU share a pack holds
    # (``--gpus-per-trial``), and where the per-member costs are applied beyond what they
    # were measured on
    wall_s: float = 0.0
    longest: str = ""
    gpus_per_pack: float = 1.0
    extrapolated: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        hours = self.device_hours
        shown = f"{hours:,.1f}" if hours >= 1 else f"{hours:.4f}"
        if self.packs:
            how = (f"in the {len(self.packs)} packs the sweep forms (up to {max(self.packs)} "
                   f"trials each), one pack at a time on {self.device}")
            unit = "GPU-hours"
        else:
            how, unit = f"one after another on {self.device}", "device-hours"
        lines = [f"estimated cost: {shown} {unit} for {counted(self.trials, 'trial')}, {how} "
                 f"(per-token costs: {'; '.join(self.sources)})"]
        if self.packs and self.wall_s:
            share = self.gpus_per_pack
            wall = f"wall time: at least {duration(self.wall_s)}, its longest pack ({self.longest})"
            if share < 1:
                wall += (f"; at --gpus-per-trial {share:g} {1 / share:g} packs share a GPU: the "
                         f"GPU-hours are the same work, each pack up to {1 / share:g}x longer "
                         f"(up to {duration(self.wall_s / share)})")
            lines.append(wall + "; no number of GPUs finishes sooner")
        if self.extrapolated:
            lines.append("extrapolated beyond what was measured: " + "; ".join(self.extrapolated))
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


def duration(seconds: float) -> str:
    """``seconds`` as a person reads a duration: 45 s, 12 min, 1.4 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def calibration_note(use_gpu: bool) -> str:
    """Empty where the recorded table was measured on this kind of device; else a line
    saying the estimate is not calibrated for it and how to calibrate."""
    if use_gpu:
        return ("not calibrated for GPUs: the table was measured on a CPU core; run the dry "
                "run with --calibrate on the GPU node to estimate GPU-hours there")
    here = hardware.cpu_name()
    if here == RECORDED_CPU:
        return ""
    return (f"not calibrated here: the table was measured on an {RECORDED_CPU}, this machine "
            f"is {here}; add --dry-run --calibrate to measure this device (about 2 minutes)")


def trial_estimates(configs: list[TrialConfig], shapes: dict[str, ModelShape], data_dir=None,
                    every_epoch: bool = True) -> dict[str, float]:
    """Seconds per trial id from the recorded table (the progress line's ETA starts from
    these and corrects them by measured trial times); empty where a shape is unknown."""
    try:
        return estimate(configs, shapes, data_dir, every_epoch=every_epoch).per_trial_s
    except (KeyError, TypeError, ValueError, ReinitTuneError):  # unknown width or task size
        return {}


def estimate(
    configs: list[TrialConfig],
    shapes: dict[str, ModelShape],
    data_dir=None,
    calibrated: dict[tuple[str, str], Coefficients] | None = None,
    device: str = RECORDED_DEVICE,
    every_epoch: bool = True,
    packs: list[list[TrialConfig]] | None = None,
    calibrated_source: str = "calibrated here",
) -> Estimate:
    """Device-hours of running ``configs`` (whose models have ``shapes``) one after another on
    one device. ``calibrated`` maps (model, precision) to coefficients measured on ``device``
    by ``calibrate`` (or ``calibrate_pack``, per member of a pack). With ``packs`` (the packs
    a GPU sweep forms of ``configs``), each pack of two or more costs ``PACK_SETUP_S`` more
    than its members, and the hours are GPU-hours."""
    intermediates = {
        i.trial_id: i for i in (c.intermediate_phase() for c in configs if c.intermediate_task)
    }
    seconds, per_trial, sources = 0.0, {}, {}
    for config in [*configs, *intermediates.values()]:
        key = (config.model, config.precision)
        if calibrated and key in calibrated:
            coeffs, source = calibrated[key], calibrated_source
        else:
            coeffs, source = recorded_coefficients(shapes[config.model], config.precision)
            device = RECORDED_DEVICE
        sources[f"{config.model} {config.precision} {source}"] = None
        trial_s = trial_seconds(config, coeffs, shapes[config.model].num_layers, data_dir,
                                every_epoch)
        seconds += trial_s
        per_trial.setdefault(config.trial_id, trial_s)
    sizes = [len(p) for p in packs or ()]
    seconds += PACK_SETUP_S * sum(size > 1 for size in sizes)
    result = Estimate(len(configs), seconds / 3600, device, list(sources),
                      per_trial_s=per_trial, packs=sizes if any(size > 1 for size in sizes)
                      else [])
    if result.packs:
        times = [(PACK_SETUP_S * (len(p) > 1) + sum(per_trial.get(c.trial_id, 0.0) for c in p),
                  p) for p in packs]
        result.wall_s, longest = max(times, key=lambda t: t[0])
        first = longest[0]
        result.longest = (f"{counted(len(longest), 'trial')} of {first.task} at "
                          f"{first.size.label} examples, {first.epochs} epochs, "
                          f"{first.precision}")
        result.extrapolated = extrapolations(packs, calibrated or {})
    return result


def extrapolations(packs: list[list[TrialConfig]],
                   calibrated: dict[tuple[str, str], Coefficients]) -> list[str]:
    """Where the packs formed lie beyond what their per-member costs were measured on: more
    members, more seeds a pack, or another precision's coefficients."""
    out: dict[str, None] = {}
    for (model, precision), coeffs in calibrated.items():
        mine = [p for p in packs if p[0].model == model and p[0].precision == precision]
        if not mine:
            continue
        members = max(len(p) for p in mine)
        seeds = max(len({c.seed for c in p}) for p in mine)
        if members > coeffs.members > 1:
            out[f"packs of up to {members} members from {coeffs.members}"] = None
        if seeds > coeffs.seeds and coeffs.members > 1:
            out[f"up to {seeds} seeds a pack from {coeffs.seeds}"] = None
    return list(out)


# -- measuring ----------------------------------------------------------------------------
def task_tokens(task: str, model: str, data_dir=None, seed: int = 0,
                length: int = 128) -> TaskTokens:
    """Padded tokens per example (per window, for QA) of ``task`` as the training loop
    batches it. A task whose dev split is not here (MNLI offline) is measured on held-out
    train rows instead."""
    from reinit_tune.training.loop import batch_loader, eval_batches

    train_split = data.encoded_split(task, "train", model, length, data_dir)
    try:
        dev = data.encoded_split(task, get_task(task).dev_splits[0], model, length, data_dir)
    except DataNotFoundError:
        dev = train_split.select(range(min(len(train_split), 5_000)))

    def padded(grouped: bool) -> float:
        lengths = train_split.lengths
        loader = batch_loader(len(train_split), 8, seed, lengths=lengths if grouped else None)
        return sum(int(lengths[b].max()) * len(b) for b in loader.batch_sampler) / len(
            train_split)

    lengths = dev.lengths
    dev_tokens = sum(int(lengths[b].max()) * len(b) for b in eval_batches(lengths))
    return TaskTokens(padded(True), padded(False), float(dev_tokens / max(1, len(dev))),
                      len(train_split) / train_split.num_examples,
                      len(dev) / dev.num_examples, length)


def bert_config(shape: ModelShape, num_labels: int = 2):
    """A ``BertConfig`` of ``shape`` (FFN 4x wide, BERT's vocabulary): the stand-in for a
    model whose speed, not weights, matters (calibration, benchmarks)."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=BERT_VOCAB, hidden_size=shape.hidden_size, num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads, intermediate_size=4 * shape.hidden_size,
        num_labels=num_labels,
    )


def synthetic(n: int, length: int, seed: int = 0) -> data.Encoded:
    """``n`` random examples of exactly ``length`` tokens with random binary labels."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, 30_000, size=(n, length)).tolist()
    return data.Encoded(ids, [[0] * length] * n, rng.integers(0, 2, n), pad_id=0)


def calibrate(
    shape: ModelShape, precision: str, use_gpu: bool = True, lengths: tuple[int, int] = (16, 64)
) -> tuple[Coefficients, str]:
    """Measure the coefficients of a randomly initialized BERT of ``shape`` on this device
    (weights do not change speed): two short training runs on synthetic batches of two
    sequence lengths give the fixed and the per-token step cost; one eval pass the eval cost.
    Returns the coefficients and the device name."""
    from transformers import BertForSequenceClassification

    from reinit_tune.training.finetune import finetune
    from reinit_tune.training.loop import Optimization

    steps = 12
    timings, device = [], "cpu"
    opt = Optimization(epochs=2, precision=precision)  # the default trial's lr and batch
    batch = opt.batch_size
    for length in lengths:
        examples = synthetic(steps * batch, length)
        results, setup = finetune(
            BertForSequenceClassification(bert_config(shape)), examples, examples, task="sst2",
            opt=opt, use_gpu=use_gpu,
        )
        device = setup.device
        last = results[-1]  # the second epoch: kernels chosen, caches warm
        timings.append((last.train_time_s / steps, last.eval_time_s / (steps * batch * length)))
    (t_short, _), (t_long, eval_long) = timings
    return fit_step_costs(t_short, t_long, batch * lengths[0], batch * lengths[1],
                          eval_long), device


def fit_step_costs(t_short: float, t_long: float, tokens_short: int, tokens_long: int,
                   eval_token_s: float) -> Coefficients:
    """The fixed and per-token cost of a training step from the step times at two batch
    token counts. On a small model the per-token difference can drown in timing noise (even
    come out negative); training a token is a forward and a backward pass, so it never costs
    less than evaluating it, which bounds the per-token cost from below."""
    token_s = max((t_long - t_short) / (tokens_long - tokens_short), eval_token_s)
    step_s = max(0.0, t_short - token_s * tokens_short)
    return Coefficients(step_s, token_s, eval_token_s)


def calibrate_pack(
    shape: ModelShape, precision: str, members: int, use_gpu: bool = True,
    lengths: tuple[int, int] = (16, 64), steps: int = 12,
) -> tuple[Coefficients, str]:
    """Measure one member's coefficients inside a pack of ``members`` on this device: a
    randomly initialized BERT of ``shape`` saved once, progressive surgeries of two seeds
    (the packs a GPU sweep forms), trained through ``train_pack`` on synthetic batches of two
    sequence lengths. Each coefficient is a member's share of the pack's (its step, token,
    evaluation and setup cost divided by ``members``). Returns them and the device name."""
    import copy
    import tempfile

    from transformers import BertForSequenceClassification

    from reinit_tune.data import load_tokenizer
    from reinit_tune.model import surgery
    from reinit_tune.model.shape import EMBEDDED_MODEL
    from reinit_tune.training.loop import Optimization
    from reinit_tune.training.pack import train_pack

    opt = Optimization(epochs=2, precision=precision)
    batch, timings, device = opt.batch_size, [], "cpu"
    setups = []
    with tempfile.TemporaryDirectory(prefix="reinit-tune-calibrate-") as folder:
        template = BertForSequenceClassification(bert_config(shape))
        template.save_pretrained(folder)  # a BERT folder: its packs mix seeds, as real ones
        load_tokenizer(EMBEDDED_MODEL).save_pretrained(folder)
        base = TrialConfig(folder, "sst2", epochs=opt.epochs, precision=precision,
                           max_seq_length=max(lengths), experiment="calibration")
        configs = [base.replace(seed=i % 2, reinit_layers=tuple(range(
            (i // 2) % (shape.num_layers + 1), shape.num_layers))) for i in range(members)]

        def built(copies: bool):
            for config in configs:  # the surgery a member's build does, on a copy
                if not copies:  # speed does not depend on the weights: one model M times
                    yield template
                    continue
                model = copy.deepcopy(template)
                surgery.reinit_layers(model, config.reinit_layers, std=0.02, seed=config.seed)
                yield model

        for length in lengths:
            trains = {s: synthetic(steps * batch, length, seed=s) for s in (0, 1)}
            # the first run builds every member as a sweep does: its setup is the one timed
            outcomes, setup = train_pack(built(not setups), configs, trains,
                                         synthetic(batch, length, 2),
                                         use_gpu=use_gpu, every_epoch=True)
            device = setup.device
            setups.append(setup.setup_s / members)
            last = outcomes[0].results[-1]  # the second epoch: kernels chosen, caches warm
            timings.append((last.train_time_s / steps, last.eval_time_s / (batch * length)))
    (t_short, _), (t_long, eval_long) = timings
    coeffs = fit_step_costs(t_short, t_long, batch * lengths[0], batch * lengths[1], eval_long)
    return dataclasses.replace(coeffs, setup_s=setups[0], members=members,
                               seeds=min(2, members)), device


def sweep_estimate(
    configs: list[TrialConfig], shapes: dict[str, ModelShape], data_dir=None, *,
    calibrate_here: bool = False, use_gpu: bool = True, every_epoch: bool = True,
    packs: list[list[TrialConfig]] | None = None, gpus_per_pack: float = 1.0,
) -> Estimate | str:
    """The dry run's cost line: the recorded table, or ``calibrate`` on this device for each
    (model, precision) of the grid; with ``packs`` (the packs a GPU sweep forms, each
    holding ``gpus_per_pack`` of a GPU), per member of a pack of the largest size that forms
    (``calibrate_pack``), or the recorded GPU table. A grid whose model width is unknown gets
    no estimate."""
    unknown = sorted({c.model for c in configs if shapes[c.model].hidden_size is None})
    if unknown:
        return (f"estimated cost: unknown ({', '.join(unknown)}: hidden size not known offline; "
                "a local model folder or a known hub id gives one)")
    packed = bool(packs) and any(len(p) > 1 for p in packs)
    calibrated, device, note, source = {}, RECORDED_DEVICE, "", "calibrated here"
    if calibrate_here:
        for model, precision in sorted({(c.model, c.precision) for c in configs}):
            largest = max((len(p) for p in packs or () if p[0].model == model), default=1)
            if packed and largest > 1:
                calibrated[(model, precision)], device = calibrate_pack(
                    shapes[model], precision, largest, use_gpu)
            else:
                calibrated[(model, precision)], device = calibrate(shapes[model], precision,
                                                                   use_gpu)
        device = f"1 {device.upper()} device here" if device != "cpu" else (
            f"this machine's CPU ({hardware.cpu_name()}), as many threads as torch uses")
    elif packed:
        scaled, other_precision = "", []
        for model, precision in sorted({(c.model, c.precision) for c in configs}):
            calibrated[(model, precision)], how = recorded_coefficients(
                shapes[model], precision, RECORDED_GPU)
            if how != "recorded table":
                scaled = f" ({model}'s {how})"
            if not any(k[2] == precision for k in RECORDED_GPU):
                other_precision.append(f"{precision} from another precision's costs (none "
                                       f"recorded for {precision})")
        if calibrated:
            device = f"an {RECORDED_GPU_DEVICE}"
            source = "recorded in packs" + scaled
            note = (f"per-member costs recorded on an {RECORDED_GPU_DEVICE} in packs, sized "
                    "for its memory; --dry-run --calibrate on the GPU node measures yours")
    # packs are costed only with a pack's coefficients (a CPU core's say nothing of them)
    result = estimate(configs, shapes, data_dir, calibrated, device, every_epoch,
                      packs=packs if packed and calibrated else None,
                      calibrated_source=source)
    result.gpus_per_pack = gpus_per_pack
    if calibrate_here:
        result.note = "calibrated: " + "; ".join(
            f"{model} {precision}, {coeffs}" for (model, precision), coeffs in calibrated.items())
    else:
        result.note = note or calibration_note(use_gpu)
        if packed and calibrated:
            result.extrapolated += other_precision
    return result
