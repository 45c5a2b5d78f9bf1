"""002 §5's consistency analyses over a results store, with no manual pairing: every pair of
seeds of one configuration, and every pair of tasks at one seed, compared layer by layer.

A trial can be paired once its finetuned model is saved (a sweep run with ``--save-model``,
``RESULTS/models/<trial_id>``). Two seeds of a config (the same config but for the seed) are
compared on the first ``examples`` dev examples of their task (§5.1 does not say which; the
same for both models); two tasks of one experiment, model, surgery and seed on the first
``examples`` dev examples of each task pooled (§5.2: "200 examples respectively from both two
datasets"). The rows (``reinit_tune.store.PAIR_SCHEMA``) land in ``RESULTS/pairs/``; a pair
already there is not computed again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pandas as pd

from reinit_tune import store
from reinit_tune.similarity.compare import compare
from reinit_tune.similarity.layers import json_safe

# Fields that may differ between the two models of a pair of tasks: 002 trains each task
# with its own hyperparameters (Table 1).
PER_TASK_FIELDS = ("task", "lr", "batch_size", "epochs", "train_size", "max_seq_length")


@dataclass(frozen=True)
class Pair:
    kind: str  # "seeds" or "tasks"
    a: dict
    b: dict

    def pair_id(self, examples: int) -> str:
        key = json.dumps([self.kind, self.a["trial_id"], self.b["trial_id"], examples])
        return hashlib.sha256(key.encode()).hexdigest()[:16]


def _key(row: dict, without: tuple[str, ...]) -> str:
    config = json.loads(row["config_json"])
    return json.dumps({k: v for k, v in config.items() if k not in without}, sort_keys=True)


def find_pairs(trials: pd.DataFrame, models_dir: Path) -> Iterator[Pair]:
    """Every pair of seeds and of tasks among the trials with a saved model."""
    ok = trials[trials["status"] == "ok"]
    rows = [r for r in ok.to_dict("records")
            if (models_dir / r["trial_id"] / "config.json").is_file()]
    for kind, without in (("seeds", ("seed",)), ("tasks", PER_TASK_FIELDS)):
        groups: dict[str, list[dict]] = {}
        for row in rows:
            groups.setdefault(_key(row, without), []).append(row)
        for members in groups.values():
            members = sorted(members, key=lambda r: (r["task"], r["seed"], r["trial_id"]))
            for a, b in combinations(members, 2):
                if kind == "tasks" and a["task"] == b["task"]:
                    continue
                yield Pair(kind, a, b)


def consistency(results_dir: str | Path, *, examples: int = 200, data_dir: str | None = None,
                experiment: str | None = None, out=print) -> int:
    """Compare every pair not yet in ``RESULTS/pairs/``; returns how many were computed."""
    results = Path(results_dir)
    trials = store.load_trials(results)
    if experiment is not None:
        trials = trials[trials["experiment"] == experiment]
    done, computed = store.pair_ids(results), 0
    for pair in find_pairs(trials, results / "models"):
        pair_id = pair.pair_id(examples)
        if pair_id in done:
            continue
        a, b = pair.a, pair.b
        tasks = [a["task"]] if pair.kind == "seeds" else [a["task"], b["task"]]
        rows = compare(str(results / "models" / a["trial_id"]),
                       str(results / "models" / b["trial_id"]), tasks, examples=examples,
                       max_seq_length=int(a["max_seq_length"]), data_dir=data_dir)
        meta = {"kind": pair.kind, "experiment": a["experiment"], "trial_a": a["trial_id"],
                "trial_b": b["trial_id"], "task_a": a["task"], "task_b": b["task"],
                "seed_a": int(a["seed"]), "seed_b": int(b["seed"])}
        store.write_pairs(results, pair_id, [{**meta, **r} for r in json_safe(rows)])
        computed += 1
        out(f"{pair.kind}: {a['task']} seed {a['seed']} vs {b['task']} seed {b['seed']} "
            f"({a['trial_id']} / {b['trial_id']})")
    return computed
