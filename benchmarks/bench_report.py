"""The report at scale: ``reinit-tune report`` on synthetic compacted stores of growing size,
each run in a fresh process: wall seconds, the process's peak RSS, the page's size, the
figures drawn and the panels left out past the panel limit; then what 10^6 trials would
cost, extrapolated from the last two sizes.

For each size N a synthetic store of N trials (``benchmarks.synth_store``: the product's own
writer and schemas; 7 families, 8 tasks, 4 models, mixed lr, epochs, precision and sizes, so
the split rule gives figures many settings) is written and compacted under ``--root``
(``n<N>``); ``--reuse`` keeps a folder that already holds N trials (writing 10^5 takes
minutes).

    python -m benchmarks.bench_report --sizes 1000 10000 100000 --root /tmp/report-bench --reuse

``--smoke``: 30 trials in a temporary folder (CI runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import common, synth_store
from reinit_tune import store

# The report in a fresh process; its own peak RSS, read as it exits.
CHILD = """
import json, sys, time
from benchmarks.common import peak_rss_bytes
from reinit_tune import cli
start = time.perf_counter()
code = cli.main(["report", "--results", sys.argv[1], "--out", sys.argv[2]])
print(json.dumps({"code": code, "seconds": time.perf_counter() - start,
                  "rss_gb": peak_rss_bytes() / 2**30}))
"""


def prepare(root: Path, size: int, reuse: bool) -> float | None:
    """A compacted store of ``size`` trials at ``root``; the seconds writing it took."""
    if reuse and root.is_dir() and not store.small_file_count(root) and len(
            store.load_trials(root, columns=["trial_id"])) == size:
        return None
    shutil.rmtree(root, ignore_errors=True)
    seconds = synth_store.generate(root, size)
    store.compact(root)
    return seconds


def in_child(child: str, what: str, *argv: Path) -> tuple[float, dict]:
    """Run the script ``child`` in a fresh Python process; its wall seconds and the JSON
    object it prints last (``code``: the command's exit status, which must be 0)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", child, *map(str, argv)],
                          capture_output=True, text=True, cwd=common.REPO)
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{what} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["code"]:
        raise RuntimeError(f"{what} exited {result['code']}:\n{done.stderr[-2000:]}")
    return wall, result


def measure(root: Path, out: Path) -> dict:
    """Run the report of ``root`` into ``out`` in a fresh process: its wall seconds (the
    process's, imports included), peak RSS, the page's MB, figures and left-out panels."""
    shutil.rmtree(out, ignore_errors=True)
    wall, result = in_child(CHILD, "the report", root, out)
    page = (out / "report.html").read_text()
    undrawn = [int(n) for n in re.findall(r"(\d+) of the \d+ settings \(panels\) are not "
                                          r"drawn", page)]
    return {"seconds": wall, "rss_gb": result["rss_gb"],
            "page_mb": (out / "report.html").stat().st_size / 1e6,
            "figures": len(list(out.glob("*.png"))), "undrawn": sum(undrawn)}


def extrapolate(rows: list[dict], target: int = 10**6) -> dict | None:
    """Each measure at ``target`` trials along the line through the two largest sizes."""
    if len(rows) < 2:
        return None
    a, b = rows[-2], rows[-1]
    scale = (target - b["trials"]) / (b["trials"] - a["trials"])
    return {k: b[k] + scale * (b[k] - a[k]) for k in ("seconds", "rss_gb", "page_mb")}


def sizes_parser(description: str) -> argparse.ArgumentParser:
    """The flags every store-size benchmark takes (this one, ``bench_verdicts``)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    p.add_argument("--root", type=Path, default=None, help="where the stores are written")
    p.add_argument("--reuse", action="store_true", help="keep stores already under --root")
    p.add_argument("--smoke", action="store_true", help="30 trials in a temporary folder")
    return p


def over_sizes(args: argparse.Namespace, run, describe) -> list[dict]:
    """``run(store, scratch)`` on a compacted synthetic store of each size (``prepare``),
    printing ``describe(row)`` after each; the rows, each with its ``trials``."""
    sizes = [30] if args.smoke else sorted(args.sizes)
    temp = Path(tempfile.mkdtemp(prefix="store-bench-")) if args.root is None else None
    root = args.root or temp
    rows = []
    try:
        for size in sizes:
            written = prepare(root / f"n{size}", size, args.reuse)
            if written is not None:
                print(f"wrote {size} trials in {written:.1f} s", flush=True)
            row = {"trials": size, **run(root / f"n{size}", root / f"out{size}")}
            print(f"  {size} trials: {describe(row)}", flush=True)
            rows.append(row)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = sizes_parser(__doc__.split("\n\n")[0]).parse_args(argv)
    began = time.perf_counter()
    rows = over_sizes(args, measure, lambda row: (
        f"{row['seconds']:.1f} s, {row['rss_gb']:.2f} GB peak RSS, page "
        f"{row['page_mb']:.1f} MB, {row['figures']} figures, {row['undrawn']} panels left out"))
    print(common.table(["trials", "seconds", "peak RSS GB", "page MB", "figures",
                        "panels left out"],
                       [[r["trials"], r["seconds"], r["rss_gb"], r["page_mb"], r["figures"],
                         r["undrawn"]] for r in rows]))
    guess = extrapolate(rows)
    if guess:
        print(f"10^6 trials, extrapolated linearly from {rows[-2]['trials']} and "
              f"{rows[-1]['trials']}: {guess['seconds']:.0f} s, {guess['rss_gb']:.1f} GB peak "
              f"RSS, page {guess['page_mb']:.0f} MB")
    print(f"({common.load_average()}; {time.perf_counter() - began:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
