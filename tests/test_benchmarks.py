"""The benchmark scripts run end to end in their smoke mode (tiny model, few examples), so
their code paths, GPU packing included, stay working on CI's CPUs. Speed targets themselves
are measured on demand (benchmarks/RESULTS.md), never asserted here."""

from __future__ import annotations

import re

import pytest

from benchmarks import (
    bench_driver,
    bench_gpu,
    bench_levers,
    bench_sweep,
    bench_trial,
    calibrate_cost,
    gpu_checks,
)

pytestmark = pytest.mark.slow  # the benchmarks' smokes: the drills' tier


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
    """Two tasks, three trials (rte, wnli, rte's second seed), two at a time (half a CPU
    each on the suite's one-CPU Ray): the sweep with each trial's own memory request, then
    with the shared ones, where the third trial runs on a worker one of the first two
    started."""
    bench = bench_sweep
    assert bench.main(["--smoke", "--model", tiny_bert, "--tasks", "rte", "wnli",
                       "--cpus-per-trial", "0.5"]) == 0
    out = capsys.readouterr().out
    rows = {r[0]: r for r in table_rows(out, "own") + table_rows(out, "shared")}
    assert set(rows) == {"own", "shared"}
    for row in rows.values():
        size, trials, at_once, workers = (int(v) for v in row[1:5])
        assert (size, trials, at_once) == (16, 3, 2) and 2 <= workers <= 3
        assert 0 < float(row[-2]) < 1  # the overhead: a fraction of the slot time
        assert float(row[8]) > 0  # setup on a fresh worker
    shared = rows["shared"]
    assert shared[4] == "2" and float(shared[9]) > 0  # and on a reused one
    assert 0 < float(shared[-1]) < 1  # a reused worker's overhead: a fraction of its trial
    assert re.search(r"size 16: fit wall, own requests / shared: [\d.]+x; workers [23] -> 2",
                     out), out


@pytest.mark.ray
def test_bench_driver_smoke_runs_the_real_sweep_path(capsys, ray_local, tiny_bert, glue_dir):
    from reinit_tune.sweep import launch

    real = launch.run_trial
    assert bench_driver.main(["--smoke", "--model", tiny_bert]) == 0
    assert launch.run_trial is real  # the stand-in trial body is gone after the benchmark
    out = capsys.readouterr().out
    rows = [table_rows(out, f"{n} ")[-1] for n in (20, 40)]
    assert [int(r[0]) for r in rows] == [20, 40]
    assert all(float(r[3]) > 0 and float(r[7]) > 100 for r in rows)  # s/trial, RSS MB
    assert float(rows[0][4]) == 1.0  # ratios against the smallest size
    assert re.search(r"extrapolated to 1e\+06 trials: [\d.]+ s/trial", out), out


def test_bench_gpu_without_ray_runs_trials_as_processes(capsys, tiny_bert, glue_dir):
    assert bench_gpu.main(["--smoke", "--models", tiny_bert, "--task", "rte", "--precision",
                           "fp32", "--launcher", "processes"]) == 0
    out = capsys.readouterr().out
    packs = [r for r in table_rows(out, tiny_bert) if len(r) == 7]
    assert [(int(r[2]), int(r[3]), r[4]) for r in packs] == [(1, 1, "processes"),
                                                            (2, 2, "processes")]
    assert all(float(r[-1]) > 0 for r in packs)


