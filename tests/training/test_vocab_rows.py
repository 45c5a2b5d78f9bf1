"""Updating only the word-embedding rows the training data reaches is exact, and steps aside
where it would not be."""

from __future__ import annotations

import pytest
import torch

from reinit_tune import TrialConfig, data
from reinit_tune.model.build import build_model
from reinit_tune.training.finetune import finetune, param_groups
from reinit_tune.training.loop import Optimization
from reinit_tune.training.vocab_rows import VocabRows


def test_updating_only_reachable_embedding_rows_matches_dense_adamw(tiny_bert, glue_dir,
                                                                     monkeypatch):
    """``VocabRows`` is exact: rows whose token never occurs in the training subset stay
    bit-identical (as dense AdamW without weight decay leaves them), and training with the
    shortcut ends at the weights and dev scores of dense AdamW, to float rounding."""
    config = TrialConfig(tiny_bert, "rte", train_size=24, epochs=2, lr=1e-3, length_grouped=True)
    train_split, devs = data.train_and_devs("rte", tiny_bert, 128, 24, seed=0)
    dev = devs["validation"].select(range(32))
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
        results, _ = finetune(model, train_split, dev, task="rte", use_gpu=False,
                              opt=Optimization(lr=1e-3, epochs=2, length_grouped=True))
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
    model = build_model(TrialConfig(tiny_bert, "rte"))
    groups = param_groups(model, 1e-3)
    assert VocabRows.for_model(model, [[5, 6, 7]], groups) is not None
    decayed = [{**g, "weight_decay": 0.01} for g in groups]
    assert VocabRows.for_model(model, [[5, 6, 7]], decayed) is None
    assert VocabRows.for_model(model, [list(range(30_000))], groups) is None  # no gain
    model.get_input_embeddings().weight.requires_grad_(False)
    assert VocabRows.for_model(model, [[5, 6, 7]], groups) is None


