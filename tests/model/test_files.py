"""Reading a model folder's files without building the model, and refusing a checkpoint whose
weights do not match its config when it is loaded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from reinit_tune.errors import InputError
from reinit_tune.model import build, files


def copy(tiny: str, tmp: Path) -> Path:
    folder = tmp / "model"
    shutil.copytree(tiny, folder)
    return folder


def test_safetensors_shapes_match_the_weights_and_cut_files_are_refused(tiny_bert, tmp_path):
    folder = copy(tiny_bert, tmp_path)
    shapes = files.safetensors_shapes(folder / "model.safetensors")
    weights = load_file(folder / "model.safetensors")
    assert shapes == {k: list(v.shape) for k, v in weights.items()}
    assert files.layer_indices(shapes) == {0, 1, 2, 3}
    data = (folder / "model.safetensors").read_bytes()
    for cut in (len(data) - 1, len(data) // 2, 100, 4):
        (folder / "model.safetensors").write_bytes(data[:cut])
        with pytest.raises(InputError, match="model.safetensors is .*truncated"):
            files.safetensors_shapes(folder / "model.safetensors")
    (folder / "model.safetensors").write_bytes(data + b"\0")  # longer than its header says
    with pytest.raises(InputError, match="truncated or corrupted"):
        files.safetensors_shapes(folder / "model.safetensors")


def test_layer_indices_of_several_architectures():
    names = ["bert.encoder.layer.0.attention.self.query.weight", "encoder.layer.11.output.dense.b",
             "transformer.h.3.attn.c_attn.weight", "model.layers.7.mlp.up_proj.weight",
             "bert.embeddings.word_embeddings.weight", "classifier.weight"]
    assert files.layer_indices(names) == {0, 11, 3, 7}


def test_parameter_estimate_is_close_for_real_shapes(tiny_bert):
    config = json.loads((Path(tiny_bert) / "config.json").read_text())
    actual = sum(v.numel() for v in load_file(Path(tiny_bert) / "model.safetensors").values())
    assert 0.8 < files.estimated_parameters(config) / actual < 1.2
    bert_base = dict(num_hidden_layers=12, hidden_size=768, intermediate_size=3072,
                     vocab_size=30522, max_position_embeddings=512)
    assert files.estimated_parameters(bert_base) == pytest.approx(109.5e6, rel=0.05)


@pytest.mark.parametrize("declared", [3, 6])
def test_loading_weights_that_do_not_cover_the_config_is_refused(tiny_bert, tmp_path, declared):
    folder = copy(tiny_bert, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": declared}))
    with pytest.raises(InputError, match="missing|does not declare"):
        build.load_pretrained(str(folder), "rte")


def test_a_checkpoint_without_a_pooler_loads_with_a_warning(tiny_bert, tmp_path, caplog):
    folder = copy(tiny_bert, tmp_path)
    state = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in state.items() if "pooler" not in k},
              folder / "model.safetensors", metadata={"format": "pt"})
    model = build.load_pretrained(str(folder), "rte")
    assert model is not None and "no pooler weights" in caplog.text
