"""What a sweep will cost before it runs: device-hours from measured per-token costs.

A trial's time is modelled from what the training loop does (``reinit_tune.training``):

    train  = steps x step_s + padded train tokens x token_s      (per epoch, summed)
    eval   = padded dev tokens x eval_token_s                    (after every epoch)
    total  = train + eval + TRIAL_SETUP_S

``step_s`` is the per-step cost that does not grow with sequence length (optimizer step over
every parameter, gradient clipping, Python and kernel launches), ``token_s`` the forward and
backward cost per token. Padded tokens per example come from ``TASK_TOKENS``, measured on the
GLUE splits with the BERT uncased vocabulary as the loop pads them (length-grouped or shuffled
batches of 8, dev in length-sorted batches of 64). The coefficients come from ``RECORDED``
(measured per model shape and precision on the machine named there) or from ``calibrate``,
a short synthetic run on the current device (``--calibrate``). Regenerate both tables with
``python benchmarks/calibrate_cost.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from reinit_tune import data, hardware
from reinit_tune.config import TrialConfig
from reinit_tune.errors import DataNotFoundError, ReinitTuneError
from reinit_tune.model.shape import BERT_VOCAB, ModelShape
from reinit_tune.tasks import get_task

TRIAL_SETUP_S = 1.0  # model copy + surgery + data subset + Ray bookkeeping (bench_sweep.py)


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


def _flops_per_token(shape: ModelShape) -> float:
    return 12.0 * shape.num_layers * shape.hidden_size**2  # matmul weights per layer


def recorded_coefficients(shape: ModelShape, precision: str) -> tuple[Coefficients, str]:
    """The recorded coefficients of this shape, or those of the nearest recorded shape scaled
    by weights per token (token costs) and parameters (step cost), with a note saying so."""
    key = (shape.num_layers, shape.hidden_size, precision)
    if key in RECORDED:
        return RECORDED[key], "recorded table"
    same_precision = [k for k in RECORDED if k[2] == precision] or list(RECORDED)
    near = min(same_precision, key=lambda k: abs(math.log(
        _flops_per_token(ModelShape(k[0], 1, k[1])) / _flops_per_token(shape))))
    base, near_shape = RECORDED[near], ModelShape(near[0], 1, near[1])
    token = _flops_per_token(shape) / _flops_per_token(near_shape)
    step = shape.parameter_count() / near_shape.parameter_count()
    return (
        Coefficients(base.step_s * step, base.token_s * token, base.eval_token_s * token),
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
        return extract * depth + TRIAL_SETUP_S
    per_example = (tokens.grouped if config.length_grouped else tokens.shuffled) * cut
    steps = math.ceil(n_train / config.batch_size)
    train = steps * coeffs.step_s + n_train * per_example * coeffs.token_s
    evaluate = n_dev * tokens.dev * cut * coeffs.eval_token_s
    evaluations = config.epochs if every_epoch else 1
    return config.epochs * train + evaluations * evaluate + TRIAL_SETUP_S


@dataclass
class Estimate:
    trials: int
    device_hours: float
    device: str
    sources: list[str]
    note: str = ""  # why the figure may not hold on the device the sweep will run on
    # seconds by trial id (the intermediate phases of sequential trials under their own ids)
    per_trial_s: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        hours = self.device_hours
        shown = f"{hours:,.1f}" if hours >= 1 else f"{hours:.4f}"
        return (
            f"estimated cost: {shown} device-hours for {self.trials} trials, "
            f"one after another on {self.device} (per-token costs: {'; '.join(self.sources)})"
            + (f"\n{self.note}" if self.note else "")
        )


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
) -> Estimate:
    """Device-hours of running ``configs`` (whose models have ``shapes``) one after another on
    one device. ``calibrated`` maps (model, precision) to coefficients measured on ``device``
    by ``calibrate``."""
    intermediates = {
        i.trial_id: i for i in (c.intermediate_phase() for c in configs if c.intermediate_task)
    }
    seconds, per_trial, sources = 0.0, {}, {}
    for config in [*configs, *intermediates.values()]:
        key = (config.model, config.precision)
        if calibrated and key in calibrated:
            coeffs, source = calibrated[key], "calibrated here"
        else:
            coeffs, source = recorded_coefficients(shapes[config.model], config.precision)
            device = RECORDED_DEVICE
        sources[f"{config.model} {config.precision} {source}"] = None
        trial_s = trial_seconds(config, coeffs, shapes[config.model].num_layers, data_dir,
                                every_epoch)
        seconds += trial_s
        per_trial.setdefault(config.trial_id, trial_s)
    return Estimate(len(configs), seconds / 3600, device, list(sources), per_trial_s=per_trial)


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


def sweep_estimate(
    configs: list[TrialConfig], shapes: dict[str, ModelShape], data_dir=None, *,
    calibrate_here: bool = False, use_gpu: bool = True, every_epoch: bool = True,
) -> Estimate | str:
    """The dry run's cost line: the recorded table, or ``calibrate`` on this device for each
    (model, precision) of the grid. A grid whose model width is unknown gets no estimate."""
    unknown = sorted({c.model for c in configs if shapes[c.model].hidden_size is None})
    if unknown:
        return (f"estimated cost: unknown ({', '.join(unknown)}: hidden size not known offline; "
                "a local model folder or a known hub id gives one)")
    calibrated, device = {}, RECORDED_DEVICE
    if calibrate_here:
        for model, precision in sorted({(c.model, c.precision) for c in configs}):
            calibrated[(model, precision)], device = calibrate(shapes[model], precision,
                                                               use_gpu)
        device = f"1 {device.upper()} device here" if device != "cpu" else (
            f"this machine's CPU ({hardware.cpu_name()}), as many threads as torch uses")
    result = estimate(configs, shapes, data_dir, calibrated, device, every_epoch)
    if not calibrate_here:
        result.note = calibration_note(use_gpu)
    return result
