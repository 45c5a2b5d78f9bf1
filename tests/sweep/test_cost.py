"""The dry run's cost estimate: the time model's arithmetic, scaling to unrecorded shapes,
calibration on this device, and the line every sweep's --dry-run prints."""

from __future__ import annotations

import math
import re

import pytest

from reinit_tune import EMBEDDED_MODEL, TrialConfig, families
from reinit_tune.families import Grid
from reinit_tune.hardware import resolve_precision
from reinit_tune.model.shape import ModelShape, model_shape
from reinit_tune.sweep import cost
from reinit_tune.tasks import TASKS
from tests.helpers import cli

MINILM = {EMBEDDED_MODEL: model_shape(EMBEDDED_MODEL)}


def dry_run(capsys, *args: str) -> str:
    code, out = cli(capsys, "sweep", "progressive", "--dry-run", *args)
    assert code == 0, out
    return out


def test_trial_time_is_steps_tokens_and_eval_per_epoch(glue_dir):
    coeffs = cost.Coefficients(step_s=0.01, token_s=1e-4, eval_token_s=2e-5)
    config = TrialConfig(EMBEDDED_MODEL, "sst2", train_size=500, epochs=3, length_grouped=True)
    tokens = cost.TASK_TOKENS["sst2"]
    per_epoch = 63 * 0.01 + 500 * tokens.grouped * 1e-4 + 872 * tokens.dev * 2e-5
    expected = 3 * per_epoch + cost.TRIAL_SETUP_S
    assert cost.trial_seconds(config, coeffs, 6, glue_dir) == pytest.approx(expected)
    shuffled = cost.trial_seconds(config.replace(length_grouped=False), coeffs, 6, glue_dir)
    assert shuffled > expected  # more padding, more tokens
    full = cost.trial_seconds(config.replace(train_size=None), coeffs, 6, glue_dir)
    assert full > 50 * expected  # 67k examples instead of 500 (the dev split stays the same)


def test_unrecorded_shapes_scale_by_weights_per_token_and_parameters():
    base, note = cost.recorded_coefficients(ModelShape(12, 12, 768), "fp32")
    assert note == "recorded table"
    large, note = cost.recorded_coefficients(ModelShape(24, 16, 1024), "fp32")
    assert "scaled from" in note and "--calibrate" in note
    ratio = (24 * 1024**2) / (12 * 768**2)
    assert large.token_s == pytest.approx(base.token_s * ratio)
    assert large.eval_token_s == pytest.approx(base.eval_token_s * ratio)
    assert large.step_s > base.step_s


def test_recorded_table_covers_the_paper_models_and_every_task():
    for shape in ((6, 384), (12, 768)):
        for precision in ("fp32", "bf16"):
            c = cost.RECORDED[(*shape, precision)]
            assert c.step_s > 0 and c.token_s > 0 and c.eval_token_s > 0
    assert cost.RECORDED[(12, 768, "fp32")].token_s > cost.RECORDED[(6, 384, "fp32")].token_s
    assert set(cost.TASK_TOKENS) == set(TASKS)


def test_calibration_measures_this_device():
    coeffs, device = cost.calibrate(ModelShape(2, 2, 32), "fp32", use_gpu=False)
    assert device == "cpu"
    assert coeffs.token_s >= coeffs.eval_token_s > 0 and coeffs.step_s >= 0


def test_step_costs_solve_two_timings_and_never_go_below_an_evaluated_token():
    exact = cost.fit_step_costs(0.02 + 128 * 1e-4, 0.02 + 512 * 1e-4, 128, 512, 3e-5)
    assert exact.step_s == pytest.approx(0.02) and exact.token_s == pytest.approx(1e-4)
    # timing noise made the longer batches look faster: a negative per-token cost would
    # make longer tasks cheaper, so training a token is bounded below by evaluating it
    noisy = cost.fit_step_costs(0.030, 0.029, 128, 512, 3e-5)
    assert noisy.token_s == 3e-5 and noisy.eval_token_s == 3e-5
    assert noisy.step_s == pytest.approx(0.030 - 128 * 3e-5)
    assert cost.fit_step_costs(0.001, 0.001, 128, 512, 1e-4).step_s == 0.0


def hours(output: str) -> float:
    match = re.search(r"estimated cost: ([\d,.]+) device-hours for (\d+) trials", output)
    assert match, output
    return float(match.group(1).replace(",", ""))


def test_dry_run_of_the_full_paper_grid_prints_device_hours(capsys, no_ray, monkeypatch):
    monkeypatch.delenv("REINIT_TUNE_DATA")  # official GLUE sizes: the full 003 grid
    out = dry_run(capsys)
    precision = resolve_precision("auto", on_gpu=False)[0]  # the CLI defaults
    grid = Grid("bert-base-uncased", length_grouped=True, precision=precision)
    configs = families.get("progressive").configs(grid)
    expected = cost.estimate(configs, {"bert-base-uncased": model_shape("bert-base-uncased")},
                             every_epoch=False).device_hours  # the family scores the last epoch
    assert hours(out) == pytest.approx(expected, rel=1e-3)
    assert f"for {len(configs)} trials" in out
    assert f"bert-base-uncased {precision} recorded table" in out and cost.RECORDED_DEVICE in out
    # the estimate follows the flags that change the work
    assert hours(dry_run(capsys, "--no-length-grouped")) > expected
    small = hours(dry_run(capsys, "--sizes", "500"))
    assert small + hours(dry_run(capsys, "--sizes", "5000", "50000")) == pytest.approx(
        expected, abs=0.2)


