"""Compare two models layer by layer (002 §5: seed vs seed, task vs task): weight distances,
attention Jensen-Shannon divergence, SVCCA distance and linear CKA on the dev examples of one
or more tasks (002 §5.2 pools 200 examples of each task). Models are names or folders saved by
a sweep run with --save-model (RESULTS/models/<trial_id>), or the pretrained checkpoint."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from reinit_tune.analysis.similarity import plot_pair


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("model_a", help="model name or saved model folder")
    p.add_argument("model_b", help="model name or saved model folder")
    p.add_argument("--tasks", nargs="+", default=["sst2"], help="dev splits to compare on")
    p.add_argument("--examples", type=int, default=200, help="dev examples per task")
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--data-dir", default=None, help="GLUE folder (default: $REINIT_TUNE_DATA)")
    p.add_argument("--layer-replacement", action="store_true",
                   help="also 002 §4's layer replacement (model_b's layer put into model_a)")
    p.add_argument("--out", default="similarity", help="folder for the CSV and the figure")
    args = p.parse_args(argv)
    try:
        rows = compare(args)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    table = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "similarity.csv", index=False)
    _, paths, _ = plot_pair(table, out, "similarity",
                            f"{Path(args.model_a).name} vs {Path(args.model_b).name} on "
                            f"{'+'.join(args.tasks)}")
    print(table.drop(columns=["note"]).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"table: {out / 'similarity.csv'}\nfigure: " + ", ".join(str(p) for p in paths))
    return 0


def compare(args: argparse.Namespace) -> list[dict]:
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    from reinit_tune import data
    from reinit_tune.layer_similarity import BATCH_SIZE, compare_models
    from reinit_tune.models import resolve_model

    tokenizers = [data.tokenizer_identity(data.load_tokenizer(m))
                  for m in (args.model_a, args.model_b)]
    if tokenizers[0] != tokenizers[1]:
        raise ValueError("the two models use different tokenizers; compare models of one family")
    batches = []
    for task in args.tasks:
        dev = data.encoded_split(task, "validation", args.model_a, args.max_seq_length,
                                 args.data_dir)
        dev = dev.select(range(min(args.examples, len(dev))))
        batches += [dev.collate(list(range(i, min(i + BATCH_SIZE, len(dev)))))
                    for i in range(0, len(dev), BATCH_SIZE)]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hf_logging.set_verbosity_error()  # a saved task model's unused classifier is expected
    a, b = (AutoModel.from_pretrained(resolve_model(m)).to(device)
            for m in (args.model_a, args.model_b))
    return compare_models(a, b, batches, layer_replacement=args.layer_replacement)


if __name__ == "__main__":
    sys.exit(main())
