"""On a real GPU (``pytest -m gpu``; skipped without CUDA): two trials sharing one GPU through
Ray Tune (with their GPU memory recorded), bf16 autocast on CUDA, the fused AdamW kernel and
the reachable-row embedding updates on CUDA (against dense AdamW), checkpoint/resume on CUDA,
a pack of two seeds against its members apart on CUDA, the fused dropout kernel's masks
against the eager ones, a graphed pack against its eager steps, the default command training
packs on CUDA, and similarity on CUDA. ``python -m
benchmarks.gpu_suite`` runs these and the GPU benchmarks together."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from reinit_tune import TrialConfig, data, store
from reinit_tune.model.build import build_model
from reinit_tune.sweep import trial
from reinit_tune.sweep.options import SimilarityOptions
from reinit_tune.sweep.packs import execute_pack
from reinit_tune.training import loop
from reinit_tune.training.finetune import finetune
from reinit_tune.training.loop import Optimization
from reinit_tune.training.vocab_rows import VocabRows
from tests.helpers import cli

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.ray
def test_two_trials_share_one_gpu_through_ray_tune(ray_local, tiny_bert, glue_dir, tmp_path,
                                                   capsys):
    code, out = cli(capsys, "sweep", "progressive", "--model", tiny_bert, "--tasks", "rte",
                    "--sizes", "64", "--seeds", "1", "--epochs", "1", "--k", "0", "4",
                    "--gpus-per-trial", "0.5", "--pack-size", "1", "--data-dir", str(glue_dir),
                    "--results", str(tmp_path), "--max-failures", "0")
    assert code == 0, out[-3000:]
    trials = store.load_trials(tmp_path)
    assert len(trials) == 2 and set(trials["status"]) == {"ok"}
    assert trials["device"].str.startswith("cuda").all()
    assert set(trials["precision_used"]) <= {"bf16", "fp32"}  # auto: what the GPU runs
    # both trials' memory is recorded, and together it fit the card they shared
    assert (trials["gpu_memory_peak_bytes"] > trials["gpu_memory_start_bytes"]).all()
    assert trials["gpu_memory_peak_bytes"].sum() < torch.cuda.get_device_properties(0).total_memory


def test_bf16_autocast_runs_on_cuda(tiny_bert, glue_dir):
    config = TrialConfig(tiny_bert, "rte", train_size=32, epochs=1, precision="bf16", lr=1e-4)
    [report] = trial.execute(config, data_dir=str(glue_dir), use_gpu=True)
    assert report["device"].startswith("cuda")
    expected = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    assert report["precision_used"] == expected and math.isfinite(report["train_loss"])


def test_fused_adamw_and_vocab_rows_on_cuda_match_dense_adamw(tiny_bert, glue_dir,
                                                              monkeypatch):
    config = TrialConfig(tiny_bert, "rte", train_size=24, epochs=2, lr=1e-3)
    train, devs = data.train_and_devs("rte", tiny_bert, 128, 24, 0, str(glue_dir))
    dev = devs["validation"].select(range(32))

    def run(shortcuts: bool) -> torch.nn.Module:
        if not shortcuts:  # every embedding row, and the plain (for-loop) AdamW
            monkeypatch.setattr(VocabRows, "for_model", classmethod(lambda *a: None))
            monkeypatch.setattr(loop, "make_optimizer", lambda groups, device: torch.optim.AdamW(
                groups, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, foreach=False))
        model = build_model(config)
        finetune(model, train, dev, task="rte", opt=Optimization.of(config), use_gpu=True)
        monkeypatch.undo()
        return model

    fast, dense = run(True), run(False)
    assert next(fast.parameters()).is_cuda
    for (name, a), b in zip(fast.named_parameters(), dense.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


def test_checkpoint_and_resume_on_cuda(tiny_bert, glue_dir):
    config = TrialConfig(tiny_bert, "rte", train_size=40, seed=3, epochs=3, lr=3e-4)
    states = {}
    whole = trial.execute(config, data_dir=str(glue_dir), use_gpu=True, checkpoint_after_s=0,
                          # a copy: the state holds the live weights, which epoch 3 trains
                          report=lambda record, state: states.setdefault(
                              record.epoch, copy.deepcopy(state) if state else None))
    again = trial.execute(config, data_dir=str(glue_dir), use_gpu=True)
    resumed = trial.execute(config, data_dir=str(glue_dir), use_gpu=True, resume=states[2])
    assert resumed[0]["epoch"] == 3 and resumed[0]["resumed_from_epoch"] == 2
    # CUDA's embedding backward adds with atomics, so two uninterrupted runs may differ in
    # float rounding: a resumed run is as close to the uninterrupted one as a second
    # uninterrupted run is, or closer
    rerun = abs(again[-1]["train_loss"] - whole[-1]["train_loss"])
    assert abs(resumed[0]["train_loss"] - whole[-1]["train_loss"]) <= max(
        4 * rerun, 1e-6 * whole[-1]["train_loss"])
    assert abs(resumed[0]["score"] - whole[-1]["score"]) <= max(
        4 * abs(again[-1]["score"] - whole[-1]["score"]), 1e-6)


def test_a_pack_of_two_seeds_equals_its_members_apart_on_cuda(tiny_bert, glue_dir):
    """Stateless dropout masks, each seed's own subset and batches, the pack's step replayed
    as CUDA graphs: a member computes what its trial computes alone, to the rounding of its
    other padding and batched kernels."""
    base = TrialConfig(tiny_bert, "rte", train_size=32, seed=1, epochs=2, lr=3e-4)
    configs = [base.replace(reinit_layers=tuple(range(k, 4)), seed=1 + k % 2)
               for k in (4, 3, 2, 1)]
    packed = execute_pack(configs, data_dir=str(glue_dir), use_gpu=True)
    for config in configs:
        reports, error = packed[config.trial_id]
        alone = trial.execute(config, data_dir=str(glue_dir), use_gpu=True)
        assert error is None and reports[-1]["device"].startswith("cuda")
        for got, want in zip(reports, alone, strict=True):
            assert got["train_loss"] == pytest.approx(want["train_loss"], rel=1e-4)
            assert got["score"] == pytest.approx(want["score"], abs=1e-6)


def test_the_fused_dropout_kernel_draws_the_eager_masks_on_cuda():
    from reinit_tune.training import dropout_kernel
    from reinit_tune.training.dropout import _eager, counter_dropout, keys_tensor

    assert dropout_kernel.available()
    keys = keys_tensor([1, 2, 3], "cuda")
    step = torch.tensor(7, device="cuda")
    for shape, stride in (((3, 8, 100, 768), 128), ((3, 8, 12, 100, 100), 128),
                          ((3, 8, 768), 128), ((3, 2, 3), 2**31)):
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(shape, device="cuda").to(dtype)
            got = counter_dropout(x, keys, step, 3, 0.1, stride)  # on CUDA: the kernel
            want = _eager(x, keys, step, 3, 0.1, stride)  # the eager arithmetic, on CUDA
            assert torch.equal(got == 0, want == 0), (shape, dtype)
            assert torch.equal(got, want), (shape, dtype)


def test_a_graphed_pack_replays_what_its_eager_steps_compute(tiny_bert, glue_dir):
    """The same pack with each step a CUDA graph replay and stepped eagerly: the same
    numbers to float rounding; the graphs were captured (no fallback)."""
    from reinit_tune.training import pack

    base = TrialConfig(tiny_bert, "rte", train_size=48, seed=1, epochs=2, lr=3e-4)
    configs = [base.replace(reinit_layers=tuple(range(k, 4)), seed=1 + k % 2)
               for k in (4, 3, 2, 1)]
    trains = {}
    for c in configs:
        trains[c.seed], devs = data.train_and_devs("rte", tiny_bert, 128, 48, c.seed,
                                                   str(glue_dir))
    devs = {k: v.select(range(64)) for k, v in devs.items()}
    captured = []
    real = pack.PackStep.__call__

    def spy(self, batch, step):
        out = real(self, batch, step)
        captured.append((len(self.captured), self.fallback))
        return out

    pack.PackStep.__call__ = spy
    try:
        graphed, setup = pack.train_pack([build_model(c) for c in configs], configs, trains,
                                         devs, use_gpu=True, keep_weights=True, graphs=True)
    finally:
        pack.PackStep.__call__ = real
    assert captured[-1][0] >= 1 and captured[-1][1] is None, captured[-1]
    assert not setup.notes
    eager, _ = pack.train_pack([build_model(c) for c in configs], configs, trains, devs,
                               use_gpu=True, keep_weights=True, graphs=False)
    for a, b in zip(graphed, eager, strict=True):
        for ra, rb in zip(a.results, b.results, strict=True):
            assert ra.train_loss == pytest.approx(rb.train_loss, rel=1e-4)
            assert ra.eval_loss == pytest.approx(rb.eval_loss, rel=1e-4)


def test_the_default_command_trains_packs_on_cuda(tiny_bert, glue_dir, tmp_path, capsys):
    code, out = cli(capsys, "sweep", "progressive", "--model", tiny_bert, "--tasks", "rte",
                    "--sizes", "32", "--seeds", "2", "--epochs", "1", "--k", "0", "2", "4",
                    "--data-dir", str(glue_dir), "--results", str(tmp_path),
                    "--max-failures", "0")
    assert code == 0, out[-3000:]
    assert "GPU trials: 1 GPU per Tune trial, packs of up to 6 trials" in out, out[-3000:]
    trials = store.load_trials(tmp_path)
    assert len(trials) == 6 and set(trials["status"]) == {"ok"}
    assert trials["device"].str.startswith("cuda").all()


def test_similarity_on_cuda(tiny_bert, glue_dir):
    config = TrialConfig(tiny_bert, "rte", train_size=16, epochs=1, lr=1e-3, reinit_layers=(3,))
    [report] = trial.execute(config, data_dir=str(glue_dir), use_gpu=True,
                             similarity=SimilarityOptions(examples=24))
    rows = json.loads(report["similarity_rows"])
    assert [r["layer"] for r in rows] == [0, 1, 2, 3, 4]
    assert all(r["w_output_fro"] > 0 for r in rows[1:])