@pytest.mark.ray
def test_bench_gpu_smoke_runs_packing_trial_packs_and_mfu_on_cpu(capsys, ray_local, tiny_bert,
                                                                glue_dir):
    bench = bench_gpu
    assert bench.main(["--smoke", "--models", tiny_bert, "--task", "rte", "--precision",
                       "fp32"]) == 0
    out = capsys.readouterr().out
    packs = [r for r in table_rows(out, tiny_bert) if len(r) == 7]
    assert [int(r[2]) for r in packs] == [1, 2] and all(float(r[-1]) > 0 for r in packs)
    assert {r[4] for r in packs} == {"ray"}
    # one table: one trial per GPU, the best fractional packing, packs of 2 and 3 members
    ways = [r for r in table_rows(out, tiny_bert) if len(r) == 9]
    best = max(packs, key=lambda r: float(r[-1]))
    assert [tuple(r[2:5]) for r in ways] == [("one-per-GPU", "1", "1"),
                                             ("best-fractional", best[2], best[3]),
                                             ("pack", "2", "2"), ("pack", "3", "3")]
    assert all(float(v) > 0 for r in ways for v in r[5:])  # wall s, trials/hour, both ratios
    assert float(ways[0][-1]) == 1.0 and float(ways[1][-2]) == 1.0  # each baseline against itself
    for r in ways[2:]:  # a ratio is the pack's trials/hour over its baseline's
        assert float(r[-2]) == pytest.approx(float(r[6]) / float(ways[1][6]), rel=0.06)
    mfu = {r[0]: r for r in table_rows(out, "") if len(r) == 10 and r[2] == "cpu"}
    assert set(mfu) == {"trial", "pack"} and int(mfu["pack"][1]) == 3
    for row in mfu.values():
        assert row[-1] == "n/a" and float(row[7]) > 0  # no CPU peak known: TFLOP/s, no MFU


def test_bench_gpu_packs_members_of_one_seed_that_share_a_pack_key():
    from reinit_tune.config import TrialConfig
    from reinit_tune.training.pack import pack_key

    base = TrialConfig("m", "rte", seed=3, train_size=16)
    members = bench_gpu.pack_members(base, 6, 13)  # MiniLM: 7 progressive, then 6 more
    assert len({c.trial_id for c in members}) == 13 and len({pack_key(c) for c in members}) == 1
    assert [c.reinit_layers for c in members[:7]] == [tuple(range(k, 6)) for k in range(7)]
    assert all(c.seed == 3 for c in members)


def test_bench_gpu_refuses_a_pack_larger_than_the_grid_before_running(capsys, tiny_bert):
    with pytest.raises(SystemExit) as exit_info:
        bench_gpu.main(["--models", tiny_bert, "--pack-sizes", "4", "22", "--launcher",
                        "processes", "--task", "rte"])
    assert exit_info.value.code == 2
    assert "--pack-sizes: at most 21 members for a 4-layer model, got 22" in capsys.readouterr().err


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


def test_bench_verdicts_smoke_decides_a_synthetic_store_in_a_fresh_process(capsys):
    from benchmarks import bench_verdicts

    assert bench_verdicts.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    (row,) = [r for r in table_rows(out, "30 ") if len(r) == 5]
    seconds, rss_gb, rows, decided = (float(v) for v in row[1:])
    assert seconds > 0 and 0 < rss_gb < 4 and rows >= 15 and decided >= 0
    assert re.search(r"30 trials: [\d.]+ s, [\d.]+ GB peak RSS, \d+ verdicts", out)


def test_bench_report_smoke_measures_the_report_in_a_fresh_process(capsys):
    from benchmarks import bench_report

    assert bench_report.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    (row,) = [r for r in table_rows(out, "30 ") if len(r) == 6]
    seconds, rss_gb, page_mb, figures, left_out = (float(v) for v in row[1:])
    assert seconds > 0 and 0 < rss_gb < 4 and 0 < page_mb < 30
    assert figures >= 1 and left_out >= 0
    assert re.search(r"30 trials: [\d.]+ s, [\d.]+ GB peak RSS, page [\d.]+ MB", out)


def test_bench_memory_smoke_measures_a_trial_under_its_estimate(capsys, tiny_bert):
    from benchmarks import bench_memory

    assert bench_memory.main(["--smoke", "--model", tiny_bert, "--threads", "1"]) == 0
    rows = table_rows(capsys.readouterr().out, "tiny")  # the progress line, then the table
    assert len(rows) == 2 and 0.3 < float(rows[-1][-1]) <= 1.0, rows


