"""Shared fixtures: offline hub settings, the GLUE folder, a tiny BERT saved as a local model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_GLUE = REPO.parent / "shared" / "data" / "glue"

# CI has no hub access: fail fast instead of retrying, and read GLUE from the shared folder.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "REINIT_TUNE_DATA" not in os.environ and SHARED_GLUE.is_dir():
    os.environ["REINIT_TUNE_DATA"] = str(SHARED_GLUE)


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Tokenized-data cache in a temporary folder, shared by the whole session."""
    os.environ["REINIT_TUNE_CACHE"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def glue_dir() -> Path:
    path = Path(os.environ["REINIT_TUNE_DATA"])
    if not (path / "sst2" / "train.parquet").is_file():
        pytest.skip("GLUE data not found; set REINIT_TUNE_DATA")
    return path


def save_tiny_bert(path: Path, *, layers: int = 4, hidden: int = 32, heads: int = 4,
                   intermediate: int = 64, seed: int = 0) -> Path:
    """A small randomly initialized BERT with the embedded MiniLM's real tokenizer, saved as
    a local ``save_pretrained`` folder: a stand-in "pretrained" checkpoint for unit tests."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from reinit_tune.models import EMBEDDED_MODEL, resolve_model

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=intermediate, max_position_embeddings=128,
    )
    model = BertModel(config)
    with torch.no_grad():  # make LayerNorms and biases non-trivial, as in a trained checkpoint
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(resolve_model(EMBEDDED_MODEL)).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> str:
    return str(save_tiny_bert(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture(scope="session")
def wide_bert(tmp_path_factory) -> str:
    """Wide enough (hidden 128, FFN 512) for tight statistics of reinitialized weights."""
    return str(save_tiny_bert(tmp_path_factory.mktemp("wide-bert"), layers=3, hidden=128,
                              heads=4, intermediate=512))


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the in-process sweep tests."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
    yield ray
    ray.shutdown()
