"""One finetuning job three ways, training examples/s and final dev metrics.

(a) transformers' ``Trainer`` as ``run_glue.py``'s classic defaults run it: every example padded
    to ``max_seq_length`` (128), ``default_data_collator``, eval batch 8, fp32;
(b) the best-configured ``Trainer``: ``DataCollatorWithPadding``, length-grouped batches
    (``train_sampling_strategy="group_by_length"``), bf16 where the device supports it (with
    ``--precision bf16``; CPUs autocast to bf16), eval batch 64;
(c) our trial function, ``reinit_tune.sweep.trial.execute``, on the equivalent ``TrialConfig``
    (length-grouped batches, ``--precision``);
(d) optional: our trial function on run_glue's method exactly (shuffled batches, fp32), to
    separate what the execution gains from what grouping and bf16 gain, and to check that
    they cost no dev accuracy (compare over several ``--seeds``).

All three start from the same model (``build_model``: the same seeded classifier head), train on
the same seeded subset with batch 8, the same lr and epochs, AdamW with run_glue's defaults, and
evaluate on the whole dev split after every epoch. Training examples/s counts training time only
(eval time is reported beside it). Every run is a fresh Python process (nothing one way sets up
process-wide, such as allocator settings or Accelerate state, reaches another), and ways are
interleaved repetition by repetition, so ratios come from runs that shared the machine's
conditions; the table reports medians.

    python -m benchmarks.bench_trial                       # SST-2, MiniLM, 500 x 3 epochs
    python -m benchmarks.bench_trial --seeds 0 1 2 --repeats 1
    python -m benchmarks.bench_trial --smoke --model <tiny local model>   # seconds, for CI
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks import common

WAYS = {
    "a": "HF Trainer, run_glue classic (pad 128)",
    "b": "HF Trainer, best-configured",
    "c": "reinit_tune trial.execute",
    "d": "reinit_tune, shuffled fp32",
}


@dataclass
class Run:
    way: str
    seed: int
    repeat: int
    train_time_s: float
    eval_time_s: float
    train_examples: int
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def examples_per_s(self) -> float:
        return self.train_examples / self.train_time_s


def hf_dataset(encoded, pad_to: int | None):
    """The same tokenized examples as a ``datasets.Dataset`` for the Trainer; ``pad_to`` pads
    every example to that length up front, as run_glue's ``pad_to_max_length`` does."""
    import datasets

    ids, types = encoded.input_ids, encoded.token_type_ids
    masks = [[1] * len(x) for x in ids]
    if pad_to is not None:
        ids = [x + [encoded.pad_id] * (pad_to - len(x)) for x in ids]
        types = [x + [0] * (pad_to - len(x)) for x in types]
        masks = [x + [0] * (pad_to - len(x)) for x in masks]
    return datasets.Dataset.from_dict({
        "input_ids": ids, "token_type_ids": types, "attention_mask": masks,
        "labels": encoded.labels.tolist(),
    })


def run_hf(config, way: str, *, use_gpu: bool, out_dir: Path) -> Run:
    import torch
    from transformers import (
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        default_data_collator,
    )

    from reinit_tune import data, metrics
    from reinit_tune.model.build import build_model

    train, devs = data.train_and_devs(
        config.task, config.model, config.max_seq_length, config.train_size, config.seed
    )
    dev = devs[config.task_spec.dev_splits[0]]
    classic = way == "a"
    pad_to = config.max_seq_length if classic else None
    on_gpu = use_gpu and torch.cuda.is_available()
    bf16 = not classic and config.precision == "bf16" and (
        not on_gpu or torch.cuda.is_bf16_supported()
    )
    args = TrainingArguments(
        output_dir=str(out_dir / f"hf-{way}"),
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=8 if classic else 64,
        learning_rate=config.lr,
        num_train_epochs=config.epochs,
        weight_decay=0.0,
        max_grad_norm=1.0,
        lr_scheduler_type="linear",
        warmup_steps=0,
        seed=config.seed,
        eval_strategy="epoch",
        save_strategy="no",
        logging_strategy="no",
        report_to=[],
        disable_tqdm=True,
        use_cpu=not on_gpu,
        bf16=bf16,
        train_sampling_strategy="random" if classic else "group_by_length",
    )
    task = config.task_spec

    def compute_metrics(prediction):
        logits = prediction.predictions
        preds = logits[:, 0] if task.is_regression else logits.argmax(axis=-1)
        return metrics.compute(config.task, preds, prediction.label_ids)

    class EpochTimer(TrainerCallback):
        """Training time without evaluation: Trainer evaluates after ``on_epoch_end``."""

        seconds = 0.0

        def on_epoch_begin(self, args, state, control, **kwargs):
            self._start = time.perf_counter()

        def on_epoch_end(self, args, state, control, **kwargs):
            EpochTimer.seconds += time.perf_counter() - self._start

    tokenizer = data.load_tokenizer(config.model)
    timer = EpochTimer()
    trainer = Trainer(
        model=build_model(config),
        args=args,
        train_dataset=hf_dataset(train, pad_to),
        eval_dataset=hf_dataset(dev, pad_to),
        data_collator=default_data_collator if classic else DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics,
        callbacks=[timer],
    )
    EpochTimer.seconds = 0.0
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    final = trainer.state.log_history[-1] if trainer.state.log_history else {}
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    final = evals[-1] if evals else final
    scores = {m: float(final[f"eval_{m}"]) for m in task.metrics}
    return Run(way, config.seed, 0, timer.seconds, wall - timer.seconds,
               len(train) * config.epochs, scores)