def test_bench_seeds_smoke_compares_the_adaptive_design_with_fixed_ones(capsys):
    from benchmarks import bench_seeds

    assert bench_seeds.main(["--smoke", "--contrasts", "2"]) == 0
    out = capsys.readouterr().out
    assert "sst2 500 (from embedded-minilm)" in out
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith(("6 ", "2 "))]
    assert [r[1] for r in rows] == ["ours", "ours", "plain"], out
    for row in rows:
        adaptive, fixed, ratio = float(row[3]), float(row[4]), float(row[5])
        assert 0 < adaptive < fixed and ratio == pytest.approx(adaptive / fixed, abs=0.002)


def test_bench_seed_coverage_smoke_counts_each_contrast_of_each_case(capsys):
    from benchmarks import bench_seed_coverage

    assert bench_seed_coverage.main(["--smoke", "--kinds", "normal", "failed 25%, 8 W",
                                     "--collapse", "3"]) == 0
    out = capsys.readouterr().out
    scored = [ln.split() for ln in out.splitlines() if re.match(r"\s+\d+%\s+[\d.]+ W", ln)]
    assert len(scored) == 2 * len(bench_seed_coverage.COLLAPSES), out
    for row in scored:  # coverage and seeds: plain, allowance once seen, at small data
        assert all(0 <= float(row[i]) <= 1 for i in (4, 6, 8))
        assert all(3 <= float(row[i]) <= 50 for i in (5, 7, 9))
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith(("normal", "failed"))
            and "σ" not in ln]
    assert len(rows) == 2 * 2 * 7, out  # two cases, one and six contrasts, seven σ
    normal = [r for r in rows if r[0] == "normal"]
    for row in normal:
        per_contrast = [float(c) for c in row[5:-1]]
        assert len(per_contrast) == int(row[1]) and min(per_contrast) == float(row[3])
        assert min(per_contrast) >= 0.88, row  # 300 groups: 0.95 give or take 0.04
    assert float(normal[0][-1]) < 6 and float(normal[6][-1]) > 40  # σ = 0.2 W vs 5 W
    # a collapse far below a quiet contrast that three seeds do not show: undercovered
    collapse = next(r for r in rows if r[:4] == ["failed", "25%,", "8", "W"] and r[4] == "1")
    assert float(collapse[6]) < 0.85, collapse


@pytest.mark.ray  # its real sweeps start Ray in their own processes
def test_gpu_checks_smoke_runs_every_check_on_cpu(capsys, tmp_path, glue_dir):
    out = tmp_path / "checks.md"
    assert gpu_checks.main(["--smoke", "--data-dir", str(glue_dir), "--out", str(out)]) == 0
    text = out.read_text()
    assert "FAILED" not in text and "# GPU checks on no CUDA device (CPU)" in text
    for title in ("CUDA against CPU", "members stacked", "--pack-size auto",
                  "reused workers"):
        assert title in text
    # the same trial twice on the CPU agrees exactly; the real sweep stored every trial
    [agree] = [r for r in table_rows(text, "tiny") if r[1] == "0"]
    assert float(agree[3]) == 0.0 and agree[-1] == "yes"
    sweeps = [r for r in table_rows(text, "1") + table_rows(text, "0.5") if len(r) == 9]
    trials = {}
    for row in sweeps:
        trials[row[0]] = trials.get(row[0], 0) + int(row[3])
    assert trials == {"1": 2}  # the half-GPU sweep: on the CPU, the same sweep again


