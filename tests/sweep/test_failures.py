"""Failures inside a running sweep, through Ray Tune: a trial that diverges is stored as an
error and reruns (alone, or as a member of a pack); trials failing alike stop the sweep after
two (no retries); a store that cannot be written stops the sweep with one message and trains
nothing more."""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

import pytest

from reinit_tune import families, store
from reinit_tune.families import Grid
from reinit_tune.sweep import launch
from reinit_tune.sweep.options import RunOptions
from reinit_tune.sweep.plan import make_plan
from reinit_tune.sweep.runner import run_sweep
from tests.helpers import diverging_stsb

pytestmark = pytest.mark.ray


def grid(model: str, task: str, data_dir: str, ks=(0, 4), seeds=1, lr=1e-4) -> list:
    return families.get("progressive").configs(
        Grid(model, tasks=(task,), sizes=(16,), seeds=seeds, epochs=2, lr=lr,
             max_seq_length=32, data_dir=data_dir), k=list(ks))


def test_a_diverged_trial_is_stored_as_an_error_and_reruns_alone_or_in_a_pack(
        ray_local, tiny_bert, glue_dir, tmp_path):
    folder = diverging_stsb(glue_dir, tmp_path / "glue")
    configs = grid(tiny_bert, "stsb", str(folder))
    options = RunOptions(results_dir=tmp_path / "results", data_dir=str(folder),
                         max_failures=2)

    summary = run_sweep(configs, options)
    assert (summary.ok, summary.failed, summary.retries) == (0, 2, 0)
    assert summary.stopped is None  # divergence is not a reason to stop the others
    trials = store.load_trials(tmp_path / "results")
    assert set(trials["status"]) == {"error"}
    assert trials["error"].str.startswith("diverged: the training loss of epoch 1 is").all()
    assert (trials["attempts"] == 1).all()
    assert store.load_epochs(tmp_path / "results").empty  # no non-finite number stored
    assert "diverged" in str(summary)

    # an error is not a result: it runs again, here the two as one pack, whose diverged
    # members are stored as errors each
    again = run_sweep(configs, dataclasses.replace(options, max_failures=0, pack_size=2))
    assert (again.skipped, again.ok, again.failed, again.stopped) == (0, 0, 2, None)
    trials = store.load_trials(tmp_path / "results")
    assert set(trials["trial_id"]) == {c.trial_id for c in configs}
    assert trials["error"].str.startswith("diverged: the training loss of epoch 1 is").all()
    runs = [[d for d in e.iterdir() if d.is_dir()]
            for e in (tmp_path / "results" / "_tune").iterdir() if e.is_dir()]
    assert sorted(map(len, runs)) == [1, 2]  # two Tune trials, then one: the pack


def test_trials_failing_alike_stop_the_sweep_without_retries(ray_local, tiny_bert, glue_dir,
                                                              tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_bert, model)
    configs = grid(str(model), "rte", str(glue_dir), ks=(0, 1, 2, 3, 4), seeds=2)
    plan = make_plan(configs, RunOptions(results_dir=tmp_path / "results",
                                         data_dir=str(glue_dir), max_failures=2))
    # The weights break after pre-flight passed them (a sync job overwrote the folder):
    # every trial fails the same way, so retrying or running the rest is pointless.
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    start = time.perf_counter()
    summary = launch.launch(plan)
    seconds = time.perf_counter() - start
    assert summary.retries == 0 and summary.ok == 0
    assert 2 <= summary.failed < len(configs) and summary.not_finished > 0
    assert summary.stopped and "failed, 2 of them with the same error" in summary.stopped
    trials = store.load_trials(tmp_path / "results")
    assert set(trials["status"]) == {"error"} and (trials["attempts"] == 1).all()
    assert trials["error"].nunique() == 1
    assert "failed (2 trials)" in str(summary) or "failed (3 trials)" in str(summary)
    print(trials["error"].iloc[0])
    print(f"fail fast: {summary.failed} of {len(configs)} trials ran, {seconds:.1f} s")


def test_a_store_that_cannot_be_written_stops_the_sweep(ray_local, tiny_bert, glue_dir,
                                                         tmp_path, monkeypatch):
    configs = grid(tiny_bert, "rte", str(glue_dir), ks=(0, 1, 2, 3, 4), seeds=2)
    written = []

    def full_disk(results_dir, row, epochs):
        written.append(row["trial_id"])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "write_trial", full_disk)  # the driver writes the store
    summary = run_sweep(configs, RunOptions(results_dir=tmp_path / "results",
                                            data_dir=str(glue_dir), max_failures=2))
    assert summary.stopped and "No space left on device" in summary.stopped
    assert "cannot write to the results store" in str(summary)
    assert summary.retries == 0 and summary.ok == 0 and summary.failed == 0
    assert len(written) < len(configs)  # stopped instead of training everything
    assert not Path(tmp_path / "results" / "trials").exists() or not any(
        (tmp_path / "results" / "trials").glob("*.parquet"))


def test_a_halted_chunk_starts_no_further_chunk(ray_local, tiny_bert, glue_dir, tmp_path,
                                                monkeypatch):
    """A large sweep runs as several ``Tuner.fit`` calls (``launch.chunk_size``); a halt in
    one of them ends the sweep, it does not go on with the next chunk."""
    monkeypatch.setattr(launch, "chunk_size", lambda *resources: 2)
    model = tmp_path / "model"
    shutil.copytree(tiny_bert, model)
    configs = grid(str(model), "rte", str(glue_dir), ks=(0, 1, 2, 3, 4), seeds=2)
    plan = make_plan(configs, RunOptions(results_dir=tmp_path / "results",
                                         data_dir=str(glue_dir), max_failures=2))
    (model / "model.safetensors").write_bytes(b"\0" * 64)  # every trial fails alike
    summary = launch.launch(plan)
    assert (summary.failed, summary.not_finished) == (2, len(configs) - 2)
    assert summary.stopped and "failed, 2 of them with the same error" in summary.stopped
    runs = [p for p in (tmp_path / "results" / "_tune").iterdir() if p.is_dir()]
    assert len(runs) == 1  # one Tune run folder: the first chunk's
