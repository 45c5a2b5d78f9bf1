"""The ``reinit-tune`` command: one entry point with a subcommand per job.

    reinit-tune sweep <family> [flags]     expand a family's grid and run it on Ray Tune
    reinit-tune families [--markdown]      list the families, their sources and trial counts
    reinit-tune report [--results DIR]     every figure and table the store supports, as HTML
    reinit-tune compare MODEL_A MODEL_B    two models compared layer by layer
    reinit-tune consistency                every pair of seeds and of tasks of a store (002)

``sweeps/<family>.py`` scripts call ``sweep_main`` with their family's name, so
``python sweeps/progressive.py ...`` and ``reinit-tune sweep progressive ...`` are the same
command. Exit status: 0 done, 1 some trials failed or did not finish (or a figure failed to
draw), 2 bad input found before anything started (the message says what to change), 128 +
the signal when interrupted (130 Ctrl+C, 143 SIGTERM, 129 SIGHUP; the summary is printed).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from reinit_tune import families
from reinit_tune.config import INIT_SCHEMES, PRECISIONS, SCHEDULES, TrialConfig
from reinit_tune.env import HUB
from reinit_tune.errors import InputError
from reinit_tune.families.base import (
    DEFAULT_INIT_SCHEME,
    DEFAULT_LENGTH_GROUPED,
    DEFAULT_PRECISION,
    Family,
    Grid,
    parse_size,
)
from reinit_tune.hardware import resolve_precision
from reinit_tune.model.shape import EMBEDDED_MODEL, shape_for
from reinit_tune.sweep import signals
from reinit_tune.sweep.options import (
    DATA_CHANGED,
    DEFAULT_CHECKPOINT_AFTER_S,
    Resources,
    RunOptions,
    SimilarityOptions,
    pack_size_arg,
)
from reinit_tune.tasks import TASKS

DEFAULT_MODEL = "bert-base-uncased"
# The run flags' defaults are the typed options' own, so the command and the Python API agree.
_RUN = RunOptions()


class _Help(argparse.RawDescriptionHelpFormatter):
    """Help that shows a default only where there is one to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.default not in (None, argparse.SUPPRESS, False, [], ())
                and "default" not in text and action.option_strings):
            default = action.default
            if isinstance(default, list):
                default = " ".join("full" if v is None else str(v) for v in default)
            text += f" (default: {default})"
        return text


def _escape(text: str) -> str:
    """Help strings go through %-formatting (argparse): keep a literal % (100%) as it is."""
    return text.replace("%", "%%")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


# -- sweep ----------------------------------------------------------------------------------
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
    common.add_argument("--tasks", nargs="+", default=list(family.tasks), choices=sorted(TASKS),
                        metavar="TASK", help=f"GLUE tasks, of: {' '.join(sorted(TASKS))}")
    sizes = " ".join("full" if v is None else str(v) for v in family.sizes)
    common.add_argument("--sizes", nargs="+", type=parse_size, default=None,
                        help="train subset sizes: counts, fractions in (0,1), or 'full' "
                             f"(default: {sizes}{' unless set per task' if per_task else ''})")
    common.add_argument("--seeds", type=positive_int, default=None,
                        help="runs per setting, seeds 0..N-1 (default: "
                             + (str(family.seeds) if family.seeds
                                else "50 at <=500 examples, else 3") + ")")
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
                             "'authors-code' (what the 003 authors' code did; see README)")
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
    if family.flags:
        own = p.add_argument_group(f"{family.name} grid")
        for flag in family.flags:
            flag.add_to(own)
    for action in p._actions:  # per-task defaults and titles may hold a literal %
        if action.help and "%" in action.help and "%(" not in action.help:
            action.help = _escape(action.help)
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
    run.add_argument("--results", default=str(_RUN.results_dir), help="results store folder")
    run.add_argument("--cpus-per-trial", type=float, default=_RUN.resources.cpus_per_trial,
                     help="CPUs per trial, also its torch threads")
    run.add_argument("--gpus-per-trial", type=float, default=_RUN.resources.gpus_per_trial,
                     help="GPUs per trial; fractions pack several trials on one GPU")
    run.add_argument("--pack-size", type=pack_size_arg, default=_RUN.pack_size,
                     help="train up to N trials that differ only in their surgery (same task, "
                          "seed, size, epochs, batch, lr and schedule, precision, model) as "
                          "one fused pack per Tune trial, each stored as its own trial; "
                          "'auto': 1 on CPUs, on a GPU what its free memory holds. Probing "
                          "and sequential trials run unpacked (so do QA trials and runs with "
                          "--similarity or --save-model)")
    run.add_argument("--max-failures", type=int, default=_RUN.max_failures,
                     help="retries of a failing trial (a killed worker, a preempted node)")
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
                          "trial")
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


