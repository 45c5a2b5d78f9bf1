"""What a sweep did: ``SweepSummary``, the counts every entry point prints and maps to an exit
status (trials run, failed, skipped, copied, left to other drivers, not finished)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reinit_tune import store
from reinit_tune.wording import counted

if TYPE_CHECKING:
    from reinit_tune.sweep.seeds import SeedReport


@dataclass
class SweepSummary:
    name: str
    results_dir: Path
    total: int
    skipped: int = 0
    ok: int = 0
    reused: int = 0  # copied from a stored run of the same config under another family
    retries: int = 0
    stalled: int = 0  # attempts ended for making no progress within their limit
    wall_time_s: float = 0.0
    examples_per_s: list[float] = field(default_factory=list)
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)  # results that are not really results
    errors: Counter[str] = field(default_factory=Counter)  # failure message -> trials
    stopped: str | None = None  # why the sweep stopped before running every trial
    # trials left to other drivers on the same store (reinit_tune.sweep.claims): why -> count
    elsewhere: Counter[str] = field(default_factory=Counter)
    # seeds on demand: the grid's trials its groups did not need, and what each group got
    not_needed: int = 0
    seeds: SeedReport | None = None
    # the file Ray's and Tune's own output went to (reinit_tune.sweep.console), where any
    ray_log: Path | None = None

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    @property
    def stored(self) -> int:
        """Trials of this sweep's grid the store holds now (this run's and earlier ones)."""
        return self.skipped + self.ok + self.failed + self.reused

    @property
    def not_finished(self) -> int:
        return (self.total - self.skipped - self.ok - self.failed - self.reused
                - sum(self.elsewhere.values()) - self.not_needed)

    def __str__(self) -> str:
        if self.dry_run:
            # trials stored under another family are copied, not run
            would = self.total - self.skipped - self.reused - self.not_needed
            if self.seeds is not None or self.not_needed:
                return f"dry run: at most {would} of {self.total} trials would run"
            return f"dry run: {would} of {self.total} trials would run"
        speed = (
            f"; {sum(self.examples_per_s) / len(self.examples_per_s):.1f} train examples/s per "
            "trial (mean)" if self.examples_per_s else ""
        )
        rerun = (f"\n{self.stored} stored, {self.not_finished} not finished; rerun the same "
                 "command to resume (stored trials are skipped)" if self.not_finished else "")
        warned = "".join(f"\nwarning: {w}" for w in self.warnings)
        failures = "".join(f"\nfailed ({counted(n, 'trial')}): {text}"
                           for text, n in self.errors.most_common(5))
        stopped = f"\n{self.stopped}" if self.stopped else ""
        others = "".join(f"\n{counted(n, 'trial')} {why}"
                         for why, n in sorted(self.elsewhere.items()))
        if any(why.startswith("being trained") for why in self.elsewhere):
            others += ("\nrerun the same command after the other driver finishes to pick up "
                       "any trial it did not finish")
        return (
            f"sweep {self.name}: {counted(self.total, 'trial')}: "
            f"{self.ok} ran ok, {self.failed} failed, "
            f"{self.skipped} already in the store (skipped), "
            + (f"{self.reused} copied from another family's identical runs, "
               if self.reused else "") +
            (f"{sum(self.elsewhere.values())} left to other drivers on this store, "
             if self.elsewhere else "") +
            (f"{self.not_needed} not needed (seeds on demand closed their groups), "
             if self.seeds is not None else "") +
            f"{self.not_finished} not finished; "
            f"{self.retries} retries"
            + (f" ({self.stalled} after a stall)" if self.stalled else "") +
            f"; wall time {self.wall_time_s:.0f} s{speed}\nresults: "
            f"{self.results_dir}/{store.TRIALS}/ and {self.results_dir}/{store.EPOCHS}/ "
            f"(reinit_tune.store.load_trials('{self.results_dir}'))"
            + (f"\nRay's and Tune's own output: {self.ray_log}" if self.ray_log else "") +
            f"{failures}{stopped}{others}{rerun}"
            + (f"\n{self.seeds}" if self.seeds is not None else "") + warned
        )
