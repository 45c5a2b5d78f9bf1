"""Claim verdicts at scale: ``reinit-tune verdicts`` on synthetic compacted stores of growing
size (the report benchmark's stores: 7 families, 8 tasks, 4 models, mixed protocols), each
run in a fresh process: wall seconds, peak RSS, the verdicts and groups it decided.

    python -m benchmarks.bench_verdicts --sizes 1000 10000 100000 --root /tmp/report-bench --reuse

``--smoke``: 30 trials in a temporary folder (CI runs it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import common
from benchmarks.bench_report import prepare

CHILD = """
import contextlib, io, json, sys, time
from benchmarks.common import peak_rss_bytes
from reinit_tune import cli
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    code = cli.main(["verdicts", "--results", sys.argv[1], "--json", sys.argv[2]])
print(json.dumps({"code": code, "seconds": time.perf_counter() - start,
                  "rss_gb": peak_rss_bytes() / 2**30}))
"""


def measure(root: Path, out: Path) -> dict:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(root), str(out)],
                          capture_output=True, text=True, cwd=common.REPO)
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"verdicts failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["code"]:
        raise RuntimeError(f"verdicts exited {result['code']}:\n{done.stderr[-2000:]}")
    rows = json.loads(out.read_text())
    decided = sum(r["verdict"] in ("supported", "contradicted") for r in rows)
    return {"seconds": wall, "rss_gb": result["rss_gb"], "verdicts": len(rows),
            "decided": decided}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    p.add_argument("--root", type=Path, default=None, help="where the stores are written")
    p.add_argument("--reuse", action="store_true", help="keep stores already under --root")
    p.add_argument("--smoke", action="store_true", help="30 trials in a temporary folder")
    args = p.parse_args(argv)
    sizes = [30] if args.smoke else sorted(args.sizes)
    temp = Path(tempfile.mkdtemp(prefix="verdicts-bench-")) if args.root is None else None
    root = args.root or temp
    began = time.perf_counter()
    rows = []
    try:
        for size in sizes:
            written = prepare(root / f"n{size}", size, args.reuse)
            if written is not None:
                print(f"wrote {size} trials in {written:.1f} s", flush=True)
            row = {"trials": size, **measure(root / f"n{size}", root / f"verdicts{size}.json")}
            print(f"  {size} trials: {row['seconds']:.1f} s, {row['rss_gb']:.2f} GB peak RSS, "
                  f"{row['verdicts']} verdicts ({row['decided']} decided)", flush=True)
            rows.append(row)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    print(common.table(["trials", "seconds", "peak RSS GB", "verdicts", "decided"],
                       [[r["trials"], r["seconds"], r["rss_gb"], r["verdicts"], r["decided"]]
                        for r in rows]))
    print(f"({common.load_average()}; {time.perf_counter() - began:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
