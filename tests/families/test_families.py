"""The experiment families: dry-run trial counts of the papers' grids (written from the grid
definitions), grids that scale to the model, flags that restrict them, and bad input that
fails before Ray starts with a message that says what to change."""

from __future__ import annotations

import numpy as np
import pytest

from reinit_tune import EMBEDDED_MODEL, families
from reinit_tune.families import Grid
from reinit_tune.families.base import PAPER_TASKS
from reinit_tune.families.heads import HEAD_TASKS
from reinit_tune.families.localized import BLOCK_SIZE
from reinit_tune.families.permutations import PERMUTATIONS, permutation
from reinit_tune.families.sequential import SEQUENTIAL_TASKS
from tests.helpers import cli, trial_count

# bert-base-uncased: 12 layers of 12 heads; 003 rule: 3 seeds above 500 examples, 50 at 500.
L, H, SEEDS, SMALL_SEEDS = 12, 12, 3, 50
PAPER = len(PAPER_TASKS)
BLOCKS = L - BLOCK_SIZE + 1
PAPER_COUNTS = {
    # k = 0..12 x {SST-2, QNLI: 500, 5k, 50k; CoLA: 500, 5k} (003 §2, App. B, D)
    "progressive": (L + 1) * ((SMALL_SEEDS + SEEDS + SEEDS) * 2 + SMALL_SEEDS + SEEDS),
    # per task and seed: full and embeddings-only baselines, each block reinit and preserved
    "localized": PAPER * SEEDS * (2 + 2 * BLOCKS),
    # per task and seed: the full model and each single layer
    "single_layer": PAPER * SEEDS * (1 + L),
    # CoLA and STS-B; per seed: the baseline and each head of layers 0, 1, L-2, L-1
    "heads": len(HEAD_TASKS) * SEEDS * (1 + 4 * H),
    # per task: N permutations (one run each) and two baselines with 3 runs each
    "permutations": PAPER * (PERMUTATIONS + 2 * SEEDS),
    # per task and seed: k = 0..L
    "probing": PAPER * SEEDS * (L + 1),
    # per final task and seed: direct finetuning and each other intermediate task
    "sequential": len(SEQUENTIAL_TASKS) * SEEDS * len(SEQUENTIAL_TASKS),
    # per task: 50 seeds x k = 0..L
    "small_data": PAPER * SMALL_SEEDS * (L + 1),
    # per task: reference, 5x lr and LayerNorm curves (k = 0..L, 3 seeds at 5k) and the
    # epoch study (k in {0, 6, 12}) at 500 (50 seeds) and 5k (3 seeds)
    "variants": PAPER * (3 * (L + 1) * SEEDS + 3 * (SMALL_SEEDS + SEEDS)),
}
NAMES = [f.name for f in families.all_families()]


def dry_run(capsys, name, *args) -> tuple[int, str]:
    return cli(capsys, "sweep", name, *args, "--dry-run")


