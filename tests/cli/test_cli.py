"""The installed ``reinit-tune`` command: its subcommands and their help, the sweep scripts as
the same command, and exit statuses that tell bad input (2) from everything else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reinit_tune import families
from reinit_tune.errors import InputError
from reinit_tune.sweep import launch
from tests.helpers import REPO, cli

COMMAND = str(Path(sys.executable).with_name("reinit-tune"))


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_installed_command_lists_its_subcommands_and_families():
    top = run(COMMAND, "--help")
    assert top.returncode == 0, top.stderr
    for command in ("sweep", "families", "report", "compare"):
        assert command in top.stdout
    assert "``" not in top.stdout  # plain words, not the docstring's markup
    sweep = run(COMMAND, "sweep", "--help")
    assert sweep.returncode == 0
    for family in families.all_families():
        assert family.name in sweep.stdout
    for command in ("report", "compare", "families"):
        shown = run(COMMAND, command, "--help")
        assert shown.returncode == 0 and "usage: reinit-tune " + command in shown.stdout
    listing = run(COMMAND, "families")
    assert listing.returncode == 0
    assert "progressive" in listing.stdout and "2145" in listing.stdout


def test_every_sweep_script_is_its_familys_command():
    scripts = sorted(p.stem for p in (REPO / "sweeps").glob("*.py"))
    assert "progressive" in scripts
    for name in scripts:
        families.get(name)
        text = (REPO / "sweeps" / f"{name}.py").read_text()
        assert f'sweep_main("{name}", prog="python sweeps/{name}.py")' in text
    shown = run(sys.executable, "sweeps/progressive.py", "--help")
    assert shown.returncode == 0 and "usage: python sweeps/progressive.py" in shown.stdout
    assert "--k" in shown.stdout and "(default: None)" not in shown.stdout
    assert "(default: )" not in shown.stdout and "(default: [])" not in shown.stdout


def test_bad_input_exits_2_but_a_failure_after_launch_is_not_called_bad_input(
        capsys, monkeypatch, tmp_path, tiny_bert, glue_dir):
    code, out = cli(capsys, "sweep", "heads", "--model", tiny_bert, "--layers", "7",
                    "--results", str(tmp_path))
    assert code == 2 and out.startswith("error: --layers: [7] out of range")
    assert "Traceback" not in out

    def broken(plan, out=None):
        raise InputError("raised inside a running sweep")

    monkeypatch.setattr(launch, "connect", lambda plan, job=None: None)
    monkeypatch.setattr(launch, "launch", broken)
    with pytest.raises(InputError, match="inside a running sweep"):
        cli(capsys, "sweep", "progressive", "--model", tiny_bert, "--tasks", "rte", "--sizes",
            "8", "--seeds", "1", "--k", "0", "--data-dir", str(glue_dir), "--results",
            str(tmp_path / "r"))


def test_report_of_a_missing_folder_and_an_unknown_figure_exit_2(capsys, tmp_path):
    code, out = cli(capsys, "report", "--results", str(tmp_path / "none"))
    assert code == 2 and "no results folder" in out
    code, out = cli(capsys, "report", "--results", str(tmp_path), "--only", "nope")
    assert code == 2 and "no such figure" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["progressive", "--seeds", "auto"], "error: --seeds auto needs --target-ci W"),
    (["progressive", "--target-ci", "0.01"], "error: --target-ci: only with --seeds auto"),
    (["progressive", "--seeds", "4", "--max-seeds", "9"],
     "error: --max-seeds: only with --seeds auto"),
    (["progressive", "--seeds", "auto", "--target-ci", "0.01", "--min-seeds", "6",
      "--max-seeds", "4"], "error: --max-seeds: must be at least --min-seeds (6)"),
    (["progressive", "--seeds", "auto", "--target-ci", "-1"], "error: --target-ci: must be"),
    (["progressive", "--seeds", "auto", "--target-ci", "0.01", "--k", "0", "1"],
     "include it (progressive: k = L in --k)"),
])
def test_seeds_on_demand_flags_are_checked_before_anything_runs(capsys, tmp_path, tiny_bert,
                                                                 argv, message):
    code, out = cli(capsys, "sweep", *argv, "--model", tiny_bert, "--tasks", "rte",
                    "--sizes", "200", "--results", str(tmp_path / "r"), "--dry-run")
    assert code == 2 and message in out, out
    assert not (tmp_path / "r").exists()


def test_seeds_auto_is_refused_by_families_that_pair_no_surgeries(capsys, tmp_path, tiny_bert):
    code, out = cli(capsys, "sweep", "probing", "--seeds", "auto", "--model", tiny_bert,
                    "--tasks", "rte", "--results", str(tmp_path / "r"), "--dry-run")
    assert code == 2 and "the probing family compares no surgeries" in out, out
    assert "progressive" in out  # where it works
    helped = run(COMMAND, "sweep", "localized", "--help")
    assert "--target-ci W" in helped.stdout and "each block reinitialized" in helped.stdout
