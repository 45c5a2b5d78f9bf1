"""What CUDA trials run so a pack computes what its trials compute alone
(``reinit_tune.training.exact``), checked on the CPU in fresh processes (the dropout kernel
it registers stays for the process): the bernoulli_ dropout draws exactly the masks of
PyTorch's own CPU dropout, and with eager attention and that dropout a pack equals its
members run apart."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import torch

from reinit_tune.training import exact
from tests.helpers import REPO

RUN = textwrap.dedent("""
    import json, sys
    import torch
    from reinit_tune import TrialConfig, data
    from reinit_tune.model.build import build_model
    from reinit_tune.training import exact
    from reinit_tune.training.finetune import finetune_config
    from reinit_tune.training.pack import train_pack

    import transformers.models.bert.modeling_bert as bert

    model, glue, mode = sys.argv[1:4]
    eager = []
    plain_eager = bert.eager_attention_forward
    bert.eager_attention_forward = lambda *a, **k: eager.append(1) or plain_eager(*a, **k)
    torch.set_num_threads(1)
    base = TrialConfig(model, "rte", train_size=16, seed=3, epochs=2, lr=3e-4,
                       max_seq_length=32, batch_size=8)
    members = [base.replace(reinit_layers=(2, 3)), base.replace(reinit_layers=(3,))]
    train, devs = data.train_and_devs("rte", model, 32, 16, 3, glue)
    devs = {k: v.select(range(32)) for k, v in devs.items()}
    if mode != "plain":  # what a CUDA trial runs, here on the CPU
        exact.EXACT_DEVICES = frozenset({"cuda", "cpu"})
    alone = [[r.train_loss for r in finetune_config(build_model(c), train, devs, c,
                                                    use_gpu=False)[0]] for c in members]
    out = {"alone": alone, "eager_calls": len(eager), "registered": sorted(exact._REGISTERED)}
    if mode == "pack":
        outcomes, _ = train_pack([build_model(c) for c in members], members, train, devs,
                                 use_gpu=False)
        out["pack"] = [[r.train_loss for r in o.results] for o in outcomes]
    print(json.dumps(out))
""")


def run(tiny_bert, glue_dir, mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", RUN, tiny_bert, str(glue_dir), mode],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_bernoulli_dropout_is_the_cpu_dropout_bit_for_bit():
    x = torch.randn(64, 33)
    torch.manual_seed(7)
    want, want_mask = torch.ops.aten.native_dropout(x, 0.1, True)
    torch.manual_seed(7)
    got, got_mask = exact.bernoulli_dropout(x, 0.1, True)
    assert torch.equal(got, want) and torch.equal(got_mask, want_mask)
    assert got_mask.dtype == torch.bool and 0 < int((~got_mask).sum()) < x.numel()
    same, kept = exact.bernoulli_dropout(x, 0.1, False)  # evaluation: the input, all kept
    assert torch.equal(same, x) and bool(kept.all())


def test_eager_attention_and_bernoulli_dropout_keep_a_pack_exact(tiny_bert, glue_dir):
    plain = run(tiny_bert, glue_dir, "plain")
    result = run(tiny_bert, glue_dir, "pack")
    for alone, packed in zip(result["alone"], result["pack"], strict=True):
        for a, b in zip(alone, packed, strict=True):
            assert abs(a - b) <= 1e-5
    # the trials ran the CUDA way: eager attention, the dropout kernel registered
    assert result["registered"] == ["CPU"] and result["eager_calls"] > 0
    assert plain["registered"] == [] and plain["eager_calls"] == 0
    # the members differ; on the CPU the CUDA way computes what the default computes
    assert abs(result["alone"][0][-1] - result["alone"][1][-1]) > 1e-4
    for a, b in zip(sum(plain["alone"], []), sum(result["alone"], []), strict=True):
        assert abs(a - b) <= 1e-6


def test_only_cuda_trials_change_and_they_are_restored(tiny_bert):
    from reinit_tune import TrialConfig
    from reinit_tune.model.build import build_model

    model = build_model(TrialConfig(tiny_bert, "rte"))
    before = model.config._attn_implementation
    with exact.exact_on(torch.device("cpu"), [model]):
        assert model.config._attn_implementation == before
    assert "cuda" in exact.EXACT_DEVICES