def test_dry_run_calibrates_on_request(capsys, no_ray, tiny_bert, glue_dir):
    out = dry_run(capsys, "--calibrate", "--model", tiny_bert, "--tasks", "rte", "--sizes",
                  "100", "--seeds", "2")
    assert "calibrated here" in out and "one after another on this machine's CPU" in out
    assert "not calibrated" not in out
    assert math.isfinite(hours(out)) and hours(out) > 0
    # the estimate's lines are its own, not a dump of its per-trial seconds; the last says
    # what was measured
    lines = out.rstrip().splitlines()
    assert "{" not in out and lines[-2].startswith("estimated cost:")
    precision, _ = resolve_precision("auto", on_gpu=False)  # bf16 on a CPU with native bf16
    assert re.fullmatch(rf"calibrated: .*tiny-bert\S* {precision}, a trial: [\d.]+ ms a step "
                        r"\+ [\d.]+ us a token, evaluation [\d.]+ us a token, setup [\d.]+ s",
                        lines[-1]), lines[-1]


def test_unknown_width_gives_no_estimate_but_the_dry_run_works(capsys, no_ray):
    out = dry_run(capsys, "--model", "my-org/bert", "--num-layers", "4", "--tasks", "cola",
                  "--sizes", "500")
    assert "estimated cost: unknown" in out


def test_probing_trials_cost_a_forward_pass_to_their_layer(glue_dir):
    coeffs = cost.RECORDED[(6, 384, "fp32")]
    finetune = TrialConfig(EMBEDDED_MODEL, "sst2", train_size=500, epochs=3)
    shallow = cost.trial_seconds(finetune.replace(probe_layer=2), coeffs, 6, glue_dir)
    deep = cost.trial_seconds(finetune.replace(probe_layer=6), coeffs, 6, glue_dir)
    full = cost.trial_seconds(finetune, coeffs, 6, glue_dir)
    assert shallow - cost.TRIAL_SETUP_S == pytest.approx((deep - cost.TRIAL_SETUP_S) / 3)
    assert deep < full / 3  # no backward pass, no optimizer steps, features extracted once


def test_sequential_trials_add_each_intermediate_model_once(glue_dir):
    base = TrialConfig(EMBEDDED_MODEL, "rte", train_size=100, epochs=2, intermediate_task="mrpc")
    finals = [base, base.replace(task="wnli")]  # one intermediate model serves both
    alone = cost.estimate([base.replace(intermediate_task=None),
                           base.replace(task="wnli", intermediate_task=None)], MINILM, glue_dir)
    intermediate = cost.estimate([base.replace(task="mrpc", intermediate_task=None)], MINILM,
                                 glue_dir)
    both = cost.estimate(finals, MINILM, glue_dir)
    assert both.trials == 2
    assert both.device_hours == pytest.approx(alone.device_hours + intermediate.device_hours)


def test_gpu_sweeps_cost_the_packs_they_form(glue_dir):
    """A pack of two or more costs ``PACK_SETUP_S`` more than its members' times, and the
    hours are GPU-hours of packs; one-trial packs cost their trials only."""
    coeffs = cost.Coefficients(step_s=0.004, token_s=4e-6, eval_token_s=2e-6, setup_s=0.5)
    base = TrialConfig(EMBEDDED_MODEL, "sst2", train_size=500, epochs=3)
    configs = [base.replace(seed=s, reinit_layers=tuple(range(k, 6)))
               for s in range(3) for k in range(7)]
    key = {(EMBEDDED_MODEL, base.precision): coeffs}
    alone = cost.estimate(configs, MINILM, glue_dir, key)
    packed = cost.estimate(configs, MINILM, glue_dir, key,
                           packs=[configs[:11], configs[11:20], configs[20:]])
    assert alone.packs == [] and packed.packs == [11, 9, 1]
    assert packed.device_hours * 3600 == pytest.approx(
        alone.device_hours * 3600 + 2 * cost.PACK_SETUP_S)
    member = cost.trial_seconds(configs[0], coeffs, 6, glue_dir)
    assert member == pytest.approx(cost.trial_seconds(configs[0], coeffs.__class__(
        0.004, 4e-6, 2e-6), 6, glue_dir) - cost.TRIAL_SETUP_S + 0.5)
    assert "GPU-hours" in str(packed) and "in the 3 packs the sweep forms (up to 11" in str(
        packed)


def gpu_hours(output: str) -> tuple[float, int, int]:
    match = re.search(r"estimated cost: ([\d,.]+) GPU-hours for \d+ trials, in the (\d+) packs "
                      r"the sweep forms \(up to (\d+) trials each\)", output)
    assert match, output
    return float(match.group(1).replace(",", "")), int(match.group(2)), int(match.group(3))


