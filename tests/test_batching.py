"""How the training loop executes its method: length-grouped batches (a config choice that is
part of a trial's identity) and the fused AdamW kernel (an execution choice that must not
change the update)."""

from __future__ import annotations

import platform

import numpy as np
import pytest
import torch

from reinit_tune import EMBEDDED_MODEL, TrialConfig, data, train


@pytest.fixture(scope="module")
def sst2_subset(glue_dir):
    train_split, _ = data.train_and_dev("sst2", EMBEDDED_MODEL, 128, 400, seed=0)
    return train_split


def epoch_batches(loader) -> list[list[int]]:
    return [list(b) for b in loader.batch_sampler]


def test_length_grouped_batches_cover_every_example_once_per_epoch_with_less_padding(
        sst2_subset):
    lengths = sst2_subset.lengths
    grouped = train.train_loader(sst2_subset, 8, seed=3, length_grouped=True)
    shuffled = train.train_loader(sst2_subset, 8, seed=3, length_grouped=False)
    epochs = [epoch_batches(grouped) for _ in range(2)]
    for batches in epochs:
        assert sorted(i for b in batches for i in b) == list(range(len(sst2_subset)))
        assert all(len(b) == 8 for b in batches)
    assert epochs[0] != epochs[1]  # a new order every epoch

    def padded(batches):
        return sum(int(lengths[b].max()) * len(b) for b in batches)

    # SST-2: ~13 tokens per sentence, batch maxima ~29 when shuffled, ~15 when grouped.
    assert padded(epochs[0]) < 0.7 * padded(epoch_batches(shuffled))
    assert padded(epochs[0]) < 1.25 * int(lengths.sum())


def test_batch_order_is_seeded(sst2_subset):
    def first_epoch(seed, grouped):
        return epoch_batches(train.train_loader(sst2_subset, 8, seed, grouped))

    for grouped in (True, False):
        assert first_epoch(5, grouped) == first_epoch(5, grouped)
        assert first_epoch(5, grouped) != first_epoch(6, grouped)
    # what a batch holds really depends on the choice (so it is part of the trial's identity)
    assert first_epoch(5, True) != first_epoch(5, False)


def test_length_grouping_is_part_of_the_trial_identity():
    base = TrialConfig(EMBEDDED_MODEL, "sst2", train_size=500)
    assert base.length_grouped is False  # stored trials that predate the field ran shuffled
    grouped = base.replace(length_grouped=True)
    assert grouped.trial_id != base.trial_id
    assert TrialConfig.from_dict(grouped.to_dict()) == grouped
    assert TrialConfig.from_dict({**grouped.to_dict(), "length_grouped": np.bool_(True)}) == grouped


def test_fused_adamw_gives_the_foreach_update(tiny_bert):
    """The fused kernel runs the same AdamW math (run_glue settings) as the reference
    implementation: after 20 steps of identical gradients the weights agree to float32
    rounding. An AdamW with other settings (torch's default weight decay 0.01) does not."""
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    reference = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    models = {k: AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
              for k in ("fused", "foreach", "decay")}
    for m in models.values():
        m.load_state_dict(reference.state_dict())
    fused = train.make_optimizer(train.param_groups(models["fused"], 1e-3), "cpu")
    assert fused.defaults["fused"] and fused.defaults["weight_decay"] == 0.0
    assert fused.defaults["eps"] == 1e-8 and fused.defaults["betas"] == (0.9, 0.999)
    optimizers = {
        "fused": fused,
        "foreach": torch.optim.AdamW(models["foreach"].parameters(), lr=1e-3, eps=1e-8,
                                     weight_decay=0.0, foreach=True),
        "decay": torch.optim.AdamW(models["decay"].parameters(), lr=1e-3, eps=1e-8,
                                   foreach=True),
    }
    generator = torch.Generator().manual_seed(1)
    params = {k: list(m.parameters()) for k, m in models.items()}
    for _ in range(20):
        grads = [torch.randn(p.shape, generator=generator) * 1e-2 for p in params["fused"]]
        for k, opt in optimizers.items():
            for p, g in zip(params[k], grads, strict=True):
                p.grad = g.clone()
            opt.step()
    with torch.no_grad():
        moved = 0.0
        for pf, pr, p0 in zip(params["fused"], params["foreach"], reference.parameters(),
                              strict=True):
            torch.testing.assert_close(pf, pr, rtol=1e-5, atol=1e-7)
            moved = max(moved, float((pf - p0).abs().max()))
        assert moved > 1e-3  # the weights really moved
        gap = max(float((pd - pr).abs().max())
                  for pd, pr in zip(params["decay"], params["foreach"], strict=True))
    assert gap > 1e-6


