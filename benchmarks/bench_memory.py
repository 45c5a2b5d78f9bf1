"""Measured peak memory of real trials against ``reinit_tune.sweep.memory``'s estimate.

Each configuration runs ``reinit_tune.sweep.trial.execute`` in a fresh Python process on a
synthetic SST-2 folder whose sentences are long enough to fill every batch to
``max_seq_length`` (the worst case the estimate must bound), and reports the process's peak
resident set (``VmHWM``). A fresh process that imports the trial code and Ray and trains
nothing gives the baseline. Every row must come out under its estimate (ratio < 1), and not
absurdly far under it.

    python benchmarks/bench_memory.py            # tiny BERT, MiniLM 128x32, MiniLM 512x16
    python benchmarks/bench_memory.py --smoke    # the tiny BERT only (tests)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import REPO, load_average, offline_defaults, table

CHILD = r"""
import json, sys
import torch
torch.set_num_threads(int(sys.argv[3]))
import ray  # noqa: F401 - a Ray worker has it imported
from reinit_tune.config import TrialConfig
from reinit_tune.sweep.trial import execute
spec = json.loads(sys.argv[1])
if spec is not None:
    execute(TrialConfig.from_dict(spec), data_dir=sys.argv[2], use_gpu=False)
from benchmarks.common import peak_rss_bytes
print(peak_rss_bytes())  # under pytest, ru_maxrss read 1.6 GiB for a 0.4 GiB process
"""


def long_texts(folder: Path, words: int, train_rows: int, dev_rows: int) -> Path:
    """An sst2 folder of sentences ``words`` words long (every batch full length)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    vocab = ["movie", "actor", "story", "great", "dull", "plot", "scene", "music", "ending",
             "script", "charming", "slow", "funny", "dark", "bright", "long", "short"]
    for split, rows in (("train", train_rows), ("validation", dev_rows)):
        texts = [" ".join(rng.choice(vocab, words)) for _ in range(rows)]
        table = pa.table({"sentence": texts, "label": rng.integers(0, 2, rows),
                          "idx": np.arange(rows)})
        (folder / "sst2").mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder / "sst2" / f"{split}.parquet")
    return folder


def peak_rss(spec: dict | None, data_dir: Path, threads: int) -> int:
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec), str(data_dir),
                          str(threads)], capture_output=True, text=True, cwd=REPO, check=False)
    if out.returncode != 0:
        raise SystemExit(f"measuring {spec} failed (exit {out.returncode}):\n"
                         f"{out.stderr[-3000:]}")
    return int(out.stdout.strip().splitlines()[-1])


def tiny_model(folder: Path) -> str:
    from transformers import AutoTokenizer, BertConfig, BertModel

    from reinit_tune.model.shape import EMBEDDED_MODEL, resolve_model

    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=4,
                        num_attention_heads=4, intermediate_size=128,
                        max_position_embeddings=128)
    BertModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(resolve_model(EMBEDDED_MODEL)).save_pretrained(folder)
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="the tiny BERT only")
    p.add_argument("--model", default=None, help="the tiny model (default: a random one)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    offline_defaults()
    from reinit_tune.config import TrialConfig
    from reinit_tune.model.shape import EMBEDDED_MODEL, model_shape
    from reinit_tune.sweep import memory

    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        tmp_path = Path(tmp)
        tiny = args.model or tiny_model(tmp_path / "tiny")
        # (name, model, max_seq_length, batch, train rows): one epoch of two steps
        runs = [("tiny BERT 128x32", tiny, 128, 32)]
        if not args.smoke:
            runs += [("MiniLM 128x32", EMBEDDED_MODEL, 128, 32),
                     ("MiniLM 512x16", EMBEDDED_MODEL, 512, 16)]
        longest = max(r[2] for r in runs)
        data_dir = long_texts(tmp_path / "data", words=longest + 50, train_rows=2 * 64,
                              dev_rows=64)
        baseline = peak_rss(None, data_dir, args.threads)
        rows = []
        for name, model, length, batch in runs:
            config = TrialConfig(model=model, task="sst2", train_size=2 * batch, seed=0,
                                 batch_size=batch, epochs=1, max_seq_length=length)
            measured = peak_rss(config.to_dict(), data_dir, args.threads)
            estimate = memory.trial_bytes(config, model_shape(model), data_dir=str(data_dir))
            rows.append((name, measured / memory.GiB, estimate / memory.GiB,
                         measured / estimate))
            print(*rows[-1], flush=True)
    print(f"baseline (imports, nothing trained): {baseline / memory.GiB:.2f} GiB; "
          f"{load_average()}; estimate margin {memory.MARGIN}")
    print(table(("config", "measured GiB", "estimate GiB", "measured/estimate"), rows))
    over = [r[0] for r in rows if r[3] > 1]
    if over:
        print(f"UNDER-ESTIMATED: {', '.join(over)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