def test_every_built_in_family_has_its_paper_count():
    assert set(PAPER_COUNTS) <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_help_lists_the_common_flags_and_the_familys_own(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli(capsys, "sweep", name, "--help")
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    for flag in ("--model", "--tasks", "--sizes", "--seeds", "--epochs", "--precision",
                 "--init-scheme", "--results", "--gpus-per-trial", "--dry-run",
                 *(f.name for f in families.get(name).flags)):
        assert flag in out, flag
    assert "(default: None)" not in out


@pytest.mark.parametrize("name", sorted(PAPER_COUNTS))
def test_default_grid_is_the_papers_for_bert_base(name, capsys, monkeypatch, no_ray, tmp_path):
    monkeypatch.delenv("REINIT_TUNE_DATA")  # official GLUE split sizes
    code, out = dry_run(capsys, name, "--results", str(tmp_path / "r"))
    assert code == 0, out
    assert trial_count(out) == PAPER_COUNTS[name]
    assert name in out and "bert-base-uncased" in out
    assert not (tmp_path / "r").exists()  # a dry run writes nothing


def test_default_progressive_grid_with_the_local_qnli_subset_keeps_50k(capsys, caplog, no_ray,
                                                                      glue_dir):
    """Sizes are checked against the official split (QNLI has 104,743 rows, so 50k is the
    paper's), not against a local subset file: that stops the sweep unless --allow-subset."""
    code, out = dry_run(capsys, "progressive", "--data-dir", str(glue_dir))
    assert code == 2
    assert "qnli: train size 50000 needs 50,000" in out and "holds 9,999" in out
    assert "--allow-subset" in out and "sst2" not in out.split("error:")[1]
    code, out = dry_run(capsys, "progressive", "--data-dir", str(glue_dir), "--allow-subset")
    assert code == 0
    assert trial_count(out) == PAPER_COUNTS["progressive"]
    assert "9,999/50,000 subset" in out
    assert "qnli: skipping" not in caplog.text
    assert "cola: skipping train sizes [50000]" in caplog.text  # larger than CoLA's official


def test_grids_scale_to_the_embedded_minilm(capsys, no_ray):
    n_layers, n_heads = 6, 12
    m = ["--model", EMBEDDED_MODEL, "--tasks", "cola", "--seeds", "1"]
    blocks = [frozenset(range(b, b + 3)) for b in range(n_layers - 2)]
    everything = frozenset(range(n_layers))
    # and the verdicts' four blocks of claims.md §0.2: 1-2, 3-4, 5, 6
    quarters = [frozenset(b) for b in ((0, 1), (2, 3), (4,), (5,))]
    # With 6 layers, preserving block 0-2 is reinitializing block 3-5: one trial, not two.
    localized = {frozenset(), everything, *blocks, *quarters,
                 *(everything - b for b in (*blocks, *quarters))}
    assert len(localized) == 2 + 2 * (len(blocks) + len(quarters)) - 2
    expected = {
        "localized": len(localized),
        "single_layer": 1 + n_layers,
        "heads": 1 + 4 * n_heads,
        "probing": n_layers + 1,
        "small_data": n_layers + 1,
        "variants": 3 * (n_layers + 1) + 3 * 2,  # epoch study at 500 and 5k
    }
    for name, count in expected.items():
        code, out = dry_run(capsys, name, *m)
        assert code == 0 and trial_count(out) == count, (name, out)
    code, out = dry_run(capsys, "heads", *m, "--layers", "2")
    assert trial_count(out) == 1 + n_heads
    code, out = dry_run(capsys, "permutations", *m, "--permutations", "4")
    assert trial_count(out) == 4 + 2
    code, out = dry_run(capsys, "sequential", "--model", EMBEDDED_MODEL, "--tasks", "rte", "wnli",
                        "--intermediate-tasks", "CoLA", "mrpc", "RTE", "--seeds", "1")
    assert trial_count(out) == 2 * (1 + 3) - 1  # rte (in any case) is no intermediate of itself
    code, out = dry_run(capsys, "variants", *m, "--variants", "lr", "--k", "0", "6")
    assert trial_count(out) == 2 * 2  # the 5x curve and its reference
    code, out = dry_run(capsys, "progressive", "--model", EMBEDDED_MODEL, "--tasks", "sst2",
                        "--sizes", "500", "--k", "0", "6")
    assert code == 0 and trial_count(out) == 2 * 50
    code, out = dry_run(capsys, "progressive", "--model", EMBEDDED_MODEL, "--tasks", "rte",
                        "--sizes", "1000", "--seeds", "2")
    assert code == 0 and trial_count(out) == 7 * 2


def test_num_layers_allows_dry_runs_of_uninspectable_models(capsys, no_ray):
    code, out = dry_run(capsys, "progressive", "--model", "my-org/private-bert", "--num-layers",
                        "24", "--tasks", "cola", "--sizes", "5000")
    assert code == 0 and trial_count(out) == 25 * 3
    assert "estimated cost: unknown" in out
    code, out = dry_run(capsys, "progressive", "--model", "my-org/other-bert", "--tasks", "cola")
    assert code == 2 and "--num-layers" in out
    code, out = dry_run(capsys, "heads", "--model", "my-org/private-bert", "--num-layers", "24")
    assert code == 2 and "--num-heads" in out


def test_localized_rows_are_recognisable_from_reinit_layers():
    configs = families.get("localized").configs(Grid(EMBEDDED_MODEL, tasks=("rte",),
                                                     sizes=(100,), seeds=1))
    everything = set(range(6))
    blocks = [{b, b + 1, b + 2} for b in range(4)]
    layer_sets = [set(c.reinit_layers) for c in configs]
    assert set() in layer_sets and everything in layer_sets
    quarters = [{0, 1}, {2, 3}, {4}, {5}]  # the verdicts' blocks (claims.md §0.2)
    for block in (*blocks, *quarters):
        assert block in layer_sets and everything - block in layer_sets
    # No trial twice: preserving block 0-2 of 6 layers is reinitializing block 3-5.
    assert len(layer_sets) == len({frozenset(s) for s in layer_sets}) == 2 + 2 * 8 - 2
    assert {c.experiment for c in configs} == {"localized"}


def test_permutation_n_is_numpy_randomstate_n_and_shared_by_every_task(glue_dir):
    assert permutation(0, 12) == tuple(np.random.RandomState(0).permutation(12))
    configs = families.get("permutations").configs(
        Grid(EMBEDDED_MODEL, tasks=("sst2", "cola"), sizes=(100,), seeds=2,
             data_dir=str(glue_dir)), permutations=4)
    permuted = [c for c in configs if c.layer_order is not None]
    assert len(permuted) == 2 * 4
    by_task = {t: {c.seed: c.layer_order for c in permuted if c.task == t}
               for t in ("sst2", "cola")}
    assert by_task["sst2"] == by_task["cola"] == {n: permutation(n, 6) for n in range(4)}
    assert len(set(by_task["sst2"].values())) == 4


@pytest.mark.parametrize("name,args,message", [
    ("progressive", ["--k", "13"], "--k: [13] out of range"),
    ("progressive", ["--tasks", "cola", "--sizes", "9000"], "--sizes: none of [9000] fits"),
    ("progressive", ["--sizes", "1.5"], "argument --sizes: size '1.5': give a positive count"),
    ("progressive", ["--lr", "-1"], "lr: must be a finite number in (0, 1]"),
    ("progressive", ["--batch-size", "0"], "batch_size: must be an integer >= 1"),
    ("progressive", ["--max-seq-length", "4096"], "max_seq_length: 4096 exceeds"),
    ("progressive", ["--cpus-per-trial", "0"], "--cpus-per-trial must be a finite number > 0"),
    ("progressive", ["--model", "/no/such/folder"], "model:"),
    ("heads", ["--layers", "12"], "--layers: [12] out of range"),
    ("single_layer", ["--layers", "-1"], "--layers: [-1] out of range"),
    ("probing", ["--k", "13"], "--k: [13] out of range"),
    ("permutations", ["--permutations", "0"], "--permutations: must be >= 1"),
    ("variants", ["--lr-multiplier", "0"], "--lr-multiplier: must be a positive number"),
    ("sequential", ["--tasks", "rte", "--intermediate-tasks", "wnli", "--sizes", "1000"],
     "wnli train split"),
])
def test_bad_input_exits_2_before_ray(name, args, message, capsys, no_ray):
    try:
        code, err = cli(capsys, "sweep", name, *args)
    except SystemExit as e:  # argparse rejects what it can parse-check itself
        code, err = e.code, capsys.readouterr().err
    assert code == 2 and message in err, err


def test_a_model_with_too_few_layers_for_blocks_is_refused(capsys, no_ray, tmp_path):
    from tests.helpers import save_tiny_bert

    two = save_tiny_bert(tmp_path / "two", layers=2)
    code, err = cli(capsys, "sweep", "localized", "--model", str(two), "--dry-run")
    assert code == 2 and "at least 3 layers" in err


def test_missing_data_fails_before_ray(capsys, no_ray, tmp_path):
    code, err = cli(capsys, "sweep", "progressive", "--model", EMBEDDED_MODEL, "--tasks", "sst2",
                    "--sizes", "8", "--data-dir", str(tmp_path / "nowhere"), "--results",
                    str(tmp_path / "r"))
    assert code == 2 and "REINIT_TUNE_DATA" in err and "--data-dir" in err


def test_unknown_task_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli(capsys, "sweep", "progressive", "--tasks", "mnli2", "--dry-run")
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "unknown task 'mnli2'; did you mean mnli" in err