@pytest.mark.ray  # its real sweeps start Ray in their own processes
def test_gpu_suite_smoke_runs_every_stage_through_the_real_commands(tmp_path, glue_dir):
    """The GPU suite's stages on the CPU: the GPU tests (skipped), the pack step's profile,
    throughput and pack-size invariance, the sub-grid's calibrated dry run set against the
    same command run to the end, and the calibrated cost of the grid."""
    from benchmarks import gpu_suite

    out = tmp_path / "suite.md"
    assert gpu_suite.main(["--smoke", "--data-dir", str(glue_dir), "--out", str(out)]) == 0
    text = out.read_text()
    assert "# GPU suite on no CUDA device (CPU)" in text
    for stage in gpu_suite.STAGES:
        assert f"## {stage} (at " in text, stage
    # the profile: operators per phase, as many for 4 seeds as for 1
    ops = {(r[0], r[1]): int(r[4]) for r in (line.strip("|").split("|") for line in
                                              text.splitlines() if line.startswith("| "))
           if len(r) == 6 and r[4].strip().isdigit()}
    ops = {(a.strip(), b.strip()): v for (a, b), v in ops.items()}
    assert ops[("4", "forward")] <= 1.1 * ops[("1", "forward")]
    for variant in ("generator masks", "stateless masks", "graphs", "two packs per GPU"):
        assert re.search(rf"\| {variant} \| \d+ \| [\d.]+ \| [\d.]+ \|", text), variant
    # one seed's members, whatever the pack: losses and scores equal to the last bit, weights
    # to the last bit or a few units in it (a CPU's vector reductions can follow the pack's
    # width: 3.6e-12 in one classifier bias on an AVX2 CPU), far below a real difference
    same_seed = [[float(v) for v in line.strip("|").split("|")[3:]]
                 for line in text.splitlines() if line.startswith("| fp32 | 1 | 4 vs ")]
    assert len(same_seed) == 2, text
    for train_loss, dev_loss, score, weights in same_seed:
        assert train_loss == dev_loss == score == 0 and weights < 1e-9, same_seed
    assert "CPU trials: no GPU in" in text and "rows: 4 (4 ok); devices: cpu" in text
    assert re.search(r"calibrated estimate \d+ GPU-seconds against \d+ measured", text)
    assert re.search(r"003's progressive grid, --precision auto \(exit 0, \d+ s\): estimated "
                     r"cost: [\d.]+ ", text)


def test_bench_verdict_levels_smoke_measures_each_kind_under_each_noise(capsys):
    from benchmarks import bench_verdict_levels

    def rows(*argv: str) -> list[list[str]]:
        assert bench_verdict_levels.main(["--smoke", "--stores", "10", *argv]) == 0
        return [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()
                if line.startswith("| ") and "kind" not in line]

    large = rows("--examples", "50000")  # above small data: no mode allowed for unseen
    assert {r[0].strip() for r in large} == set(bench_verdict_levels.KINDS)
    for r in large:
        false, power, plain = float(r[6]), float(r[10]), float(r[9])
        assert 0 <= false <= 1 and 0 <= power <= 1 and 0 <= plain <= 1
        # the verdicts widen or withhold, never add a decision: no more false ones
        assert false <= plain, r
        if r[1].strip() != "collapse":
            assert false == plain  # nothing collapsed: the plain test decides
    # at small data (the default) the unseen-mode bound widens even where nothing collapsed
    small = rows("--kinds", "paired", "Welch")
    power = {(r[0], r[1]): float(r[10]) for r in large}
    for r in small:
        assert float(r[6]) <= float(r[9]) and float(r[10]) <= power[r[0], r[1]], r


def test_bench_verdict_levels_published_reads_each_kind_at_its_papers_effect(capsys):
    from benchmarks import bench_verdict_levels

    assert bench_verdict_levels.main(["--published", "--stores", "12", "--n", "10",
                                      "--kinds", "paired", "F"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and "kind" not in line]
    paired = {int(r[4].replace(",", "")): float(r[5]) for r in rows if r[0].strip() == "paired"}
    # 000-C7's 5 points is 4.5 sigma of a run: one effect, read at small data and above
    assert [r[3].strip() for r in rows if r[0].strip() == "paired"] == ["4.5", "4.5"]
    # above small data ten runs find 4.5 sigma; at small data the unseen-mode bound holds it
    assert paired[50_000] > paired[500]
    # a figure-only claim is read at 1, 3 and 5 sigma, each at both sizes
    assert sorted(r[3].strip() for r in rows if r[0].strip() == "F") == ["1.0", "1.0", "3.0",
                                                                        "3.0", "5.0", "5.0"]
    assert all("figure only" in r[2] for r in rows if r[0].strip() == "F")
