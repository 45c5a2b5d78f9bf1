"""A model known by its weights: the fingerprint of a folder changes when it is re-saved and
differs between same-named folders; a sweep whose store holds rows of other weights stops
before training (or reruns them with --model-changed rerun) and never calls a row without a
fingerprint a mismatch; figures never average across weights and name same-named models
apart."""

from __future__ import annotations

import pandas as pd
import pytest

from reinit_tune import TrialConfig, store
from reinit_tune.analysis import frames
from reinit_tune.model.fingerprint import model_fingerprint, short
from reinit_tune.outcome import EpochRecord, TrialOutcome
from tests.helpers import cli, save_tiny_model


def test_a_folder_is_known_by_its_contents(tmp_path):
    first = save_tiny_model(tmp_path / "a" / "tiny", "bert", seed=0)
    same = model_fingerprint(str(first))
    assert same.startswith("sha256:") and model_fingerprint(str(first)) == same
    other = save_tiny_model(tmp_path / "b" / "tiny", "bert", seed=1)  # same name elsewhere
    assert model_fingerprint(str(other)) != same
    save_tiny_model(first, "bert", seed=1)  # re-saved in place with other weights
    assert model_fingerprint(str(first)) not in (same,)
    assert model_fingerprint("bert-base-uncased").startswith("hub:bert-base-uncased")
    assert short(same) == same[7:15] and short(None) == "unrecorded"


def plant(results, config: TrialConfig, fingerprint: str | None) -> None:
    record = EpochRecord(epoch=1, train_loss=0.5, eval_loss=0.6, score=0.6,
                         metrics={"accuracy": 0.6}, train_time_s=1.0, eval_time_s=0.5,
                         train_examples_per_s=8.0, train_examples=50, device="cpu",
                         precision_used="fp32")
    done = TrialOutcome(config.trial_id, epochs=(record,), setup_time_s=0.1,
                        model_fingerprint=fingerprint)
    row, epochs = store.outcome_rows(config, done, num_layers=4)
    store.write_trial(results, row, epochs)


def test_a_sweep_over_re_saved_weights_stops_before_training(tmp_path, capsys, glue_dir):
    model = save_tiny_model(tmp_path / "tiny", "bert", layers=4)
    results = tmp_path / "results"
    argv = ["sweep", "progressive", "--model", str(model), "--tasks", "rte", "--sizes", "50",
            "--seeds", "1", "--epochs", "1", "--k", "4", "--precision", "fp32",
            "--results", str(results), "--dry-run"]
    config = TrialConfig(str(model.resolve()), "rte", train_size=50, seed=0, epochs=1,
                         experiment="progressive")
    plant(results, config, model_fingerprint(str(model)))
    code, out = cli(capsys, *argv)
    assert code == 0 and "1 trial already in" in out, out
    save_tiny_model(model, "bert", layers=4, seed=7)  # re-saved at the same path
    code, out = cli(capsys, *argv)
    assert code == 2, out
    assert "the model changed since these trials ran" in out and "--model-changed rerun" in out
    code, out = cli(capsys, *argv, "--model-changed", "rerun")
    assert code == 0 and "dry run: 1 of 1 trials would run" in out, out
    plant(results, config, None)  # a row from before fingerprints: never a mismatch
    code, out = cli(capsys, *argv)
    assert code == 0 and "1 trial already in" in out, out


def rows(*specs) -> pd.DataFrame:
    records = []
    for i, (model, fingerprint, score) in enumerate(specs):
        config = TrialConfig(model, "rte", train_size=500, seed=i, experiment="progressive")
        records.append({**config.to_dict(), "trial_id": config.trial_id, "status": "ok",
                        "score": score, "model_fingerprint": fingerprint,
                        "train_fraction": None, "reused_from": None})
    return pd.DataFrame(records)


def test_figures_never_average_two_weights_and_name_same_named_models_apart():
    split = frames.split(rows(("m/tiny", "sha256:aaaa1111", 0.6), ("m/tiny", "sha256:bbbb2222",
                                                                    0.9)), ["task"])
    assert split.attrs["split"] == ["model_fingerprint"]
    assert sorted(split["setting"]) == ["weights aaaa1111", "weights bbbb2222"]
    named = frames.split(rows(("a/tiny", None, 0.6), ("b/tiny", None, 0.9)), ["task"])
    assert sorted(named["setting"]) == ["a/tiny", "b/tiny"]
    assert frames.models_of(named) == "models: a/tiny, b/tiny"
    # an older row without a fingerprint is the same model as its newer rows
    mixed = frames.split(rows(("m/tiny", None, 0.6), ("m/tiny", "sha256:aaaa1111", 0.7)),
                         ["task"])
    assert mixed.attrs["split"] == [] and set(mixed["setting"]) == {""}


@pytest.mark.parametrize(("models", "names"), [
    (["x/a/tiny", "y/a/tiny"], ["x/a/tiny", "y/a/tiny"]),
    (["bert-base-uncased", "runs/tiny"], ["bert-base-uncased", "tiny"]),
])
def test_model_names_are_the_shortest_suffix_that_tells_them_apart(models, names):
    assert list(frames.model_names(models).values()) == names
