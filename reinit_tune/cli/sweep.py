"""``reinit-tune sweep <family>`` and ``python sweeps/<family>.py``: the flags every sweep
shares with the family's defaults, then the family's own (``add_sweep_flags``); what they
describe as typed values (``grid_of``, ``configs_of``, ``run_options``); and the command,
which runs them through the one orchestrator (``reinit_tune.sweep.runner.Sweep``, also the
Python API's ``run_sweep``) and maps its summary to the exit status: 0 done, 1 some trials
failed or did not finish, 2 bad input found before anything started, 128 + the signal when
interrupted (130 Ctrl+C, 143 SIGTERM, 129 SIGHUP; the summary is printed).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from reinit_tune import families
from reinit_tune.cli.formatting import (
    Help,
    Parser,
    escape,
    flag_type,
    positive_int,
    results_folder,
    task_arg,
)
from reinit_tune.config import INIT_SCHEMES, PRECISIONS, SCHEDULES, TrialConfig
from reinit_tune.errors import ClusterError, InputError
from reinit_tune.families.base import (
    DEFAULT_INIT_SCHEME,
    DEFAULT_LENGTH_GROUPED,
    DEFAULT_PRECISION,
    Family,
    Grid,
    parse_size,
)
from reinit_tune.hardware import resolve_precision
from reinit_tune.inference.sequential import DEFAULT_MAX_SEEDS, DEFAULT_MIN_SEEDS, SeedRule
from reinit_tune.model.shape import EMBEDDED_MODEL, shape_for
from reinit_tune.sweep import cluster, signals
from reinit_tune.sweep.options import (
    AUTO_GPUS,
    DATA_CHANGED,
    DEFAULT_CHECKPOINT_AFTER_S,
    MODEL_CHANGED,
    Resources,
    RunOptions,
    SimilarityOptions,
    gpus_arg,
    pack_size_arg,
)
from reinit_tune.tasks import TASKS

# The run flags' defaults are the typed options' own, so the command and the Python API agree.
_RUN = RunOptions()
AUTO_SEEDS = "auto"  # --seeds auto: seeds on demand


def add_sweep_flags(p: argparse.ArgumentParser, family: Family) -> None:
    """The flags every sweep shares, with ``family``'s defaults, then the family's own."""
    training, run_defaults = family.training, family.run
    def shown(value) -> str:
        return " ".join("full" if v is None else f"{v:g}" for v in value) \
            if isinstance(value, tuple) else f"{value:g}"

    per_task = "; ".join(
        f"{task}: " + ", ".join(f"{k.replace('_', ' ')} {shown(v)}"
                                for k, v in vars(own).items() if v is not None)
        for task, own in family.per_task.items())
    common = p.add_argument_group(
        "what to train" + (f" (per task unless set here: {per_task})" if per_task else ""))
    common.add_argument("--model", default=None,
                        help=f"hub id, local save_pretrained folder, or {EMBEDDED_MODEL} "
                             f"(the embedded 6-layer MiniLM) (default: {family.model})")
    common.add_argument("--tasks", nargs="+", default=list(family.tasks), type=task_arg,
                        metavar="TASK", help=f"GLUE tasks, of: {' '.join(sorted(TASKS))} (any "
                                             "case; sst-2 is sst2)")
    sizes = " ".join("full" if v is None else str(v) for v in family.sizes)
    common.add_argument("--sizes", nargs="+", type=parse_size, default=None,
                        help="train subset sizes: counts, fractions in (0,1), or 'full' "
                             f"(default: {sizes}{' unless set per task' if per_task else ''})")
    common.add_argument("--seeds", type=seeds_arg, default=None,
                        help="runs per setting, seeds 0..N-1 (default: "
                             + (str(family.seeds) if family.seeds
                                else "50 at <=500 examples, else 3") + ")"
                             + ("; 'auto': as many as each setting's contrasts need (see "
                                "'seeds on demand')" if family.contrasts else ""))
    common.add_argument("--epochs", type=int, default=None,
                        help=f"training epochs (default: {family.epochs})"
                        if family.epochs is not None
                        else "finetuning epochs (default: 5 at <=500 examples, else 3)")
    common.add_argument("--lr", type=float, default=None,
                        help=f"peak learning rate of AdamW (default: {training.lr:g})")
    common.add_argument("--batch-size", type=int, default=None,
                        help=f"training batch size (default: {training.batch_size})")
    common.add_argument("--max-seq-length", type=int, default=None,
                        help="longer inputs are truncated (default: "
                             f"{training.max_seq_length})")
    common.add_argument("--schedule", choices=SCHEDULES, default=None,
                        help="learning-rate schedule: linear decay (after --warmup-ratio) or "
                             "002's slanted triangular (default: "
                             f"{training.schedule})")
    common.add_argument("--warmup-ratio", type=float, default=None,
                        help="share of the steps the linear schedule warms up over "
                             f"(default: {training.warmup_ratio:g})")
    common.add_argument("--precision", choices=("auto", *PRECISIONS), default=DEFAULT_PRECISION,
                        help="auto: bf16 autocast where the trials' device computes bf16 "
                             "natively (GPUs that support it; CPUs with AVX512-BF16 or AMX), "
                             "fp32 elsewhere; resolved here before the trial ids")
    common.add_argument("--init-scheme", choices=INIT_SCHEMES, default=DEFAULT_INIT_SCHEME,
                        help="distribution of reinitialized weights: 'bert' (003 App. A) or "
                             "'authors-code' (what the 003 authors' released code did: weights "
                             "~38x smaller; docs/concepts/training.md, 'Initialization "
                             "schemes')")
    common.add_argument("--length-grouped", action=argparse.BooleanOptionalAction,
                        default=DEFAULT_LENGTH_GROUPED,
                        help="batch examples of similar length together (less padding, several "
                             "times faster); --no-length-grouped shuffles uniformly as run_glue "
                             f"does (default: {'on' if DEFAULT_LENGTH_GROUPED else 'off'})")
    common.add_argument("--num-layers", type=int, default=None,
                        help="layer count of a --model that cannot be inspected here (a hub id "
                             "offline): for dry runs")
    common.add_argument("--num-heads", type=int, default=None,
                        help="head count of such a model, with --num-layers")
    if family.contrasts:
        auto = p.add_argument_group(
            "seeds on demand (--seeds auto)",
            "Each setting (task x size x every field but the seed) gets seeds 0, 1, ... "
            "(each running every surgery) until the 95% interval of every paired contrast "
            f"has a half-width of at most --target-ci; the contrasts: {family.contrasts}.")
        auto.add_argument("--target-ci", type=float, default=None, metavar="W",
                          help="half-width of the 95% interval each contrast must reach, in "
                               "units of the task's metric (0.01: one accuracy point)")
        auto.add_argument("--min-seeds", type=positive_int, default=DEFAULT_MIN_SEEDS,
                          help="seeds every setting gets")
        auto.add_argument("--max-seeds", type=positive_int, default=DEFAULT_MAX_SEEDS,
                          help="seeds no setting goes past (003's 50 at 500 examples)")
    if family.flags:
        own = p.add_argument_group(f"{family.name} grid")
        for flag in family.flags:
            flag.add_to(own)
    for action in p._actions:  # per-task defaults and titles may hold a literal %
        if action.help and "%" in action.help and "%(" not in action.help:
            action.help = escape(action.help)
    run = p.add_argument_group("how to run")
    run.add_argument("--data-dir", default=None,
                     help="folder with <task>/{train,validation}.parquet, or 'hub:' for the "
                          "hub's datasets (default: $REINIT_TUNE_DATA, else the hub)")
    run.add_argument("--allow-subset", action="store_true", default=_RUN.allow_subset,
                     help="where a local train file is a subset of the official split (its "
                          "Parquet 'subset' metadata) and cannot supply a size (sizes are "
                          "shares of the official split), train on the rows there instead of "
                          "stopping; such rows are marked data_subset")
    run.add_argument("--data-changed", choices=DATA_CHANGED, default=_RUN.data_changed,
                     help="when the store holds trials of this grid trained on other data "
                          "(their data fingerprint differs): stop before any trial, or rerun "
                          "those trials and replace their rows")
    run.add_argument("--model-changed", choices=MODEL_CHANGED, default=_RUN.model_changed,
                     help="when the store holds trials of this grid trained on other weights "
                          "(the model folder was re-saved: its fingerprint differs): stop "
                          "before any trial, or rerun those trials and replace their rows")
    run.add_argument("--rerun-damaged", action="store_true", default=_RUN.rerun_damaged,
                     help="where the store's trial or epoch files fail their checksums, move "
                          "them to RESULTS/damaged/ and train their trials again (default: "
                          "stop before any trial, naming them)")
    run.add_argument("--results", default=str(_RUN.results_dir), type=results_folder,
                     help="results store folder")
    run.add_argument("--cpus-per-trial", type=float, default=_RUN.resources.cpus_per_trial,
                     help="CPUs per trial, also its torch threads")
    run.add_argument("--gpus-per-trial", type=flag_type(gpus_arg),
                     default=_RUN.resources.gpus_per_trial,
                     help="GPUs per Tune trial (a pack of trials, or one trial): 'auto' (the "
                          "default) gives each pack 1 GPU where the cluster the sweep runs on "
                          "has GPUs, and runs on CPUs where it has none; 0 forces CPUs; a "
                          "fraction shares a GPU between Tune trials")
    run.add_argument("--pack-size", type=flag_type(pack_size_arg), default=_RUN.pack_size,
                     help="train up to N trials that differ only in their surgery (same task, "
                          "seed, size, epochs, batch, lr and schedule, precision, model) as "
                          "one fused pack per Tune trial, each stored as its own trial; "
                          "'auto': 1 on CPUs, on a GPU what its free memory holds. Probing "
                          "and sequential trials run unpacked (so do QA trials and runs with "
                          "--similarity or --save-model)")
    run.add_argument("--max-failures", type=int, default=_RUN.max_failures,
                     help="retries of a failing trial (a killed worker, a preempted node, a "
                          "stalled trial)")
    run.add_argument("--trial-timeout", type=float, default=None, metavar="SECONDS",
                     help="end a trial that makes no progress at all (no training step, dev "
                          "batch or epoch; a slow epoch is progress) for this long as "
                          "stalled, and retry it; 0: no limit (default: 5x its estimated "
                          "epoch, at least 600 s)")
    run.add_argument("--storage", default=None,
                     help="Tune storage_path for checkpoints and Tune logs: a folder, an NFS "
                          "path or s3://bucket/prefix reachable from every node (default: "
                          "$REINIT_TUNE_STORAGE, else <results>/_tune)")
    run.add_argument("--checkpoint-after-s", type=float, default=DEFAULT_CHECKPOINT_AFTER_S,
                     help="checkpoint a trial after every epoch that took at least this many "
                          "seconds, so a retry resumes there (0: every epoch; inf: never)")
    run.add_argument("--dry-run", action="store_true",
                     help="print the grid, the number of trials and the estimated "
                          "device-hours; run nothing")
    run.add_argument("--calibrate", action="store_true",
                     help="with --dry-run: measure the per-token cost on this device (a short "
                          "synthetic run) instead of using the recorded table")
    run.add_argument("--logger", action="append", default=[], dest="loggers",
                     choices=("tensorboard", "wandb", "mlflow", "csv"),
                     help="also log every trial (its axes and per-epoch metrics) to this "
                          "tracker through Ray Tune's logger callbacks; repeat for several")
    run.add_argument("--verbose", action="store_true",
                     help="show Ray Tune's full trial table instead of one line per finished "
                          "trial, and Ray's and Tune's own messages (else written to "
                          "RESULTS/_logs/)")
    extra = p.add_argument_group("measurements of each trial")
    on_off = argparse.BooleanOptionalAction
    extra.add_argument("--similarity", action=on_off, default=run_defaults.similarity,
                       help="compare the finetuned model with its pre-finetuning state per "
                            "layer (weight distances, attention JS, SVCCA, CKA) into "
                            "RESULTS/similarity/")
    extra.add_argument("--similarity-examples", type=int,
                       default=run_defaults.similarity_examples,
                       help="dev examples compared by --similarity (default: "
                            f"{run_defaults.similarity_examples or 'the whole dev split'})")
    extra.add_argument("--layer-replacement", action=on_off,
                       default=run_defaults.layer_replacement,
                       help="with --similarity, also 002's layer replacement (one forward "
                            "pass per layer)")
    extra.add_argument("--save-model", action=on_off, default=run_defaults.save_model,
                       help="save each finetuned model to RESULTS/models/<trial_id>/ (compare "
                            "two with reinit-tune compare or reinit-tune consistency)")
    extra.add_argument("--eval", choices=("final", "every-epoch"), default=run_defaults.evaluate,
                       dest="evaluate",
                       help="score the dev split after the last epoch only, or after every "
                            "epoch (per-epoch curves); changes no training number")
    extra.add_argument("--log-every", type=int, default=run_defaults.log_every,
                       help="store the training loss of every N-th step in RESULTS/steps/ "
                            "(0: none)")


def seeds_arg(text: str) -> int | str:
    """``--seeds``: a positive count, or ``auto`` (seeds on demand)."""
    if text == AUTO_SEEDS:
        return text
    try:
        return positive_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or '{AUTO_SEEDS}', "
                                         f"got {text!r}") from None


def seed_rule(args: argparse.Namespace, family: Family) -> SeedRule | None:
    """The ``SeedRule`` of ``--seeds auto`` (None for a fixed count); its flags without it,
    or it without ``--target-ci``, are errors naming the flag."""
    target = getattr(args, "target_ci", None)
    if args.seeds != AUTO_SEEDS:
        given = [flag for flag, dest, default in (
            ("--target-ci", "target_ci", None), ("--min-seeds", "min_seeds", DEFAULT_MIN_SEEDS),
            ("--max-seeds", "max_seeds", DEFAULT_MAX_SEEDS))
            if getattr(args, dest, default) != default]
        if given:
            raise InputError(f"{given[0]}: only with --seeds auto")
        return None
    if not family.contrasts:
        supported = [f.name for f in families.all_families() if f.contrasts]
        raise InputError(f"--seeds auto: the {family.name} family compares no surgeries "
                         f"paired by seed; it works with {', '.join(supported)}; pass a "
                         "fixed --seeds N")
    if target is None:
        raise InputError("--seeds auto needs --target-ci W: the half-width of the 95% "
                         "interval every paired contrast must reach (0.01: one accuracy "
                         "point)")
    if isinstance(target, int | float) and target >= 1:  # scores are fractions, not percent
        raise InputError(f"--target-ci {target:g}: a half-width in the metric's own units, "
                         "which are fractions, not percent (0.01: one accuracy point); give "
                         "e.g. 0.01")
    return SeedRule(target, args.min_seeds, args.max_seeds)


def grid_of(args: argparse.Namespace, family: Family) -> Grid:
    """The ``Grid`` the common sweep flags describe (None: the family's default); with
    ``--seeds auto`` it holds ``--max-seeds`` seeds, of which the sweep runs what it needs."""
    model = args.model or family.model
    gpus = args.gpus_per_trial
    if gpus == AUTO_GPUS:  # what the sweep will resolve it to (``run_sweep_command`` has)
        gpus = cluster.resolve_gpus(gpus).gpus_per_trial
    on_gpu = gpus > 0
    precision, why = resolve_precision(args.precision, on_gpu=on_gpu)
    logging.getLogger("reinit_tune").info("precision %s (%s)", precision, why)
    return Grid(
        model=model, shape=shape_for(model, args.num_layers, args.num_heads),
        tasks=tuple(args.tasks), sizes=tuple(args.sizes) if args.sizes else None,
        seeds=args.max_seeds if args.seeds == AUTO_SEEDS else args.seeds,
        epochs=args.epochs, data_dir=args.data_dir, lr=args.lr,
        batch_size=args.batch_size, max_seq_length=args.max_seq_length,
        schedule=args.schedule, warmup_ratio=args.warmup_ratio, precision=precision,
        init_scheme=args.init_scheme, length_grouped=args.length_grouped, on_gpu=on_gpu,
    )


def configs_of(args: argparse.Namespace, family: Family) -> list[TrialConfig]:
    """The trials a sweep command describes: its grid (``grid_of``) expanded by the family
    with its own flags' values."""
    return family.configs(grid_of(args, family),
                          **{f.dest: getattr(args, f.dest) for f in family.flags})


def run_options(args: argparse.Namespace, family: Family | None = None) -> RunOptions:
    """The ``RunOptions`` the run flags describe (``family``: for ``--seeds auto``)."""
    similarity = None
    if args.similarity_examples is not None and args.similarity_examples < 1:
        raise InputError(f"--similarity-examples: must be a positive count, got "
                         f"{args.similarity_examples}")
    if args.trial_timeout is not None and not args.trial_timeout >= 0:
        raise InputError(f"--trial-timeout: give seconds (0: no limit), got "
                         f"{args.trial_timeout:g}")
    defaults = family.run if family is not None else None
    if (not args.similarity and not args.layer_replacement and defaults is not None
            and args.similarity_examples != defaults.similarity_examples):
        raise InputError("--similarity-examples: only with --similarity (it sets how many dev "
                         "examples the similarity measures read); add --similarity")
    if args.layer_replacement and not args.similarity:
        print("--layer-replacement implies --similarity (it is one of its measures)",
              flush=True)
    if args.similarity or args.layer_replacement:
        similarity = SimilarityOptions(args.similarity_examples, args.layer_replacement)
    return RunOptions(
        results_dir=Path(args.results), data_dir=args.data_dir,
        resources=Resources(args.cpus_per_trial, args.gpus_per_trial),
        max_failures=args.max_failures, storage=args.storage,
        checkpoint_after_s=args.checkpoint_after_s, similarity=similarity,
        save_model=args.save_model, log_every=args.log_every, evaluate=args.evaluate,
        loggers=tuple(dict.fromkeys(args.loggers)), verbose=args.verbose,
        allow_subset=args.allow_subset, data_changed=args.data_changed,
        model_changed=args.model_changed, trial_timeout=args.trial_timeout,
        rerun_damaged=args.rerun_damaged,
        pack_size=args.pack_size,
        seeds=seed_rule(args, family) if family is not None else None,
    )


def sweep_parser(family: Family, prog: str | None = None) -> argparse.ArgumentParser:
    """The parser of one family's sweep, on its own (``python sweeps/<family>.py``)."""
    p = Parser(
        prog=prog or f"reinit-tune sweep {family.name}", formatter_class=Help,
        description=f"{family.title} ({family.source}).",
    )
    add_sweep_flags(p, family)
    return p


def add_parser(commands: argparse._SubParsersAction) -> None:
    """``reinit-tune sweep FAMILY``: a subcommand per registered family."""
    sweep = commands.add_parser("sweep", help="run an experiment family's grid on Ray Tune",
                                description="Run an experiment family's grid on Ray Tune; "
                                            "`reinit-tune sweep <family> --help` lists its "
                                            "flags.")
    by_family = sweep.add_subparsers(dest="family", required=True, metavar="FAMILY")
    for family in families.all_families():
        add_sweep_flags(by_family.add_parser(
            family.name, help=escape(f"{family.title} ({family.source})"),
            formatter_class=Help, description=f"{family.title} ({family.source})."), family)


def run_sweep_command(family: Family, args: argparse.Namespace) -> int:
    """Run the family's sweep the flags describe; bad input exits 2 before Ray starts, a
    partly failed sweep exits 1, an interrupted one 128 + the signal (130 Ctrl+C, 143
    SIGTERM, 129 SIGHUP) after its summary."""
    # Imported here: `--help` never pays for the planner (and a dry run never for Ray).
    from reinit_tune.sweep.runner import Sweep

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    signals.install()
    sweep = None
    try:
        if args.calibrate and not args.dry_run:
            raise InputError("--calibrate: only with --dry-run (it measures this device for "
                             "the cost estimate and runs nothing); add --dry-run")
        model = args.model or family.model
        # before the grid: "auto" precision, part of each trial id, depends on the device
        devices = cluster.resolve_gpus(args.gpus_per_trial)
        args.gpus_per_trial = devices.gpus_per_trial
        options = run_options(args, family)  # bad seed flags fail before the grid is built
        sweep = Sweep(configs_of(args, family), options,
                      shapes={model: shape_for(model, args.num_layers, args.num_heads)},
                      devices=devices)
        summary = sweep.run(dry_run=args.dry_run, calibrate=args.calibrate)
    except InputError as e:
        if sweep is not None and sweep.started:
            raise  # not bad input: something broke while trials ran
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ClusterError as e:  # before any trial: one line, what to try
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        started = sweep is not None and sweep.started
        print(f"interrupted; rerun the same command to {'finish' if started else 'run'} the "
              "sweep", file=sys.stderr)
        return signals.exit_status()
    if summary.dry_run:
        return 0
    if signals.received() is not None:
        return signals.exit_status()
    return 1 if summary.failed or summary.not_finished else 0


def command(args: argparse.Namespace) -> int:
    return run_sweep_command(families.get(args.family), args)


def sweep_main(name: str, argv: list[str] | None = None, prog: str | None = None) -> int:
    """``reinit-tune sweep <name> ...`` (and ``python sweeps/<name>.py ...``)."""
    family = families.get(name)
    args = sweep_parser(family, prog).parse_args(argv)
    return run_sweep_command(family, args)
