"""The benchmark scripts run end to end in their smoke mode (tiny model, few examples), so
their code paths, GPU packing included, stay working on CI's CPUs. Speed targets themselves
are measured on demand (benchmarks/RESULTS.md), never asserted here."""

from __future__ import annotations

import re

import pytest

from benchmarks import bench_gpu, bench_levers, bench_sweep, bench_trial, calibrate_cost


def table_rows(output: str, first: str) -> list[list[str]]:
    return [ln.split() for ln in output.splitlines() if ln.strip().startswith(first)]


def test_bench_trial_smoke_runs_all_three_ways(capsys, tiny_bert, glue_dir):
    bench = bench_trial
    assert bench.main(["--smoke", "--model", tiny_bert, "--task", "rte", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    for way in "abc":
        assert re.search(rf"repeat 0 seed 0 \({way}\): +[\d.]+ train ex/s", out), out
    assert re.search(r"\(c\)/\(a\) = [\d.]+x", out) and re.search(r"\(c\)/\(b\) = [\d.]+x", out)
    (seed_row,) = [r for r in table_rows(out, "0 ") if len(r) == 4]
    assert all(0 <= float(v) <= 1 for v in seed_row[1:])  # a dev accuracy per way


@pytest.mark.ray
def test_bench_sweep_smoke_reports_overhead(capsys, ray_local, tiny_bert, glue_dir):
    bench = bench_sweep
    assert bench.main(["--smoke", "--model", tiny_bert, "--task", "rte"]) == 0
    out = capsys.readouterr().out
    (row,) = table_rows(out, "16 ")
    size, trials, at_once = (int(v) for v in row[:3])
    assert (size, trials, at_once) == (16, 3, 2)
    overhead, per_trial = float(row[-2]), float(row[-1])
    assert 0 < overhead < 1 and 0 < per_trial < 1  # fractions of the slot / trial time
    assert float(row[6]) > 0 and float(row[7]) > 0  # setup on a fresh and on a reused worker


@pytest.mark.ray
def test_bench_gpu_without_ray_runs_trials_as_processes(capsys, tiny_bert, glue_dir):
    assert bench_gpu.main(["--smoke", "--models", tiny_bert, "--task", "rte", "--precision",
                           "fp32", "--launcher", "processes"]) == 0
    out = capsys.readouterr().out
    packs = [r for r in table_rows(out, tiny_bert) if len(r) == 7]
    assert [(int(r[2]), int(r[3]), r[4]) for r in packs] == [(1, 1, "processes"),
                                                            (2, 2, "processes")]
    assert all(float(r[-1]) > 0 for r in packs)


def test_bench_gpu_smoke_runs_packing_and_mfu_on_cpu(capsys, ray_local, tiny_bert, glue_dir):
    bench = bench_gpu
    assert bench.main(["--smoke", "--models", tiny_bert, "--task", "rte", "--precision",
                       "fp32"]) == 0
    out = capsys.readouterr().out
    packs = [r for r in table_rows(out, tiny_bert) if len(r) == 7]
    assert [int(r[2]) for r in packs] == [1, 2] and all(float(r[-1]) > 0 for r in packs)
    assert {r[4] for r in packs} == {"ray"}
    (mfu,) = table_rows(out, "cpu ")
    assert mfu[-1] == "n/a" and float(mfu[5]) > 0  # no CPU peak known: TFLOP/s, no MFU


def test_calibrate_cost_prints_table_entries(capsys, glue_dir):
    script = calibrate_cost
    assert script.main(["--tokens", "--tasks", "rte", "--shapes", "2x32",
                        "--precisions", "fp32", "--cpu"]) == 0
    out = capsys.readouterr().out
    assert re.search(r'"rte": TaskTokens\([\d.]+, [\d.]+, [\d.]+\),', out)
    assert re.search(r'\(2, 32, "fp32"\): Coefficients\(', out)


def test_bench_levers_smoke_turns_levers_off_one_at_a_time(capsys, tiny_bert, glue_dir):
    bench = bench_levers
    assert bench.main(["--smoke", "--model", tiny_bert, "--task", "rte", "--threads", "1",
                       "--levers", "none", "vocab_rows", "fused"]) == 0
    out = capsys.readouterr().out
    base = table_rows(out, "all levers on")
    off = {r[1]: r for r in table_rows(out, "without")}
    assert len(base) == 1 and set(off) == {"vocab_rows", "fused"}
    assert float(base[0][-1]) == 1.0  # the speed-up column is relative to all levers on
    assert all(float(r[-2]) > 0 for r in off.values())


def test_bench_eval_smoke_compares_the_two_evaluation_policies(capsys, tiny_bert, glue_dir):
    from benchmarks import bench_eval

    assert bench_eval.main(["--smoke", "--model", tiny_bert, "--task", "rte"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"final-only evaluation makes this trial -?[\d.]+% cheaper", out), out
    match = re.search(r"003 progressive grid \(2145 trials.*: ([\d,.]+) device-hours "
                      r"evaluating every epoch, ([\d,.]+) final only", out)
    assert match and float(match.group(2).replace(",", "")) < float(
        match.group(1).replace(",", ""))


def test_bench_store_smoke_reads_writes_and_compacts_a_synthetic_store(capsys):
    from benchmarks import bench_store

    assert bench_store.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    rows = {(r[1], " ".join(r[2:-3])): r for r in table_rows(out, "40 ")}
    for layout in ("per-trial", "compacted"):
        assert int(rows[(layout, "load_trials")][-1]) == 40
        assert int(rows[(layout, "duckdb SELECT *")][-1]) == 40
        assert rows[(layout, "finished_ids")][-1] == rows[(layout, "duckdb aggregate")][-1]
    assert int(rows[("per-trial", "compact")][-1]) == 80  # 40 trial and 40 epoch files
    assert re.search(r"40 compacted: load_trials / duckdb SELECT \* = [\d.]+", out)
