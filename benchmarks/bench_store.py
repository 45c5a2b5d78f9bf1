"""The results store at scale: reading a store of per-trial files, compacting it, reading it
compacted; each against DuckDB over the same files in the same run.

For each size N a synthetic store of N trials (``benchmarks.synth_store``: the product's own
writer and schemas) is written, then every operation runs in a fresh Python process (its
wall time and its peak RSS, from ``resource.getrusage``):

- ``load_trials``: every column, as a DataFrame; ``load_trials light``: without the payload
  columns (``store.trial_columns()``), what the report reads; ``load_epochs``;
  ``finished_ids``: what planning a sweep reads;
- ``duckdb SELECT *``: ``SELECT * FROM read_parquet('trials/*.parquet', union_by_name=true)``
  as a DataFrame, the baseline; ``duckdb aggregate``: ``count(*), avg(score) ...
  WHERE status = 'ok'`` over the same glob;
- ``compact``: ``store.compact`` of the whole store, then the reads again;
- with ``--engines``, ``pyarrow.dataset``: the other engine, over the per-trial files.

    python -m benchmarks.bench_store --sizes 1000 10000 100000 --root /tmp/store-bench

The store folders are kept under ``--root`` (``n<N>``); ``--reuse`` reads a folder that
already holds N per-trial trials instead of writing it again (writing 10^5 takes minutes).
Page cache: warm (each store was just written or read). ``--smoke``: 40 trials, a temporary
folder (CI runs it).
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

from benchmarks import common, synth_store
from reinit_tune import store

# op -> code run in a fresh process with ``root`` bound; it leaves its result in ``n``.
OPS = {
    "load_trials": "n = len(store.load_trials(root))",
    "load_trials light": "n = len(store.load_trials(root, columns=store.trial_columns()))",
    "load_epochs": "n = len(store.load_epochs(root))",
    "finished_ids": "n = len(store.finished_ids(root))",
    "duckdb SELECT *": (
        "import duckdb; n = len(duckdb.sql(f\"SELECT * FROM read_parquet('{root}/trials/"
        "*.parquet', union_by_name=true)\").df())"),
    # the same with one DuckDB thread (as the store reads), which needs far less memory
    "duckdb SELECT * 1 thread": (
        "import duckdb; con = duckdb.connect(); con.execute('SET threads = 1'); n = len(con.sql("
        "f\"SELECT * FROM read_parquet('{root}/trials/*.parquet', union_by_name=true)\").df())"),
    "duckdb aggregate": (
        "import duckdb; n = duckdb.sql(f\"SELECT count(*), avg(score) FROM read_parquet("
        "'{root}/trials/*.parquet', union_by_name=true) WHERE status = 'ok'\").fetchall()"
        "[0][0]"),
    "compact": "n = sum(store.compact(root).values())",
    # the other engine, as the store read before (one dataset, one schema)
    "pyarrow.dataset": (
        "import glob, pyarrow.dataset as ds; n = len(ds.dataset(sorted(glob.glob("
        "f'{root}/trials/*.parquet')), schema=store.TRIAL_SCHEMA, format='parquet')"
        ".to_table().to_pandas())"),
}
CHILD = """
import json, sys, time
from benchmarks.common import peak_rss_bytes
from reinit_tune import store
root = sys.argv[1]
start = time.perf_counter()
{code}
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "n": n,
                  "rss_gb": peak_rss_bytes() / 2**30}}))
"""


def _rss_gb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            line = next(ln for ln in f if ln.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0.0
    return int(line.split()[1]) / 2**20


def measure(op: str, root: Path, cap_gb: float | None = None) -> dict:
    """Run ``op`` on the store at ``root`` in a fresh process: seconds, rows, peak RSS.
    ``cap_gb``: the process is killed once its resident memory passes this (polled from
    /proc), so a reader that would exhaust a shared machine's memory fails, reported as
    such, instead of the machine."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", CHILD.format(code=OPS[op]),
                                 str(root)], stdout=out, stderr=err, text=True,
                                cwd=common.REPO)
        capped = False
        while proc.poll() is None:
            if cap_gb and _rss_gb(proc.pid) > cap_gb:
                proc.kill()
                capped = True
            time.sleep(0.2)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode:
        reason = (f"resident memory passed {cap_gb} GB" if capped
                  else (stderr.strip().splitlines() or ["killed"])[-1][:160])
        print(f"  {op} failed after {time.perf_counter() - start:.0f} s: {reason}",
              flush=True)
        return {"seconds": float("nan"), "n": "failed", "rss_gb": float("nan")}
    return json.loads(stdout.strip().splitlines()[-1])


def prepare(root: Path, size: int, reuse: bool) -> float | None:
    """A store of ``size`` per-trial trials at ``root``; the seconds writing it took."""
    if reuse and root.is_dir() and store.small_file_count(root) == 2 * size:
        return None
    shutil.rmtree(root, ignore_errors=True)
    return synth_store.generate(root, size)


def run_size(root: Path, size: int, reuse: bool, repeats: int,
             cap_gb: float | None = None, engines: bool = False) -> list[list]:
    written = prepare(root, size, reuse)
    if written is not None:
        print(f"wrote {size} trials in {written:.1f} s ({1000 * written / size:.2f} ms/trial)",
              flush=True)
    rows = []

    def record(layout: str, op: str) -> dict:
        runs = [measure(op, root, cap_gb) for _ in range(repeats)]
        best = min(runs, key=lambda r: r["seconds"])
        rows.append([size, layout, op, best["seconds"], best["rss_gb"], best["n"]])
        print(f"  {size} {layout} {op}: {best['seconds']:.2f} s, {best['rss_gb']:.2f} GB",
              flush=True)
        return best

    ratios = []
    for layout in ("per-trial", "compacted"):
        if layout == "compacted":
            record("per-trial", "compact")
        ours = record(layout, "load_trials")
        duck = record(layout, "duckdb SELECT *")
        ratios.append((layout, ours["seconds"] / duck["seconds"]))
        for op in ("load_trials light", "load_epochs", "finished_ids", "duckdb aggregate",
                   *(["pyarrow.dataset"] if engines and layout == "per-trial" else [])):
            record(layout, op)
    for layout, ratio in ratios:
        print(f"{size} {layout}: load_trials / duckdb SELECT * = {ratio:.2f}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--root", type=Path, default=None, help="where the stores are written")
    p.add_argument("--reuse", action="store_true", help="read existing stores under --root")
    p.add_argument("--repeats", type=int, default=1, help="runs per operation (best kept)")
    p.add_argument("--smoke", action="store_true", help="40 trials in a temporary folder")
    p.add_argument("--engines", action="store_true",
                   help="also time pyarrow.dataset over the per-trial files")
    p.add_argument("--cap-gb", type=float, default=None,
                   help="kill a measured process whose resident memory passes this "
                        "(a shared machine)")
    args = p.parse_args(argv)
    sizes = [40] if args.smoke else args.sizes
    temp = None
    if args.root is None:
        temp = Path(tempfile.mkdtemp(prefix="store-bench-"))
    root = args.root or temp
    began = time.perf_counter()
    try:
        rows = []
        for size in sizes:
            rows += run_size(root / f"n{size}", size, args.reuse, args.repeats, args.cap_gb,
                             args.engines)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    print(common.table(["trials", "layout", "operation", "seconds", "peak RSS GB", "rows"],
                       rows))
    print(f"({common.load_average()}; {time.perf_counter() - began:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
