"""Packs in a sweep: grouping trials by pack key into packs of a given size,
``--pack-size auto`` (1 on CPUs; on a GPU what fits its free memory, here a mocked number),
and a pack run through ``execute_pack`` reporting each member as its unpacked trial does."""

from __future__ import annotations

import dataclasses
import re

import pytest

from reinit_tune import TrialConfig, families
from reinit_tune.errors import InputError
from reinit_tune.model.shape import ModelShape
from reinit_tune.sweep import packs
from reinit_tune.sweep.packs import group_packs, members_that_fit, pack_id, resolve_pack_size
from reinit_tune.sweep.trial import execute

BERT_BASE = ModelShape(12, 12, 768)
GIB = 2**30


def grid(model: str = "bert-base-uncased") -> list[TrialConfig]:
    base = TrialConfig(model, "rte", train_size=500, epochs=3)
    return [base.replace(seed=s, reinit_layers=tuple(range(k, 12)))
            for s in (0, 1) for k in range(13)]


def test_packs_hold_one_key_each_and_at_most_size_trials():
    configs = grid()  # 2 seeds x 13 surgeries: one key (a BERT's packs mix seeds)
    probe = configs[0].replace(probe_layer=3)
    found = group_packs([*configs, probe], 4)
    assert sorted(len(p) for p in found) == [1, 3, 3, *[4] * 5]  # 26: 7 packs, even sizes
    assert [c for p in found for c in p if c is not probe] == configs  # order kept
    assert [probe] in found  # probing runs alone
    assert any(len({c.seed for c in members}) == 2 for members in found)
    assert sorted(len(p) for p in group_packs(configs, 13)) == [13, 13]
    assert sorted(len(p) for p in group_packs(configs[:14], 13)) == [7, 7]  # not 13 + 1
    # seeds on demand: a pack holds one group's trials of one seed
    by_seed = group_packs(configs, 26, split=lambda c: c.seed)
    assert [len(p) for p in by_seed] == [13, 13]
    assert all(len({c.seed for c in members}) == 1 for members in by_seed)
    # a model whose code is not BERT's packs one seed at a time
    other = [c.replace(model="no/such-model") for c in configs]
    assert all(len({c.seed for c in p}) == 1 for p in group_packs(other, 26))
    assert group_packs(configs, 1) == [[c] for c in configs]
    assert pack_id([configs[0]]) == configs[0].trial_id  # --pack-size 1 names trials as before
    assert pack_id(configs[:3]) != pack_id(configs[1:4])
    with pytest.raises(InputError, match="--pack-size"):
        group_packs(configs, 0)


def test_under_seeds_on_demand_a_pack_holds_one_groups_trials_of_one_seed():
    """Two groups that differ only in a member field (003 App. E's multiplier, as the
    variants family has them) would share packs; closed, one would train on inside the
    other's. Split by (group, seed), each pack is one group's trials of one seed."""
    from reinit_tune.inference.sequential import SeedRule
    from reinit_tune.sweep import seeds

    base = TrialConfig("bert-base-uncased", "rte", train_size=500, epochs=3)
    configs = [base.replace(seed=s, reinit_layers=tuple(range(k, 12)),
                            reinit_lr_multiplier=m)
               for m in (1.0, 5.0) for s in range(4) for k in (0, 6, 12)]
    assert len(group_packs(configs, 100)) == 1  # one pack key: all of them, mixed
    groups = seeds.groups_of(configs, SeedRule(0.02, 3, 4), "variants")
    where = seeds.group_and_seed(groups)
    found = group_packs(configs, 100, split=where)
    assert len(found) == 2 * 4
    for members in found:
        assert len({where(c) for c in members}) == 1 and len(members) == 3


