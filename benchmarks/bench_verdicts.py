"""Claim verdicts at scale: ``reinit-tune verdicts`` on synthetic compacted stores of growing
size (the report benchmark's stores: 7 families, 8 tasks, 4 models, mixed protocols), each
run in a fresh process: wall seconds, peak RSS, the verdicts and groups it decided.

    python -m benchmarks.bench_verdicts --sizes 1000 10000 100000 --root /tmp/report-bench --reuse

``--smoke``: 30 trials in a temporary folder (CI runs it).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from benchmarks import common
from benchmarks.bench_report import in_child, over_sizes, sizes_parser

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
    wall, result = in_child(CHILD, "verdicts", root, out)
    rows = json.loads(out.read_text())
    decided = sum(r["verdict"] in ("supported", "contradicted") for r in rows)
    return {"seconds": wall, "rss_gb": result["rss_gb"], "verdicts": len(rows),
            "decided": decided}


def main(argv: list[str] | None = None) -> int:
    args = sizes_parser(__doc__.split("\n\n")[0]).parse_args(argv)
    began = time.perf_counter()
    rows = over_sizes(args, lambda root, out: measure(root, out.with_suffix(".json")),
                      lambda row: f"{row['seconds']:.1f} s, {row['rss_gb']:.2f} GB peak RSS, "
                                  f"{row['verdicts']} verdicts ({row['decided']} decided)")
    print(common.table(["trials", "seconds", "peak RSS GB", "verdicts", "decided"],
                       [[r["trials"], r["seconds"], r["rss_gb"], r["verdicts"], r["decided"]]
                        for r in rows]))
    print(f"({common.load_average()}; {time.perf_counter() - began:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
