"""One trial, one trainer: claims of trials in the store (create, renew, expire, take over,
races between processes) and two real drivers on one store splitting a grid."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from ray.tune import Callback

from reinit_tune import store
from reinit_tune.config import TrialConfig
from reinit_tune.sweep import claims
from reinit_tune.sweep.claims import Context, Owner
from tests.helpers import kill_all, start_sweep


def foreign(host: str = "elsewhere", pid: int = 4242) -> Owner:
    return Owner(host, pid, os.urandom(8).hex())


def context(results: Path, owner: Owner | None = None, lease_s: float = 60.0) -> Context:
    ctx = Context(str(results), owner or Owner.this_process(), lease_s)
    ctx.folder.mkdir(parents=True, exist_ok=True)
    return ctx


def age(ctx: Context, trial_id: str, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(ctx.folder / f"{trial_id}.json", (then, then))


def test_a_claim_is_exclusive_reentrant_and_released_by_its_owner_only(tmp_path):
    mine, other = context(tmp_path), context(tmp_path, foreign())
    assert claims.claim(mine, "t1") is None
    assert claims.claim(mine, "t1") is None  # a retried trial of the same driver
    assert claims.claim(other, "t1") == mine.owner
    assert claims.held(mine) == ["t1"] and claims.held(other) == []
    claims.release(other, "t1")  # not its claim: stays
    assert claims.claim(other, "t1") == mine.owner
    claims.release(mine, "t1")
    assert claims.claim(other, "t1") is None
    assert claims.held(other) == ["t1"]
    content = json.loads((tmp_path / claims.CLAIMS / "t1.json").read_text())
    assert content["owner"]["token"] == other.owner.token and content["trial_id"] == "t1"


def test_an_expired_claim_is_taken_over_and_a_renewed_one_is_not(tmp_path):
    dead, taker = context(tmp_path, foreign(), lease_s=10), context(tmp_path, lease_s=10)
    assert claims.claim(dead, "t1") is None and claims.claim(dead, "t2") is None
    age(dead, "t1", 30)
    age(dead, "t2", 30)
    assert claims.renew(dead) == 2  # t2's driver is alive after all: its lease starts again
    age(dead, "t1", 30)
    assert claims.claim(taker, "t1") is None
    assert claims.claim(taker, "t2") == dead.owner
    assert claims.held(taker) == ["t1"] and claims.held(dead) == ["t2"]
    claims.release_all(dead)  # the old owner coming back cannot remove the new claim
    assert claims.held(taker) == ["t1"]
    assert not list((tmp_path / claims.CLAIMS).glob("t2*"))


def test_a_claim_left_empty_is_taken_over_once_it_cannot_be_being_written(tmp_path, monkeypatch):
    ctx = context(tmp_path)
    (ctx.folder / "t1.json").write_bytes(b"")  # its creator died, or its disk was full
    age(ctx, "t1", claims.UNWRITTEN_S + 1)
    assert claims.claim(ctx, "t1") is None and claims.held(ctx) == ["t1"]

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(claims.json, "dump", full)
    with pytest.raises(OSError, match="No space left"):
        claims.claim(ctx, "t2")
    assert not (ctx.folder / "t2.json").exists()  # nothing holds t2 for the next run


def test_a_claim_of_a_driver_gone_from_this_machine_is_taken_over_at_once(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    this = Owner.this_process()
    dead = Owner(this.host, gone.pid, "deadbeef", this.pidns, "1")
    elsewhere = foreign()  # another machine: only its lease can tell
    assert claims.claim(context(tmp_path, dead), "t1") is None
    assert claims.claim(context(tmp_path, elsewhere), "t2") is None
    ctx = context(tmp_path)
    assert claims.claim(ctx, "t1") is None
    assert claims.claim(ctx, "t2") == elsewhere


def test_a_half_written_claim_of_a_dead_driver_expires(tmp_path):
    ctx = context(tmp_path, lease_s=5)
    (ctx.folder / "t1.json").touch()  # its creator died between create and write
    age(ctx, "t1", 10)
    assert claims.claim(ctx, "t1") is None


def _race(results: str, trial_ids: list[str], barrier, wins) -> None:
    ctx = Context(results, Owner.this_process(), 5.0)
    for trial_id in trial_ids:
        barrier.wait()
        if claims.claim(ctx, trial_id) is None:
            wins.put((trial_id, ctx.owner.token))
    barrier.wait()  # alive until all are done: a claim of an ended process is free again


@pytest.mark.parametrize("stale", [True, False], ids=["stale-claims", "free-trials"])
def test_racing_processes_exactly_one_wins_each_trial(tmp_path, stale):
    rounds, racers = 30, 6
    trial_ids = [f"t{i}" for i in range(rounds)]
    if stale:  # each held by a driver whose lease ran out long ago
        dead = context(tmp_path, foreign(), lease_s=5)
        for trial_id in trial_ids:
            claims.claim(dead, trial_id)
            age(dead, trial_id, 60)
    else:
        (tmp_path / claims.CLAIMS).mkdir()
    mp = multiprocessing.get_context("fork")
    barrier, wins = mp.Barrier(racers), mp.Queue()
    procs = [mp.Process(target=_race, args=(str(tmp_path), trial_ids, barrier, wins))
             for _ in range(racers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    won = []
    while not wins.empty():
        won.append(wins.get())
    assert sorted(t for t, _ in won) == sorted(trial_ids)  # one winner per trial
    for trial_id, token in won:  # and the claim on disk is the winner's
        content = json.loads((tmp_path / claims.CLAIMS / f"{trial_id}.json").read_text())
        assert content["owner"]["token"] == token


def test_a_trial_stored_after_the_driver_planned_is_not_trained(tmp_path, tiny_bert):
    config = TrialConfig(model=tiny_bert, task="rte", seed=5)
    planned_before = context(tmp_path)
    reports = [dict(epoch=1, train_loss=0.5, eval_loss=0.6, score=0.7, eval_accuracy=0.7,
                    train_time_s=1.0, eval_time_s=1.0, train_examples=8, setup_time_s=0.1)]
    time.sleep(0.01)
    store.write_trial(tmp_path, store.trial_row(config, reports, num_layers=4, status="ok"),
                      store.epoch_rows(config, reports))
    assert claims.begin(planned_before, config.trial_id) == "stored by another driver"
    assert claims.held(planned_before) == []  # the claim taken to look is given back
    planned_after = context(tmp_path)  # saw the row when it planned, and still runs it
    assert claims.begin(planned_after, config.trial_id) is None
    assert claims.begin(None, "anything") is None
    assert claims.begin(Context(str(tmp_path / "not-shared")), "t") is None


def test_the_stored_check_reads_only_compacted_files_made_since_planning(tmp_path, tiny_bert):
    """Another driver's row is found once compacted too; a compacted file made before this
    driver planned is not searched (it cannot hold a later row, and searching every
    compacted file at every trial start costs a scan of the store)."""
    reports = [dict(epoch=1, train_loss=0.5, eval_loss=0.6, score=0.7, eval_accuracy=0.7,
                    train_time_s=1.0, eval_time_s=1.0, train_examples=8, setup_time_s=0.1)]
    old, new = (TrialConfig(model=tiny_bert, task="rte", seed=s) for s in (1, 2))
    store.write_trial(tmp_path, store.trial_row(old, reports, num_layers=4, status="ok"), [])
    store.compact(tmp_path, min_files=1)
    [made] = (tmp_path / "trials").glob(f"{store.COMPACTED_PREFIX}*")
    hour_ago = time.time_ns() - 3600 * 10**9
    made.rename(made.with_name(f"{store.COMPACTED_PREFIX}{hour_ago:020d}-0000.parquet"))
    planned = context(tmp_path)
    time.sleep(0.01)
    store.write_trial(tmp_path, store.trial_row(new, reports, num_layers=4, status="ok"), [])
    store.compact(tmp_path, min_files=1)
    assert store.small_file_count(tmp_path) == 0
    assert claims.begin(planned, new.trial_id) == "stored by another driver"
    assert store.stored_rows(tmp_path, old.trial_id)  # there, and found without the filter
    assert store.stored_rows(tmp_path, old.trial_id, written_after=planned.since) == []


# -- real sweeps --------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.ray
def test_two_drivers_started_at_once_train_each_trial_once(tiny_bert, glue_dir, tmp_path):
    results = tmp_path / "results"
    args = ["--model", tiny_bert, "--tasks", "rte", "--sizes", "16", "--seeds", "3",
            "--epochs", "1", "--k", "0", "4", "--lr", "1e-4", "--results", str(results),
            "--cpus-per-trial", "1"]
    started: list[subprocess.Popen] = []
    temps = [Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp")) for _ in range(2)]
    try:
        drivers = []
        for temp in temps:  # each its own local Ray instance
            env = {**os.environ, "REINIT_TUNE_DATA": str(glue_dir), "RAY_TMPDIR": str(temp),
                   "RAY_AUTH_MODE": "disabled"}
            env.pop("RAY_ADDRESS", None)
            drivers.append(start_sweep(args, env, started))
        outputs = [d.communicate(timeout=300)[0] for d in drivers]
    finally:
        kill_all(started)
        for temp in temps:
            subprocess.run(["rm", "-rf", str(temp)], check=False)
    for driver, out in zip(drivers, outputs, strict=True):
        assert driver.returncode == 0, out[-3000:]
    ran = [int(re.search(r"(\d+) ran ok", out).group(1)) for out in outputs]
    grid = 6
    assert sum(ran) == grid, outputs  # each trial trained by one driver
    trials = store.load_trials(results)
    assert len(trials) == grid and set(trials["status"]) == {"ok"}
    assert not list((results / claims.CLAIMS).glob("*.json"))  # all released
    assert len([p for p in (results / "_tune").iterdir() if p.is_dir()]) == 2


class TuneTrials(Callback):
    def __init__(self):
        self.started = 0

    def on_trial_start(self, iteration, trials, trial, **info):
        self.started += 1


@pytest.mark.ray
@pytest.mark.parametrize("pack_size", [1, 3])
def test_a_live_drivers_claim_is_left_and_a_dead_ones_taken_over(
        ray_local, tiny_bert, glue_dir, tmp_path, monkeypatch, pack_size):
    from reinit_tune.sweep.options import RunOptions
    from reinit_tune.sweep.runner import run_sweep

    monkeypatch.setenv(claims.LEASE_ENV, "30")
    # one pack_key: with pack_size 3 they train as one pack, less the member held elsewhere
    configs = [TrialConfig(model=tiny_bert, task="rte", train_size=16, seed=1, epochs=1,
                           reinit_layers=layers) for layers in ((), (3,), (2, 3))]
    live, dead = context(tmp_path, foreign("node-a", 11)), context(tmp_path, foreign("b", 12))
    assert claims.claim(live, configs[0].trial_id) is None
    assert claims.claim(dead, configs[1].trial_id) is None
    age(dead, configs[1].trial_id, 120)
    tune_trials = TuneTrials()
    summary = run_sweep(configs, RunOptions(results_dir=tmp_path, data_dir=str(glue_dir),
                                            pack_size=pack_size, callbacks=(tune_trials,)))
    assert tune_trials.started == (1 if pack_size == 3 else 3)
    assert (summary.ok, summary.failed, summary.not_finished) == (2, 0, 0)
    assert summary.elsewhere == {"being trained by another driver (node-a pid 11)": 1}
    assert "1 trial being trained by another driver (node-a pid 11)" in str(summary)
    assert "after the other driver finishes" in str(summary)
    assert set(store.load_trials(tmp_path)["trial_id"]) == {c.trial_id for c in configs[1:]}
    assert claims.held(live) == [configs[0].trial_id] and claims.held(dead) == []