def sweep_parser(family: Family, prog: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog or f"reinit-tune sweep {family.name}", formatter_class=_Help,
        description=f"{family.title} ({family.source}).",
    )
    add_sweep_flags(p, family)
    return p


def grid_of(args: argparse.Namespace, family: Family) -> Grid:
    """The ``Grid`` the common sweep flags describe (None: the family's default)."""
    model = args.model or family.model
    on_gpu = args.gpus_per_trial > 0
    precision, why = resolve_precision(args.precision, on_gpu=on_gpu)
    logging.getLogger("reinit_tune").info("precision %s (%s)", precision, why)
    return Grid(
        model=model, shape=shape_for(model, args.num_layers, args.num_heads),
        tasks=tuple(args.tasks), sizes=tuple(args.sizes) if args.sizes else None,
        seeds=args.seeds, epochs=args.epochs, data_dir=args.data_dir, lr=args.lr,
        batch_size=args.batch_size, max_seq_length=args.max_seq_length,
        schedule=args.schedule, warmup_ratio=args.warmup_ratio, precision=precision,
        init_scheme=args.init_scheme, length_grouped=args.length_grouped, on_gpu=on_gpu,
    )


def configs_of(args: argparse.Namespace, family: Family) -> list[TrialConfig]:
    """The trials a sweep command describes: its grid (``grid_of``) expanded by the family
    with its own flags' values."""
    return family.configs(grid_of(args, family),
                          **{f.dest: getattr(args, f.dest) for f in family.flags})


def run_options(args: argparse.Namespace) -> RunOptions:
    """The ``RunOptions`` the run flags describe."""
    similarity = None
    if args.similarity_examples is not None and args.similarity_examples < 1:
        raise InputError(f"--similarity-examples: must be a positive count, got "
                         f"{args.similarity_examples}")
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
        pack_size=args.pack_size,
    )


def run_sweep_command(family: Family, args: argparse.Namespace) -> int:
    """Plan the family's grid and run it; bad input exits 2 before Ray starts, a partly
    failed sweep exits 1, an interrupted one 128 + the signal (130 Ctrl+C, 143 SIGTERM, 129
    SIGHUP) after its summary. Ray, if this command started or joined it, is let go on every
    way out (a local instance would otherwise outlive the command)."""
    # A caller's own Ray (tests run several commands in one process) is the caller's to stop.
    ours = "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
    try:
        return _run_sweep(family, args)
    finally:
        if ours and "ray" in sys.modules:  # a dry run or bad input never imported it
            from reinit_tune.sweep import cluster

            cluster.shutdown_ray()


def _run_sweep(family: Family, args: argparse.Namespace) -> int:
    # Imported here, as the other commands' modules below: `--help` and a dry run then never
    # pay for importing Ray (and torch only where the command needs it).
    from reinit_tune.sweep import cost
    from reinit_tune.sweep.plan import describe, make_plan

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    signals.install()
    try:
        model = args.model or family.model
        configs = configs_of(args, family)
        plan = make_plan(configs, run_options(args),
                         {model: shape_for(model, args.num_layers, args.num_heads)})
        print(describe(plan.configs, plan.data_dir, plan.options.allow_subset))
        if plan.skipped:
            print(f"{plan.skipped} trials already in {plan.results_dir}: skipped")
        if plan.reuse:
            print(f"{len(plan.reuse)} trials are stored under another family with the same "
                  "configuration: copied, not run again")
        if args.dry_run:
            print(f"dry run: {len(plan.todo)} of {len(plan.configs)} trials would run")
            print(cost.sweep_estimate(list(plan.todo), plan.shapes, plan.data_dir,
                                      calibrate_here=args.calibrate,
                                      use_gpu=args.gpus_per_trial > 0,
                                      every_epoch=args.evaluate == "every-epoch"))
            return 0
        from reinit_tune.sweep import cluster

        cluster.secure_local_ray()  # before the runner imports Ray
        from reinit_tune.sweep import runner

        if plan.todo:
            print(cost.sweep_estimate(list(plan.todo), plan.shapes, plan.data_dir,
                                      use_gpu=args.gpus_per_trial > 0,
                                      every_epoch=args.evaluate == "every-epoch"))
            cluster.name_job(plan.name, sorted({c.model for c in plan.todo}), plan.results_dir)
            runner.connect(plan)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to run the sweep", file=sys.stderr)
        return signals.exit_status()
    try:
        summary = runner.launch(plan)
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to finish the sweep", file=sys.stderr)
        return signals.exit_status()
    print(summary)
    if signals.received() is not None:
        return signals.exit_status()
    return 1 if summary.failed or summary.not_finished else 0