def test_a_gpu_dry_run_estimates_the_packs_the_sweep_would_form(capsys, no_ray, monkeypatch):
    """Without a GPU here: packs sized for the recorded GPU's memory, costed with its
    per-member coefficients, and said so."""
    from reinit_tune.sweep import packs

    monkeypatch.delenv("REINIT_TUNE_DATA")
    out = dry_run(capsys, "--gpus-per-trial", "1")
    shape = model_shape("bert-base-uncased")
    grid = Grid("bert-base-uncased", length_grouped=True, precision="bf16", on_gpu=True)
    configs = families.get("progressive").configs(grid)
    size = packs.resolve_pack_size("auto", configs, {"bert-base-uncased": shape}, 1,
                                   free_bytes=lambda: cost.RECORDED_GPU_FREE)
    formed = packs.group_packs(configs, size)
    expected = cost.estimate(configs, {"bert-base-uncased": shape}, None,
                             {("bert-base-uncased", "bf16"): cost.RECORDED_GPU[(12, 768, "bf16")]},
                             every_epoch=False, packs=formed)
    found, count, largest = gpu_hours(out)
    assert found == pytest.approx(expected.device_hours, rel=1e-2)
    assert (count, largest) == (len(formed), max(len(p) for p in formed)) and largest > 16
    assert "recorded in packs" in out and "--dry-run --calibrate on the GPU node" in out
    # one trial per Tune trial: no packs, and no GPU figure from a CPU core's table
    single = dry_run(capsys, "--gpus-per-trial", "1", "--pack-size", "1")
    assert "GPU-hours for" not in single and "not calibrated for GPUs" in single


def test_a_gpu_dry_run_calibrates_a_pack_of_the_size_it_forms(capsys, no_ray, tiny_bert,
                                                              monkeypatch):
    from reinit_tune.sweep import preflight

    monkeypatch.setattr(preflight, "check_local_gpus", lambda *a, **k: None)  # no GPU here
    sizes = []
    real = cost.calibrate_pack

    def spy(shape, precision, members, use_gpu=True, **kwargs):
        sizes.append(members)
        return real(shape, precision, members, use_gpu=False, steps=2)

    monkeypatch.setattr(cost, "calibrate_pack", spy)
    out = dry_run(capsys, "--calibrate", "--gpus-per-trial", "1", "--pack-size", "4",
                  "--model", tiny_bert, "--tasks", "rte", "--sizes", "100", "--seeds", "2",
                  "--k", "0", "2", "4")
    found, count, largest = gpu_hours(out)
    assert sizes == [3] and (count, largest) == (2, 3) and found > 0  # 6 trials: 3 + 3
    assert "calibrated here" in out


def test_a_gpu_dry_run_says_its_wall_time_its_gpu_share_and_what_it_extrapolates(
        capsys, no_ray, monkeypatch):
    """003's grid as GPU packs from the recorded table: GPU-hours; the wall time no number of
    GPUs beats (its longest pack, named); at half a GPU a pack, the same GPU-hours and packs
    up to twice as long; and where the recorded costs are applied beyond what they were
    measured on (packs larger than 28 members, more than 3 seeds a pack, fp32 from bf16)."""
    monkeypatch.delenv("REINIT_TUNE_DATA")
    out = dry_run(capsys, "--gpus-per-trial", "1")
    wall = re.search(r"wall time: at least (\d+) min, its longest pack \((\d+) trials of "
                     r"(\w+) at (\d+) examples, 3 epochs, bf16\); no number of GPUs finishes "
                     "sooner", out)
    assert wall, out[-2000:]
    assert wall.group(3) == "qnli" and wall.group(4) == "50000"  # the longest split
    match = re.search(r"estimated cost: ([\d.]+) GPU-hours", out)
    assert float(match.group(1)) * 60 > int(wall.group(1))  # the whole grid outlasts a pack
    assert re.search(r"extrapolated beyond what was measured: packs of up to \d+ members from "
                     r"28; up to \d+ seeds a pack from 3", out), out[-1500:]
    # the wall time is the longest pack's own sum, computed from the estimate's trials
    captured = {}
    real = cost.sweep_estimate

    def spy(*args, **kwargs):
        captured["estimate"] = real(*args, **kwargs)
        captured["packs"] = kwargs["packs"]
        return captured["estimate"]

    monkeypatch.setattr(cost, "sweep_estimate", spy)
    half = dry_run(capsys, "--gpus-per-trial", "0.5")
    estimate = captured["estimate"]
    longest = max(cost.PACK_SETUP_S + sum(estimate.per_trial_s[c.trial_id] for c in p)
                  for p in captured["packs"])
    assert estimate.wall_s == pytest.approx(longest) and estimate.gpus_per_pack == 0.5
    assert "at --gpus-per-trial 0.5 2 packs share a GPU: the GPU-hours are the same work, " \
           "each pack up to 2x longer" in half
    fp32 = dry_run(capsys, "--gpus-per-trial", "1", "--precision", "fp32")
    assert "fp32 from another precision's costs (none recorded for fp32)" in fp32