def test_auto_pack_size_is_1_on_cpus_and_fills_the_free_gpu_memory_it_measured():
    configs = grid() * 3  # 78 trials (ids repeat; sizing counts them)
    shapes = {"bert-base-uncased": BERT_BASE}
    assert resolve_pack_size("auto", configs, shapes, gpus_per_trial=0) == 1
    assert resolve_pack_size(3, configs, shapes, gpus_per_trial=0) == 3
    assert configs[0].precision == "fp32"
    each = packs.member_bytes(BERT_BASE, 8, 128, bf16=False)
    assert 1.5 * GIB < each < 3 * GIB  # ~110 M parameters x 16 bytes, plus activations
    # no fixed cap: an H200's free memory holds far more than 16 bert-base members
    h200 = resolve_pack_size("auto", configs, shapes, 1, free_bytes=lambda: 139 * GIB)
    assert h200 == int(139 * GIB * packs.MEMORY_HEADROOM // each) > 16
    h100 = resolve_pack_size("auto", configs, shapes, 1, free_bytes=lambda: 78 * GIB)
    assert 16 < h100 < h200
    half = resolve_pack_size("auto", configs, shapes, 0.5, free_bytes=lambda: 78 * GIB)
    assert half == members_that_fit(39 * GIB, BERT_BASE, 8, 128, bf16=False) < h100
    assert members_that_fit(GIB // 10, BERT_BASE, 8, 128) == 1  # never 0
    # several GPUs: no more per pack than spreads the trials over all of them
    assert resolve_pack_size("auto", configs, shapes, 1, free_bytes=lambda: 139 * GIB,
                             gpus=8) == 10  # ceil(78 / 8)
    bf16 = [c.replace(precision="bf16") for c in configs]
    assert packs.fit_configs(bf16, shapes, 139 * GIB) < h200  # and its bf16 weight copies


def test_auto_pack_size_on_an_autoscaling_cluster_plans_for_the_gpu_its_nodes_name(
        caplog, tmp_path):
    """No GPU node is up when the sweep plans (the autoscaler starts them as trials queue):
    packs are planned for the GPU the node types name (an accelerator_type resource or the
    instance type of ``ray up``'s file: the repository's cluster.yaml names g5 and p4d
    workers, A10G and A100 of 24 and 40 GB), else for the recorded table's GPU, and said
    so, never silently one trial a GPU."""
    import shutil

    from reinit_tune.sweep import cluster, cost
    from tests.helpers import REPO

    configs = grid() * 3
    shapes = {"bert-base-uncased": BERT_BASE}
    with caplog.at_level("WARNING", logger="reinit_tune"):
        a10g = resolve_pack_size("auto", configs, shapes, 1, free_bytes=lambda: None,
                                 gpu_types=lambda: ["A10G"])
    assert a10g == packs.fit_configs(configs, shapes, int(24e9 * 0.97)) > 4
    assert f"packs of up to {a10g} trials planned for a A10G's memory" in caplog.text
    recorded = resolve_pack_size("auto", configs, shapes, 1, free_bytes=lambda: None,
                                 gpu_types=lambda: [])
    assert recorded == packs.fit_configs(configs, shapes, cost.RECORDED_GPU_FREE) > a10g
    assert "NVIDIA H200's memory (no node type names its GPU)" in caplog.text
    # ray up's file: the GPU worker types' instance types, the smaller GPU planned for
    config = tmp_path / "bootstrap.yaml"
    shutil.copy(REPO / "cluster.yaml", config)
    from unittest import mock

    with mock.patch.object(cluster, "autoscaler_node_types", lambda path=None: None):
        names = cluster.scalable_gpu_types(config)
    assert names == ["g5.4xlarge", "p4d.24xlarge"]
    assert packs.planned_free_bytes(names) == (int(24e9 * 0.97),
                                               "a g5.4xlarge's memory, as its node type names it")
    # Ray's own accelerator_type resources win over instance types
    with mock.patch.object(cluster, "autoscaler_node_types", lambda path=None: {
            "gpu": {"CPU": 8.0, "GPU": 1.0, "accelerator_type:H100": 1.0}, "head": None}):
        assert cluster.scalable_gpu_types(config) == ["H100"]


@pytest.mark.usefixtures("one_thread")
def test_execute_pack_reports_each_member_as_its_unpacked_trial(tiny_bert, glue_dir):
    base = TrialConfig(tiny_bert, "rte", train_size=16, seed=2, epochs=2, lr=3e-4,
                       max_seq_length=32)
    configs = [base.replace(reinit_layers=(1, 2, 3)), base.replace(layer_order=(1, 0, 3, 2))]
    seen = []
    got = packs.execute_pack(configs, data_dir=str(glue_dir), use_gpu=False,
                             report=lambda tid, record: seen.append((tid, record.epoch)))
    assert sorted(seen) == sorted((c.trial_id, e) for c in configs for e in (1, 2))
    for config in configs:
        reports, error = got[config.trial_id]
        assert error is None
        want = execute(config, data_dir=str(glue_dir), use_gpu=False)
        assert [r["epoch"] for r in reports] == [1, 2]
        for a, b in zip(reports, want, strict=True):
            assert set(a) == set(b)
            for key in ("train_loss", "eval_loss", "score", "eval_accuracy"):
                assert a[key] == pytest.approx(b[key], abs=1e-5), key
            for key in ("train_examples", "num_layers", "majority_score", "chance_score",
                        "data_fingerprint", "data_source", "data_subset", "device",
                        "precision_used"):
                assert a[key] == b[key], key


@pytest.mark.usefixtures("one_thread")
def test_a_pack_too_big_for_its_gpu_is_split_and_no_member_fails(tiny_bert, glue_dir,
                                                                 monkeypatch, tmp_path):
    """A pack that runs out of GPU memory trains again as two halves; one larger than the
    worker's free memory holds trains as smaller packs from the start. Each split is said
    once, every member ends as its trial alone would, every report names the pack that
    trained it and how it came to be, and the store keeps a member's epochs from one run:
    the halves' (member 0 reported epoch 1 before the split, and again after it)."""
    import torch

    base = TrialConfig(tiny_bert, "rte", train_size=16, seed=2, epochs=2, lr=3e-4,
                       max_seq_length=32)
    configs = [base.replace(reinit_layers=tuple(range(k, 4)), seed=2 + k % 2)
               for k in range(4)]
    real = packs.train_pack
    sizes = []

    def tight(models, members, *args, on_epoch=None, **kwargs):
        sizes.append(len(members))
        if len(members) > 2:  # after member 0 reported its first epoch: a late OOM
            real([next(iter(models))], members[:1], *args, **kwargs,
                 on_epoch=lambda i, result, setup: result.epoch == 1 and on_epoch(0, result,
                                                                                 setup))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(models, members, *args, on_epoch=on_epoch, **kwargs)

    monkeypatch.setattr(packs, "train_pack", tight)
    seen, said, records = [], [], []
    split = "a pack of 4 trials ran out of GPU memory; trained as packs of 2 and 2"

    def report(tid, record):
        seen.append((tid, record.epoch, record.pack_size, record.pack_history))
        records.append(record)

    got = packs.execute_pack(configs, data_dir=str(glue_dir), use_gpu=False, report=report,
                             on_split=said.append)
    assert sizes == [4, 2, 2]
    assert said == [split]
    first = configs[0].trial_id
    assert seen[0] == (first, 1, 4, None)  # the run the split ended
    assert sorted(seen[1:]) == sorted((c.trial_id, e, 2, split) for c in configs
                                      for e in (1, 2))
    assert all(error is None for _, error in got.values())

    # the store's writer keeps member 0's epochs of the halves' run only
    from types import SimpleNamespace

    from reinit_tune import store
    from reinit_tune.sweep.summary import SweepSummary
    from reinit_tune.sweep.writer import StoreWriter

    results = tmp_path / "store"
    writer = StoreWriter(results, {c.trial_id: c for c in configs},
                         SweepSummary("pack", results, total=4), {tiny_bert: 4},
                         packs={"p": [c.trial_id for c in configs]})
    trial = SimpleNamespace(config={"trial": {"trial_id": "p"}}, num_failures=0,
                            error_file=None, checkpoint=None, trial_id="p")
    stale = dataclasses.replace(records[0], epochs=(dataclasses.replace(
        records[0].epochs[0], train_loss=123.0),))
    for record in [stale, *records[1:]]:
        writer.on_trial_result(0, [], trial, {"outcome": record.to_report()})
    writer.on_trial_complete(0, [], trial)
    epochs = store.load_epochs(results)
    mine = epochs[epochs["trial_id"] == first]
    assert sorted(mine["epoch"]) == [1, 2] and 123.0 not in set(mine["train_loss"])
    rows = store.load_trials(results).set_index("trial_id")
    assert set(rows["pack_size"]) == {2} and set(rows["pack_history"]) == {split}

    # larger than the worker's GPU holds: cut before anything trains
    monkeypatch.setattr(packs, "train_pack", real)
    monkeypatch.setattr(packs, "cuda_free_bytes", lambda: 1)
    monkeypatch.setattr(packs, "fit_configs", lambda configs, shapes, free: 3)
    said.clear()
    got = packs.execute_pack(configs, data_dir=str(glue_dir), use_gpu=True,
                             on_split=said.append)
    assert said == ["a pack of 4 trials is more than this GPU's free memory holds (3); "
                    "trained as 2 packs of up to 2"]
    assert all(error is None for _, error in got.values()) and len(got) == 4


@pytest.mark.usefixtures("one_thread")
def test_bench_pack_smoke_compares_a_pack_with_its_trials_apart(capsys, tiny_bert, glue_dir):
    from benchmarks import bench_pack

    assert bench_pack.main(["--smoke", "--model", tiny_bert, "--task", "rte"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"pack of 3 vs 3 unpacked: [\d.]+x the trials/hour", out), out
    worst = float(re.search(r"pack vs apart: ([\d.e+-]+)", out).group(1))
    assert worst < 1e-5


@pytest.mark.ray
def test_the_command_packs_four_trials_into_one_tune_trial_and_resumes_a_member(
        ray_local, tiny_bert, glue_dir, tmp_path, capsys):
    """The command with --pack-size 4 trains one Tune trial of four members, a row and its
    epochs for each (what each member computes against the trial run alone: the mixed pack
    below); a member missing from the store runs again, alone, and the other three are
    skipped."""
    from reinit_tune import store
    from reinit_tune.cli import configs_of, sweep_parser
    from tests.helpers import cli

    args = ["sweep", "progressive", "--model", tiny_bert, "--tasks", "rte", "--sizes", "16",
            "--seeds", "1", "--epochs", "2", "--lr", "3e-4", "--k", "0", "1", "2", "4",
            "--eval", "every-epoch", "--precision", "fp32", "--data-dir", str(glue_dir),
            "--max-failures", "0"]
    results = tmp_path / "pack4"
    code, out = cli(capsys, *args, "--results", str(results), "--pack-size", "4")
    assert code == 0 and "4 trials: 4 ran ok, 0 failed" in out, out[-3000:]
    tune_trials = [p for p in (results / "_tune").glob("*/*") if p.is_dir()]
    assert len(tune_trials) == 1  # one Tune trial for the pack
    packed = store.load_trials(results).set_index("trial_id").sort_index()
    epochs = store.load_epochs(results).set_index(["trial_id", "epoch"]).sort_index()
    family = families.get("progressive")
    parsed = sweep_parser(family).parse_args(args[2:] + ["--results", str(results)])
    configs = {c.trial_id: c for c in configs_of(parsed, family)}
    assert sorted(configs) == list(packed.index) and len(epochs) == 8
    assert set(epochs.index.get_level_values("epoch")) == {1, 2}
    assert (packed["train_examples"] == 16).all() and packed["data_fingerprint"].nunique() == 1
    last = epochs.xs(2, level="epoch")
    assert (packed["score"] == last.loc[packed.index, "eval_accuracy"]).all()

    # resume: a member missing from the store runs again, alone; stored members are skipped
    missing = packed.index[1]
    for table in ("trials", "epochs"):
        (results / table / f"{missing}.parquet").unlink()
    code, out = cli(capsys, *args, "--results", str(results), "--pack-size", "4")
    assert code == 0 and "1 ran ok, 0 failed, 3 already in the store" in out, out[-3000:]
    again = store.load_trials(results).set_index("trial_id")
    assert again.loc[missing, "train_loss"] == pytest.approx(packed.loc[missing, "train_loss"],
                                                             abs=1e-5)
    import ray._private.state

    # the dashboard's Actors page names trial workers by class: ours, not Tune's ImplicitFunc
    classes = {a["ActorClassName"] for a in ray._private.state.actors().values()}
    assert "ReinitTunePack" in classes and "ImplicitFunc" not in classes, classes


def test_sweep_help_says_which_trials_run_unpacked_and_that_gpus_are_auto():
    from reinit_tune import families
    from reinit_tune.cli import sweep_parser

    text = " ".join(sweep_parser(families.get("progressive")).format_help().lower().split())
    assert "--pack-size" in text and "probing and sequential trials run unpacked" in text
    assert "'auto' (the default) gives each pack 1 gpu where the cluster" in text


def test_gpus_default_to_auto_which_is_cpus_on_a_machine_without_any(capsys, no_ray,
                                                                   monkeypatch):
    import torch

    from tests.helpers import cli

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, out = cli(capsys, "sweep", "progressive", "--dry-run", "--sizes", "500")
    assert code == 0 and "CPU trials: no GPU in " in out, out  # this machine, or a test's Ray
    assert "device-hours for 1950 trials, one after another on 1 CPU core" in out
    with pytest.raises(SystemExit) as bad:
        cli(capsys, "sweep", "progressive", "--dry-run", "--gpus-per-trial", "many")
    err = capsys.readouterr().err
    assert bad.value.code == 2 and "--gpus-per-trial: give a number of GPUs (0: CPUs) or " \
        "'auto', got 'many'" in err, err


@pytest.mark.ray
def test_a_pack_of_mixed_surgeries_stores_what_its_trials_apart_do(ray_local, tiny_bert,
                                                                  glue_dir, tmp_path):
    """One seed's trials of four kinds (a progressive reinit, a permutation, a head reinit and
    an LR-multiplier variant), dropout on, fp32, through the real runner and store: a pack of
    four stores per epoch what each trial run alone in this process gives."""
    from reinit_tune import store
    from reinit_tune.sweep.options import RunOptions
    from reinit_tune.sweep.runner import run_sweep

    base = TrialConfig(tiny_bert, "rte", train_size=16, seed=1, epochs=2, lr=3e-4,
                       max_seq_length=32, experiment="mixed")
    configs = [base.replace(reinit_layers=(2, 3)), base.replace(layer_order=(1, 0, 3, 2)),
               base.replace(reinit_heads=((1, 0),)),
               base.replace(reinit_layers=(3,), reinit_lr_multiplier=5.0)]
    results = tmp_path / "pack4"
    summary = run_sweep(configs, RunOptions(results_dir=results, data_dir=str(glue_dir),
                                            max_failures=0, pack_size=4,
                                            evaluate="every-epoch"))
    assert (summary.ok, summary.failed) == (4, 0)
    tune_trials = [p for p in (results / "_tune").glob("*/*") if p.is_dir()]
    assert len(tune_trials) == 1  # really packed
    import time

    import ray._private.state

    # the sweep's progress board ended with it (Ray lives on in this process)
    def boards() -> list:
        return [a for a in ray._private.state.actors().values()
                if a["ActorClassName"] == "Beats" and a["State"] == "ALIVE"]

    deadline = time.monotonic() + 20  # ray.kill is asynchronous
    while boards() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not boards()
    packed = store.load_epochs(results).set_index(["trial_id", "epoch"]).sort_index()
    rows = store.load_trials(results).set_index("trial_id")
    assert len(packed) == 8
    worst = 0.0
    for config in configs:
        alone = execute(config, data_dir=str(glue_dir), use_gpu=False, every_epoch=True)
        for report in alone:
            row = packed.loc[(config.trial_id, report["epoch"])]
            for column in ("train_loss", "eval_loss", "eval_accuracy"):
                assert abs(row[column] - report[column]) < 1e-5, column
                worst = max(worst, abs(row[column] - report[column]))
        assert abs(rows.loc[config.trial_id, "score"] - alone[-1]["score"]) < 1e-5
        assert rows.loc[config.trial_id, "train_examples"] == alone[-1]["train_examples"]
        assert rows.loc[config.trial_id, "data_fingerprint"] == alone[-1]["data_fingerprint"]
    print(f"largest per-epoch difference, a pack of 4 vs each trial alone: {worst:.2e}")


def test_a_failed_pack_keeps_each_members_own_outcome(tmp_path):
    """Tune's error for a pack whose every attempt failed is written only for the members
    that have no outcome of their own: a member another driver holds is left to it (writing
    an error row would replace that driver's ok row) and a member that diverged keeps its
    divergence message."""
    from types import SimpleNamespace

    from reinit_tune import store
    from reinit_tune.outcome import Status, TrialOutcome
    from reinit_tune.sweep.summary import SweepSummary
    from reinit_tune.sweep.writer import StoreWriter

    base = TrialConfig("tiny", "rte", train_size=16, epochs=1)
    held, diverged, plain = (base.replace(reinit_layers=(k,)) for k in (0, 1, 2))
    configs = {c.trial_id: c for c in (held, diverged, plain)}
    summary = SweepSummary("pack", tmp_path, total=3)
    writer = StoreWriter(tmp_path, configs, summary, {"tiny": 4},
                         packs={"p": list(configs)})
    trial = SimpleNamespace(config={"trial": {"trial_id": "p"}}, num_failures=2,
                            error_file=None, checkpoint=None)
    writer.on_trial_result(0, [], trial, TrialOutcome(
        held.trial_id, Status.SKIPPED, error="being trained by another driver").tune_metrics())
    writer.on_trial_result(0, [], trial, TrialOutcome(
        diverged.trial_id, Status.DIVERGED,
        error="diverged: the training loss is nan").tune_metrics())
    writer.on_trial_error(0, [], trial)
    rows = store.load_trials(tmp_path).set_index("trial_id")
    assert set(rows.index) == {diverged.trial_id, plain.trial_id}  # nothing for the held one
    assert rows.loc[diverged.trial_id, "error"] == "diverged: the training loss is nan"
    assert rows.loc[plain.trial_id, "error"] == "trial failed (no error file)"
    assert summary.elsewhere == {"being trained by another driver": 1}
    assert summary.failed == 2 and summary.not_finished == 0


def test_the_plan_line_says_what_runs_on_what_and_how_many_at_once():
    from reinit_tune.sweep.launch import devices_line

    one = {f"t{i}": [TrialConfig("m", "sst2", seed=i)] for i in range(12)}
    assert devices_line(0, 0, one, slots=2) == (
        "CPU trials: one trial per Tune trial, up to 2 at a time")
    packed = {"p0": [TrialConfig("m", "sst2", seed=i) for i in range(6)],
              "p1": [TrialConfig("m", "sst2", seed=6)]}
    assert devices_line(1, 8, packed, slots=8) == (
        "GPU trials: 1 GPU per Tune trial, packs of up to 6 trials (2 Tune trials), 8 GPUs, "
        "up to 8 at a time")
    # an autoscaling cluster with no GPU node up yet: no count to give
    assert devices_line(1, 0, packed, slots=0).endswith("GPUs the autoscaler starts")


def test_a_closed_writer_stores_nothing_more_and_waits_for_a_write_under_way(tmp_path,
                                                                            monkeypatch):
    """The lost head prints the summary from another thread: a row being written then is
    counted before the summary is read, and a trial that ends later is neither stored nor
    counted (the same command trains it again)."""
    import threading
    from types import SimpleNamespace

    from reinit_tune import store
    from reinit_tune.sweep import writer as writer_module
    from reinit_tune.sweep.summary import SweepSummary
    from reinit_tune.sweep.writer import StoreWriter

    first, later = (TrialConfig("tiny", "rte", train_size=16, seed=s) for s in (1, 2))
    summary = SweepSummary("closing", tmp_path, total=2)
    writer = StoreWriter(tmp_path, {c.trial_id: c for c in (first, later)}, summary,
                         {"tiny": 4})
    written, go = threading.Event(), threading.Event()
    real_write = store.write_trial

    def slow_write(*args, **kwargs):
        real_write(*args, **kwargs)
        written.set()
        go.wait(10)

    monkeypatch.setattr(writer_module.store, "write_trial", slow_write)

    def trial(config):
        return SimpleNamespace(config={"trial": {"trial_id": config.trial_id}},
                               num_failures=1, error_file=None, checkpoint=None)

    ending = threading.Thread(target=writer.on_trial_error, args=(0, [], trial(first)))
    ending.start()
    assert written.wait(10)
    closing = threading.Thread(target=writer.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive()  # the row is in the store, its count not yet: close waits
    go.set()
    ending.join(10)
    closing.join(10)
    assert summary.failed == 1 == len(store.load_trials(tmp_path))
    writer.on_trial_error(0, [], trial(later))
    assert summary.failed == 1 == len(store.load_trials(tmp_path))
    assert summary.not_finished == 1
    import pickle  # Tune pickles its callbacks with the experiment state

    restored = pickle.loads(pickle.dumps(writer))
    assert restored.summary.failed == 1 and restored._lock.acquire(timeout=1)


def test_a_store_deleted_or_moved_mid_sweep_stops_it_instead_of_starting_another(tmp_path):
    """The results folder moved away after the first trial was stored: the next trial's
    row is not written into a new folder at the old path (the store split in two); the
    sweep halts saying so and where to rerun, and the moved store keeps its row."""
    from types import SimpleNamespace

    from reinit_tune import store
    from reinit_tune.outcome import Status, TrialOutcome
    from reinit_tune.sweep.summary import SweepSummary
    from reinit_tune.sweep.writer import StoreWriter

    results = tmp_path / "results"
    results.mkdir()
    first, second = (TrialConfig("tiny", "rte", train_size=16, epochs=1, seed=s)
                     for s in (0, 1))
    configs = {c.trial_id: c for c in (first, second)}
    summary = SweepSummary("moved", results, total=2)
    writer = StoreWriter(results, configs, summary, {"tiny": 4})

    def fail(config):  # a trial that failed on its worker: stored as an error row
        trial = SimpleNamespace(config={"trial": {"trial_id": config.trial_id}},
                                num_failures=1, error_file=None, checkpoint=None)
        writer.on_trial_result(0, [], trial, TrialOutcome(
            config.trial_id, Status.FAILED, error="boom").tune_metrics())
        writer.on_trial_error(0, [], trial)

    fail(first)
    assert len(store.load_trials(results)) == 1 and writer.halt is None
    results.rename(tmp_path / "elsewhere")
    fail(second)
    assert not results.exists()  # no second store started at the old path
    assert writer.halt.startswith(f"the results store {results} was deleted or moved")
    assert "rerun the same command" in writer.halt
    assert list(store.load_trials(tmp_path / "elsewhere")["trial_id"]) == [first.trial_id]
