"""One sweep from its configs to its summary, whatever starts it: ``reinit-tune sweep
<family>``, ``python sweeps/<family>.py`` and the Python API (``run_sweep``) all run a
``Sweep``, dry run included, so they print the same plan, counts and estimate.

A sweep plans its configs against the store (``reinit_tune.sweep.plan``), prints the grid,
then either estimates the cost (a dry run: Ray is never imported) or sets the process
environment once (``reinit_tune.sweep.environment``), joins or starts Ray as a named job and
launches what the store lacks (``reinit_tune.sweep.launch``). A Ray instance the sweep
started itself stops with it; one its caller started is the caller's.

Resuming needs no state besides the store: a rerun of the same command skips every trial
stored "ok" (identity = config hash) and runs the rest, so a driver killed by SIGINT or
SIGKILL loses only the trials it was running.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from reinit_tune import store
from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.model.shape import ModelShape
from reinit_tune.sweep import cluster, console, cost, environment, preflight, seeds
from reinit_tune.sweep import plan as planning
from reinit_tune.sweep.cluster import Devices
from reinit_tune.sweep.options import AUTO_GPUS, RunOptions
from reinit_tune.sweep.plan import Plan, describe
from reinit_tune.sweep.summary import SweepSummary
from reinit_tune.wording import counted

__all__ = ["Sweep", "SweepSummary", "run_sweep"]


class Sweep:
    """A sweep of ``configs`` run with ``options``; ``shapes`` gives the shape of models that
    cannot be inspected here. Everything goes to ``out`` (default: standard output).

    ``started`` says whether trials may have started: an error raised by ``run`` before that
    is bad input found while nothing ran (``InputError``: the command exits 2), one after it
    is not."""

    def __init__(self, configs: list[TrialConfig], options: RunOptions | None = None, *,
                 shapes: dict[str, ModelShape] | None = None, out: TextIO | None = None,
                 devices: Devices | None = None):
        self.configs = configs
        self.options = options or RunOptions()
        self.shapes = shapes
        self.out = out
        self.started = False
        self.devices = devices  # how --gpus-per-trial was resolved, where the caller did

    def _print(self, text: object, out: TextIO | None = None) -> None:
        print(text, file=out or self.out or sys.stdout, flush=True)

    def _estimate(self, plan: Plan, calibrate: bool = False) -> None:
        if plan.groups:  # seeds on demand: between every group at --min-seeds and at --max
            rule = plan.options.seeds
            least = [c for c in plan.todo if c.seed < rule.min_seeds]
            self._print(f"seeds on demand: {counted(len(plan.groups), 'group')}; at least "
                        f"{len(least)} "
                        f"trials (every group stops at --min-seeds {rule.min_seeds}), at most "
                        f"{len(plan.todo)} (every group runs to --max-seeds {rule.max_seeds})")
            if note := seeds.unseen_collapse_note(plan.groups, rule):
                self._print(note)
            for what, configs in (("at least", least), ("at most", list(plan.todo))):
                if configs:
                    self._print(f"{what}: {self._cost(plan, configs, calibrate)}")
            return
        self._print(self._cost(plan, list(plan.todo), calibrate))

    @staticmethod
    def _cost(plan: Plan, configs: list[TrialConfig], calibrate: bool) -> cost.Estimate:
        use_gpu = plan.options.resources.gpus_per_trial > 0
        return cost.sweep_estimate(configs, plan.shapes, plan.data_dir, calibrate_here=calibrate,
                                   use_gpu=use_gpu,
                                   every_epoch=plan.options.evaluate == "every-epoch",
                                   packs=packs_of(plan, configs) if use_gpu else None,
                                   gpus_per_pack=plan.options.resources.gpus_per_trial or 1.0)

    def _resolve_devices(self) -> None:
        """``--gpus-per-trial auto`` as a number (``cluster.resolve_gpus``, unless the caller
        resolved it already: ``devices``)."""
        if self.options.resources.gpus_per_trial != AUTO_GPUS:
            return
        if self.devices is None:
            self.devices = cluster.resolve_gpus(AUTO_GPUS)
        self.options = planning.resolved(self.options, self.devices.gpus_per_trial)

    def cost(self) -> tuple[cost.Estimate | str | None, int | None]:
        """What the trials the store lacks would cost (the dry run's estimate, printing
        nothing; None where the store has them all), and under seeds on demand the most
        trials it may add (the estimate: the least, every group stopping at --min-seeds)."""
        self._resolve_devices()
        plan = planning.make_plan(self.configs, self.options, self.shapes)
        todo = list(plan.todo)
        most = len(todo) if plan.groups else None
        if plan.groups:
            todo = [c for c in todo if c.seed < plan.options.seeds.min_seeds]
        return (self._cost(plan, todo, calibrate=False) if todo else None), most

    def run(self, *, dry_run: bool = False, calibrate: bool = False) -> SweepSummary:
        """Plan, print the grid, and run what the store lacks (or, with ``dry_run``, print
        the estimated cost and run nothing; ``calibrate`` measures the per-token cost on this
        device first). Returns the counts of what happened."""
        if not dry_run:  # a compaction a killed command left is completed before anything
            results = Path(self.options.results_dir).expanduser()
            unwritable = preflight.check_folder(results, "--results", (store.TRIALS,
                                                                        store.EPOCHS))
            if unwritable:  # before finishing a compaction there, which would fail on it
                raise InputError("; ".join(unwritable))
            store.finish_compactions(results)
        self._resolve_devices()
        plan = planning.make_plan(self.configs, self.options, self.shapes, dry_run=dry_run)
        if plan.todo and (calibrate or not dry_run):
            preflight.check_local_gpus(plan.options.resources.gpus_per_trial,
                                       calibrate=dry_run)
        if self.devices is not None and self.devices.why and plan.todo:  # where trials run
            self._print(self.devices.why)
        self._print(describe(plan.configs, plan.data_dir, plan.options.allow_subset))
        if plan.skipped:
            self._print(f"{counted(plan.skipped, 'trial')} already in {plan.results_dir}: skipped")
        if plan.not_needed:
            self._print(f"{counted(plan.not_needed, 'trial')} not needed: their groups' stored "
                        "seeds reach --target-ci")
        if plan.reuse:
            self._print(f"{counted(len(plan.reuse), 'trial')} stored under another family with "
                        "the same configuration: copied, not run again")
        if dry_run:
            summary = SweepSummary(plan.name, plan.results_dir, total=len(plan.configs),
                                   skipped=plan.skipped, reused=len(plan.reuse), dry_run=True,
                                   not_needed=plan.not_needed)
            self._print(summary)
            if plan.todo:  # nothing to run costs nothing: no estimate, no calibration hint
                self._estimate(plan, calibrate)
            return summary
        if plan.todo:
            self._estimate(plan)
        environment.prepare(plan.options.verbose)  # before anything imports Ray
        if plan.options.verbose or not plan.todo:  # Tune's own output was asked for
            return self._launch(plan, self.out)
        with console.ray_output_to(console.log_path(plan.results_dir, plan.name),
                                   self.out) as terminal:
            return self._launch(plan, terminal.out, terminal.log)

    def _launch(self, plan: Plan, out: TextIO | None,
                ray_log: Path | None = None) -> SweepSummary:
        """Join or start Ray, launch ``plan`` and print its summary to ``out``; ``ray_log``:
        the file Ray's own output goes to, which the summary names."""
        ours = "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
        from reinit_tune.sweep import launch

        try:
            if plan.todo:
                launch.connect(plan, cluster.name_job(
                    plan.name, sorted({c.model for c in plan.todo}), plan.results_dir))
            self.started = True
            summary = launch.launch(plan, out, ray_log=ray_log)
        finally:
            if ours:  # a local instance would otherwise outlive the sweep's command
                cluster.shutdown_ray()
        self._print(summary, out)
        return summary