def sweep_main(name: str, argv: list[str] | None = None, prog: str | None = None) -> int:
    """``reinit-tune sweep <name> ...`` (and ``python sweeps/<name>.py ...``)."""
    family = families.get(name)
    args = sweep_parser(family, prog).parse_args(argv)
    return run_sweep_command(family, args)


# -- families -------------------------------------------------------------------------------
def family_table(markdown: bool = False) -> str:
    """Every family with its paper source and the trial count of its default grid on its
    default model with the official split sizes."""
    rows = []
    quiet = logging.getLogger("reinit_tune")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the grids' "skipping train sizes" notes are expected here
    try:
        for family in families.all_families():
            count = len(family.configs(Grid(data_dir=HUB)))
            rows.append((family.name, family.source, family.title, family.fields, count,
                         family.model))
    finally:
        quiet.setLevel(level)
    if markdown:
        lines = ["| family | what | source | config fields | default trials (model) |",
                 "|---|---|---|---|---|"]
        lines += [f"| `{n}` | {t} | {s} | {f} | {c:,} ({m}) |" for n, s, t, f, c, m in rows]
        return "\n".join(lines)
    width = max(len(r[0]) for r in rows)
    lines = [f"{'family':<{width}}  {'trials':>6}  source / what"]
    lines += [f"{n:<{width}}  {c:>6}  {s}: {t}" + ("" if m == DEFAULT_MODEL else f" [{m}]")
              for n, s, t, _, c, m in rows]
    lines.append(f"trials: the default grid on the family's model ({DEFAULT_MODEL} unless "
                 "named) with the official split sizes; `reinit-tune sweep <family> "
                 "--dry-run` shows a grid")
    return "\n".join(lines)


# -- compare --------------------------------------------------------------------------------
def compare_command(args: argparse.Namespace) -> int:
    import pandas as pd

    from reinit_tune.analysis.similarity import plot_pair
    from reinit_tune.similarity.compare import compare

    try:
        rows = compare(args.model_a, args.model_b, args.tasks, examples=args.examples,
                       max_seq_length=args.max_seq_length, data_dir=args.data_dir,
                       layer_replacement=args.layer_replacement)
    except (InputError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    table = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "similarity.csv", index=False)
    _, paths, _ = plot_pair(table, out, "similarity",
                            f"{Path(args.model_a).name} vs {Path(args.model_b).name} on "
                            f"{'+'.join(args.tasks)}")
    print(table.drop(columns=["note"]).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"table: {out / 'similarity.csv'}\nfigure: " + ", ".join(str(p) for p in paths))
    return 0


