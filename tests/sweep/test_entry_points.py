"""Every way into a sweep is one sweep: ``reinit-tune sweep <family>``, ``python
sweeps/<family>.py`` and the Python API (``run_sweep``) plan the same trials and print the same
dry run (the grid, the counts, the estimate) for every family, copied trials included; and
the command's help and family listing load neither torch nor Ray (nor pandas, scipy and
matplotlib: the families' figure modules are imported when a figure is drawn)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from reinit_tune import families, store
from reinit_tune.cli import main, sweep_main
from reinit_tune.families import Grid
from reinit_tune.sweep import plan
from reinit_tune.sweep.runner import run_sweep
from tests.helpers import REPO

NAMES = [f.name for f in families.all_families()]


@pytest.fixture
def planned(monkeypatch, no_ray, tmp_path):
    """The trial ids each sweep planned, in order; the official split sizes (hub data, read
    from the task table: nothing is downloaded by a dry run) and an empty store in the
    default results folder, so no flag is needed."""
    monkeypatch.delenv("REINIT_TUNE_DATA", raising=False)
    monkeypatch.delenv("REINIT_TUNE_STORAGE", raising=False)
    monkeypatch.chdir(tmp_path)
    calls: list[list[str]] = []
    real = plan.make_plan

    def record(configs, *args, **kwargs):
        calls.append([c.trial_id for c in configs])
        return real(configs, *args, **kwargs)

    monkeypatch.setattr(plan, "make_plan", record)
    return calls


def api_dry_run(name: str) -> str:
    """The family's dry run through the Python API, with no option given."""
    family = families.get(name)
    out = io.StringIO()
    summary = run_sweep(family.configs(Grid()), family.run_options(), dry_run=True, out=out)
    assert summary.dry_run and summary.total > 0
    return out.getvalue()


@pytest.mark.parametrize("name", NAMES)
def test_the_command_its_script_and_the_api_dry_run_the_same_sweep(name, planned, capsys):
    assert main(["sweep", name, "--dry-run"]) == 0
    command = capsys.readouterr().out
    assert sweep_main(name, ["--dry-run"]) == 0
    script = capsys.readouterr().out
    api = api_dry_run(name)
    command_ids, script_ids, api_ids = planned
    assert command_ids == script_ids and command_ids  # the same trials, in the same order
    # the family's trials built in Python with no option given; differs only while the
    # typed defaults (TrialConfig, RunOptions) and the command's defaults disagree
    assert api_ids == command_ids
    assert script == command == api  # grid, counts and estimate, line for line
    assert "dry run: " in api and " trials would run" in api


def test_a_dry_run_counts_copied_trials_alike_from_every_entry_point(planned, capsys):
    """``small_data``'s runs are ``progressive``'s at 500 examples: one stored under
    ``progressive`` is copied, not run, and every entry point says so and counts it so."""
    family = families.get("small_data")
    first = family.configs(Grid())[0]
    stored = first.replace(experiment="progressive")
    reports = [{"epoch": e + 1, "train_loss": 0.4, "eval_loss": 0.5, "score": 0.6,
                f"eval_{first.task_spec.primary}": 0.6, "train_time_s": 1.0,
                "eval_time_s": 0.5, "train_examples": 500, "setup_time_s": 0.1,
                "device": "cpu", "precision_used": first.precision, "node_id": "n"}
               for e in range(first.epochs)]
    store.write_trial("results", store.trial_row(stored, reports, num_layers=12, status="ok"),
                      store.epoch_rows(stored, reports))
    assert main(["sweep", "small_data", "--dry-run"]) == 0
    command = capsys.readouterr().out
    api = api_dry_run("small_data")
    total = len(planned[0])
    assert "1 trial stored under another family with the same configuration: copied, " \
           "not run again" in command
    assert f"dry run: {total - 1} of {total} trials would run" in command
    assert api == command


@pytest.mark.parametrize("name", ["progressive", "heads"])
def test_a_sweep_script_prints_the_commands_dry_run(name, tmp_path, monkeypatch):
    env = {k: v for k, v in os.environ.items()
           if k not in ("REINIT_TUNE_DATA", "REINIT_TUNE_STORAGE")}

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)

    script = run(str(REPO / "sweeps" / f"{name}.py"), "--dry-run")
    command = run("-m", "reinit_tune.cli", "sweep", name, "--dry-run")
    assert script.returncode == 0 == command.returncode, script.stderr[-2000:]
    assert script.stdout == command.stdout and "trials would run" in script.stdout


LIGHT = """
import sys
from reinit_tune.cli import main
try:
    code = main({argv!r})
except SystemExit as e:
    code = e.code
heavy = sorted(m for m in ("torch", "ray", "transformers", "scipy", "matplotlib", "pandas")
               if m in sys.modules)
print("HEAVY", heavy, code)
"""


@pytest.mark.parametrize("argv", [["--help"], ["families"], ["sweep", "--help"],
                                  ["sweep", "progressive", "--help"]], ids=" ".join)
def test_help_and_the_family_list_import_neither_torch_nor_ray(argv):
    run = subprocess.run([sys.executable, "-c", LIGHT.format(argv=argv)], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert "HEAVY [] 0" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