def packs_of(plan: Plan, configs: list[TrialConfig]) -> list[list[TrialConfig]]:
    """The packs a GPU sweep of ``plan`` would form of ``configs`` (``sweep.packs``), sized
    for the free memory of a GPU here, else of the GPU the recorded cost table was measured
    on (``cost.RECORDED_GPU_FREE``)."""
    import torch

    from reinit_tune.sweep import packs, seeds

    options = plan.options
    here = torch.cuda.device_count() if torch.cuda.is_available() else 0
    free = packs.cuda_free_bytes() if here else cost.RECORDED_GPU_FREE
    size = packs.resolve_pack_size(options.pack_size, configs, plan.shapes,
                                   options.resources.gpus_per_trial, free_bytes=lambda: free,
                                   gpus=max(here, 1))
    if packs.pack_note(size, options.runtime(plan.data_dir, plan.results_dir)) is not None:
        size = 1
    return packs.group_packs(configs, size,
                             seeds.group_and_seed(plan.groups) if plan.groups else None)


def run_sweep(
    configs: list[TrialConfig],
    options: RunOptions | None = None,
    *,
    shapes: dict[str, ModelShape] | None = None,
    dry_run: bool = False,
    calibrate: bool = False,
    out: TextIO | None = None,
) -> SweepSummary:
    """Plan ``configs``, print the grid, and run what the store lacks (or, with ``dry_run``,
    print the estimated cost and run nothing; ``calibrate`` measures the per-token cost on
    this device first). Returns the counts of what happened (``Sweep.run``)."""
    return Sweep(configs, options, shapes=shapes, out=out).run(dry_run=dry_run,
                                                                calibrate=calibrate)