def run_ours(config, way: str, *, use_gpu: bool) -> Run:
    from reinit_tune.sweep import trial

    if way == "d":
        config = config.replace(length_grouped=False, precision="fp32")
    reports = trial.execute(config, use_gpu=use_gpu)
    last = reports[-1]
    return Run(
        way, config.seed, 0,
        sum(r["train_time_s"] for r in reports), sum(r["eval_time_s"] for r in reports),
        sum(r["train_examples"] for r in reports),
        {m: float(last[f"eval_{m}"]) for m in config.task_spec.metrics},
    )


def summarize(runs: list[Run], ways: list[str], metric_names: tuple[str, ...]) -> str:
    primary = metric_names[0]
    rows = []
    for way in ways:
        mine = [r for r in runs if r.way == way]
        scores = [r.metrics[primary] for r in mine]
        rows.append([
            f"({way}) {WAYS[way]}", len(mine), common.median([r.examples_per_s for r in mine]),
            common.median([r.train_time_s for r in mine]),
            common.median([r.eval_time_s for r in mine]),
            statistics.mean(scores), statistics.stdev(scores) if len(scores) > 1 else 0.0,
            min(scores), max(scores),
        ])
    lines = [common.table(["way", "runs", "train ex/s", "train s", "eval s", f"{primary} mean",
                           "sd", "min", "max"], rows)]
    speed = {w: common.median([r.examples_per_s for r in runs if r.way == w]) for w in ways}
    if "c" in speed:
        for other in ("a", "b", "d"):
            if other in speed:
                paired = [
                    c.examples_per_s / o.examples_per_s
                    for c in runs if c.way == "c"
                    for o in runs if o.way == other and (o.seed, o.repeat) == (c.seed, c.repeat)
                ]
                lines.append(
                    f"(c)/({other}) = {speed['c'] / speed[other]:.2f}x (ratio of medians); "
                    f"median of paired ratios {common.median(paired):.2f}x"
                )
    header = ["seed", *(f"({w}) {m}" for w in ways for m in metric_names)]
    per_seed = [
        [seed, *(common.median([r.metrics[m] for r in runs if r.way == w and r.seed == seed])
                 for w in ways for m in metric_names)]
        for seed in sorted({r.seed for r in runs})
    ]
    lines += ["", "final dev metrics per seed (median over repeats):",
              common.table(header, per_seed)]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = common.job_parser(__doc__, epochs=3)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--repeats", type=int, default=3, help="interleaved repetitions per seed")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                   help="precision of (b) and (c) (auto: bf16 where this device computes it "
                        "natively); (a) is always fp32 like run_glue's defaults")
    p.add_argument("--ways", nargs="+", choices=sorted(WAYS), default=["a", "b", "c"])
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    p.add_argument("--cpu", action="store_true", help="stay on the CPU even if a GPU is visible")
    p.add_argument("--json", default=None, help="also write every run to this JSON file")
    p.add_argument("--smoke", action="store_true",
                   help="32 examples, 1 epoch, 1 repeat: checks the code paths in seconds")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: run one way
    return p


def config_of(args, seed: int):
    from reinit_tune.config import TrialConfig

    return TrialConfig(model=args.model, task=args.task, train_size=args.train_size, seed=seed,
                       epochs=args.epochs, lr=args.lr, precision=args.precision,
                       length_grouped=True, experiment="bench-trial")


def run_one(args) -> Run:
    """One way, one seed, in this process (the child side of ``main``)."""
    import tempfile

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    config = config_of(args, args.seeds[0])
    if args.one in ("c", "d"):
        return run_ours(config, args.one, use_gpu=not args.cpu)
    with tempfile.TemporaryDirectory() as tmp:
        return run_hf(config, args.one, use_gpu=not args.cpu, out_dir=Path(tmp))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def spawn(argv: list[str], way: str, seed: int) -> Run:
    """Run one way in a fresh interpreter; its last stdout line is the run as JSON."""
    cmd = [sys.executable, "-m", __spec__.name, *argv, "--one", way, "--seeds", str(seed)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=common.REPO)
    if done.returncode != 0:
        raise RuntimeError(f"({way}) seed {seed} failed:\n{done.stderr[-4000:]}")
    return Run(**json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    common.offline_defaults()
    if args.precision == "auto":  # resolved once, so every spawned way runs the same
        from reinit_tune.hardware import resolve_precision

        args.precision = resolve_precision("auto", on_gpu=not args.cpu and _cuda())[0]
        argv += ["--precision", args.precision]
    if args.smoke:
        args.train_size, args.epochs, args.repeats = 32, 1, 1
        argv += ["--train-size", "32", "--epochs", "1"]
    if args.one:
        print(json.dumps(asdict(run_one(args))))
        return 0
    config = config_of(args, args.seeds[0])
    threads = args.threads or "all"
    print(f"bench_trial: {args.model} {args.task} {args.train_size} examples x {args.epochs} "
          f"epochs, batch {config.batch_size}, lr {args.lr}, precision {args.precision} for "
          f"(b)/(c), torch threads {threads}, {common.load_average()}", flush=True)
    runs: list[Run] = []
    for repeat in range(args.repeats):
        for seed in args.seeds:
            shift = (repeat + seed) % len(args.ways)  # rotate the order: no way always first
            for way in args.ways[shift:] + args.ways[:shift]:
                run = spawn(argv, way, seed)
                run.repeat = repeat
                runs.append(run)
                print(f"  repeat {repeat} seed {seed} ({way}): {run.examples_per_s:6.1f} "
                      f"train ex/s, train {run.train_time_s:.1f} s, eval {run.eval_time_s:.1f}"
                      f" s, {run.metrics}  [{common.load_average()}]", flush=True)
    print()
    print(summarize(runs, args.ways, config.task_spec.metrics))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in runs], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
