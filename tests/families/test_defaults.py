"""One source of defaults: a preset's configs built in Python with a default ``Grid`` are the
trials the command runs (same ids), for every registered family."""

from __future__ import annotations

from pathlib import Path

import pytest

from reinit_tune import EMBEDDED_MODEL, families
from reinit_tune.cli import configs_of, run_options, sweep_parser
from reinit_tune.families import Grid
from reinit_tune.hardware import resolve_precision
from tests.helpers import SHARED_DATA, cli, missing

NAMES = [f.name for f in families.all_families()]


@pytest.fixture(scope="module")
def data_dir() -> str:
    if not (SHARED_DATA / "glue" / "sst2" / "train.parquet").is_file():
        missing("shared data not found")
    return str(SHARED_DATA)


@pytest.mark.parametrize("name", NAMES)
def test_the_python_api_and_the_command_build_the_same_trials(name, data_dir):
    family = families.get(name)
    api = family.configs(Grid(model=EMBEDDED_MODEL, data_dir=data_dir, seeds=1))
    args = sweep_parser(family).parse_args(["--model", EMBEDDED_MODEL, "--data-dir", data_dir,
                                            "--seeds", "1"])
    command = configs_of(args, family)
    assert [c.trial_id for c in api] == [c.trial_id for c in command]
    assert {c.precision for c in api} == {resolve_precision("auto", on_gpu=False)[0]}
    assert {c.length_grouped for c in api} == {True}
    # and the run options: the family's own defaults (evaluation policy, similarity, ...)
    options = family.run_options(results_dir=Path(args.results), data_dir=data_dir)
    assert run_options(args) == options
    assert options.evaluate == family.run.evaluate


def test_gpu_trials_resolve_auto_precision_for_the_gpu(data_dir):
    family = families.get("progressive")
    grid = Grid(model=EMBEDDED_MODEL, data_dir=data_dir, seeds=1, tasks=("rte",), sizes=(16,),
                on_gpu=True)
    args = sweep_parser(family).parse_args(["--model", EMBEDDED_MODEL, "--data-dir", data_dir,
                                            "--seeds", "1", "--tasks", "rte", "--sizes", "16",
                                            "--gpus-per-trial", "1"])
    api, command = family.configs(grid), configs_of(args, family)
    assert [c.trial_id for c in api] == [c.trial_id for c in command]
    assert {c.precision for c in api} == {resolve_precision("auto", on_gpu=True)[0]}


def test_the_command_plans_exactly_those_trials(data_dir, capsys, monkeypatch, no_ray,
                                                tmp_path):
    from reinit_tune.sweep import plan

    planned = []
    real = plan.make_plan
    monkeypatch.setattr(plan, "make_plan", lambda configs, *a, **k: (
        planned.extend(configs), real(configs, *a, **k))[1])
    code, out = cli(capsys, "sweep", "progressive", "--model", EMBEDDED_MODEL, "--tasks", "rte",
                    "--sizes", "16", "--seeds", "2", "--data-dir", data_dir, "--results",
                    str(tmp_path), "--dry-run")
    assert code == 0, out
    api = families.get("progressive").configs(Grid(EMBEDDED_MODEL, tasks=("rte",), sizes=(16,),
                                                   seeds=2, data_dir=data_dir))
    assert [c.trial_id for c in planned] == [c.trial_id for c in api]