def test_grouped_trial_trains_and_scores(tiny_bert, glue_dir):
    from reinit_tune import trial

    config = TrialConfig(tiny_bert, "rte", train_size=24, epochs=2, length_grouped=True,
                         precision="bf16", lr=1e-4)
    reports = trial.execute(config)
    assert [r["epoch"] for r in reports] == [1, 2]
    assert all(0 <= r["eval_accuracy"] <= 1 and r["train_examples"] == 24 for r in reports)
    assert reports[0]["precision_used"] == "bf16"


def test_updating_only_reachable_embedding_rows_matches_dense_adamw(tiny_bert, glue_dir,
                                                                     monkeypatch):
    """``VocabRows`` is exact: rows whose token never occurs in the training subset stay
    bit-identical (as dense AdamW without weight decay leaves them), and training with the
    shortcut ends at the weights and dev scores of dense AdamW, to float rounding."""
    from reinit_tune.models import build_model
    from reinit_tune.vocab_rows import VocabRows

    config = TrialConfig(tiny_bert, "rte", train_size=24, epochs=2, lr=1e-3, length_grouped=True)
    train_split, dev = data.train_and_dev("rte", tiny_bert, 128, 24, seed=0)
    dev = dev.select(range(32))
    used = sorted({t for ids in train_split.input_ids for t in ids})
    initial = build_model(config).bert.embeddings.word_embeddings.weight.detach().clone()

    def run(shortcut: bool):
        seen = []
        if not shortcut:
            monkeypatch.setattr(VocabRows, "for_model", classmethod(lambda *a: None))
        else:
            original = VocabRows.for_model.__func__

            def spy(cls, *args):
                seen.append(original(cls, *args))
                return seen[-1]
            monkeypatch.setattr(VocabRows, "for_model", classmethod(spy))
        model = build_model(config)
        results, _ = train.finetune(model, train_split, dev, task="rte", lr=1e-3, batch_size=8,
                                    epochs=2, seed=0, length_grouped=True, use_gpu=False)
        monkeypatch.undo()
        return model, results, seen

    fast, fast_results, seen = run(shortcut=True)
    dense, dense_results, _ = run(shortcut=False)
    assert seen and seen[0] is not None and sorted(seen[0].rows.tolist()) == used
    emb_fast = fast.bert.embeddings.word_embeddings.weight.detach()
    emb_dense = dense.bert.embeddings.word_embeddings.weight.detach()
    unused = torch.ones(len(initial), dtype=torch.bool)
    unused[used] = False
    assert torch.equal(emb_fast[unused], initial[unused])
    assert torch.equal(emb_dense[unused], initial[unused])
    assert (emb_fast[used] != initial[used]).any()  # the reachable rows were trained
    for (name, a), b in zip(fast.named_parameters(), dense.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)
    for r_fast, r_dense in zip(fast_results, dense_results, strict=True):
        assert r_fast.eval_loss == pytest.approx(r_dense.eval_loss, rel=1e-4)
        assert r_fast.train_loss == pytest.approx(r_dense.train_loss, rel=1e-4)


def test_vocab_rows_step_aside_where_they_would_not_be_exact(tiny_bert):
    from reinit_tune.models import build_model
    from reinit_tune.vocab_rows import VocabRows

    model = build_model(TrialConfig(tiny_bert, "rte"))
    groups = train.param_groups(model, 1e-3)
    assert VocabRows.for_model(model, [[5, 6, 7]], groups) is not None
    decayed = [{**g, "weight_decay": 0.01} for g in groups]
    assert VocabRows.for_model(model, [[5, 6, 7]], decayed) is None
    assert VocabRows.for_model(model, [list(range(30_000))], groups) is None  # no gain
    model.get_input_embeddings().weight.requires_grad_(False)
    assert VocabRows.for_model(model, [[5, 6, 7]], groups) is None


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_cpu_training_keeps_freed_memory_on_glibc():
    """The allocator setting really applies (mallopt accepts both parameters)."""
    assert train.retain_freed_memory() is True