# -- the command ----------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="reinit-tune", formatter_class=_Help,
                                description=__doc__.split("\n\n")[0].replace("``", ""))
    commands = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sweep = commands.add_parser("sweep", help="run an experiment family's grid on Ray Tune",
                                description="Run an experiment family's grid on Ray Tune; "
                                            "`reinit-tune sweep <family> --help` lists its "
                                            "flags.")
    by_family = sweep.add_subparsers(dest="family", required=True, metavar="FAMILY")
    for family in families.all_families():
        add_sweep_flags(by_family.add_parser(
            family.name, help=_escape(f"{family.title} ({family.source})"),
            formatter_class=_Help, description=f"{family.title} ({family.source})."), family)

    listing = commands.add_parser("families", help="list the experiment families",
                                  description=family_table.__doc__)
    listing.add_argument("--markdown", action="store_true", help="as the README's table")

    report = commands.add_parser("report", help="figures, tables and an HTML report from a "
                                 "results store", formatter_class=_Help,
                                 description="Draw every figure and table the store supports "
                                             "into one self-contained report.html.")
    report.add_argument("--results", default="results", help="results store folder")
    report.add_argument("--out", default=None, help="report folder (default: RESULTS/report)")
    report.add_argument("--only", nargs="+", default=None, metavar="FIGURE",
                        help="draw only these figures and print their numbers")
    report.add_argument("--max-panels", type=int, default=None, metavar="N",
                        help="panels (settings) one figure draws at most; the settings with "
                             "the most runs are drawn, every setting's numbers are tabled "
                             "(default: 12)")

    compare = commands.add_parser(
        "compare", help="compare two models layer by layer (002 §5)", formatter_class=_Help,
        description="Weight distances, attention JS divergence, SVCCA distance and linear CKA "
                    "between two models, per layer, on the dev examples of one or more tasks "
                    "(002 §5.2 pools 200 examples of each task). Models are names, or folders "
                    "saved by a sweep run with --save-model (RESULTS/models/<trial_id>).")
    compare.add_argument("model_a", help="model name or saved model folder")
    compare.add_argument("model_b", help="model name or saved model folder")
    compare.add_argument("--tasks", nargs="+", default=["sst2"], choices=sorted(TASKS),
                         metavar="TASK", help="dev splits to compare on")
    compare.add_argument("--examples", type=positive_int, default=200,
                         help="dev examples per task")
    compare.add_argument("--max-seq-length", type=int, default=128,
                         help="longer inputs are truncated")
    compare.add_argument("--data-dir", default=None,
                         help="data folder (default: $REINIT_TUNE_DATA, else the hub)")
    compare.add_argument("--layer-replacement", action="store_true",
                         help="also 002 §4's layer replacement (model_b's layer put into "
                              "model_a)")
    compare.add_argument("--out", default="similarity",
                         help="folder for the CSV and the figure")

    pairs = commands.add_parser(
        "consistency", help="compare every pair of seeds and of tasks of a store (002 §5)",
        formatter_class=_Help,
        description="002 §5's consistency analyses: every two trials of the store that differ "
                    "only in their seed, and every two that differ only in their task (and its "
                    "hyperparameters), compared layer by layer on dev examples, into "
                    "RESULTS/pairs/. Needs the trials' saved models (--save-model).")
    pairs.add_argument("--results", default="results", help="results store folder")
    pairs.add_argument("--examples", type=positive_int, default=200,
                       help="dev examples of each task (002 §5.2 uses 200)")
    pairs.add_argument("--experiment", default=None,
                       help="only the trials of this family (default: every family)")
    pairs.add_argument("--data-dir", default=None,
                       help="data folder (default: $REINIT_TUNE_DATA, else the hub)")

    maintain = commands.add_parser(
        "store", help="compact or check a results store", formatter_class=_Help,
        description="Maintain a results store. Sweeps write one small Parquet file per trial "
                    "(and per table); `compact` merges them into a few large files, which "
                    "every reader loads in a fraction of a second (safe while sweeps write "
                    "and reports read; sweeps compact by themselves past "
                    "2,000 small files). `check` reads every table and names what readers "
                    "skip: unreadable or foreign files, malformed rows, trials whose epoch "
                    "rows are unreadable (the next sweep runs those again).")
    actions = maintain.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (("compact", "merge the per-trial files into compacted files"),
                         ("check", "report unreadable files, malformed rows and trials whose "
                                   "epoch rows are unreadable (exit status 1 if any)")):
        sub = actions.add_parser(action, help=text, description=text, formatter_class=_Help)
        sub.add_argument("--results", default="results", help="results store folder")
    return p


def store_command(args: argparse.Namespace) -> int:
    import time

    from reinit_tune import store

    results = Path(args.results)
    if not results.is_dir():
        print(f"error: no results folder {results}; pass --results", file=sys.stderr)
        return 2
    if args.action == "check":
        check = store.check_store(results)
        print(check)
        return 0 if check.clean else 1
    start = time.perf_counter()
    merged = store.compact(results)
    files = ", ".join(f"{n} {name}" for name, n in merged.items() if n) or "nothing"
    print(f"compacted {results} in {time.perf_counter() - start:.1f} s: merged {files} "
          f"per-trial files; {store.small_file_count(results)} per-trial files left")
    return 0


def consistency_command(args: argparse.Namespace) -> int:
    from reinit_tune.similarity.pairs import consistency

    results = Path(args.results)
    if not results.is_dir():
        print(f"error: no results folder {results}; pass --results", file=sys.stderr)
        return 2
    try:
        done = consistency(results, examples=args.examples, data_dir=args.data_dir,
                           experiment=args.experiment)
    except (InputError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{done} pairs compared into {results / 'pairs'}; `reinit-tune report` draws them")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "sweep":
        return run_sweep_command(families.get(args.family), args)
    if args.command == "families":
        try:
            print(family_table(args.markdown))
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if args.command == "report":
        from reinit_tune.analysis import report

        keys = {s.key for s in report.sections()}
        if args.only and not set(args.only) <= keys:
            print(f"error: --only {sorted(set(args.only) - keys)}: no such figure; known: "
                  f"{', '.join(sorted(keys))}", file=sys.stderr)
            return 2
        if args.max_panels is not None and args.max_panels < 1:
            print(f"error: --max-panels {args.max_panels}: give 1 or more", file=sys.stderr)
            return 2
        return report.run(Path(args.results), Path(args.out) if args.out else None, args.only,
                          max_panels=args.max_panels)
    if args.command == "consistency":
        return consistency_command(args)
    if args.command == "store":
        return store_command(args)
    return compare_command(args)


if __name__ == "__main__":
    sys.exit(main())
