"""The experiment-family sweeps: dry-run trial counts of the papers' grids (written from the
grid definitions), grids that scale to the model, and a tiny run of each through Ray Tune
into the store."""

from __future__ import annotations

import pytest

from reinit_tune import EMBEDDED_MODEL, runner, sequential, spaces, store
from tests.helpers import load_script
from tests.test_cli import trial_count

SWEEPS = ("localized", "single_layer", "heads", "permutations", "probing", "sequential",
          "small_data", "variants")
scripts = {name: load_script(f"sweeps/{name}.py") for name in SWEEPS}

# bert-base-uncased: 12 layers of 12 heads; 003 rule: 3 seeds above 500 examples, 50 at 500.
L, H, SEEDS, SMALL_SEEDS = 12, 12, 3, 50
PAPER = len(spaces.PAPER_TASKS)
BLOCKS = L - spaces.BLOCK_SIZE + 1
PAPER_COUNTS = {
    # per task and seed: full and embeddings-only baselines, each block reinit and preserved
    "localized": PAPER * SEEDS * (2 + 2 * BLOCKS),
    # per task and seed: the full model and each single layer
    "single_layer": PAPER * SEEDS * (1 + L),
    # CoLA and STS-B; per seed: the baseline and each head of layers 0, 1, L-2, L-1
    "heads": len(spaces.HEAD_TASKS) * SEEDS * (1 + 4 * H),
    # per task: N permutations (one run each) and two baselines with 3 runs each
    "permutations": PAPER * (spaces.PERMUTATIONS + 2 * SEEDS),
    # per task and seed: k = 0..L
    "probing": PAPER * SEEDS * (L + 1),
    # per final task and seed: direct finetuning and each other intermediate task
    "sequential": len(spaces.SEQUENTIAL_TASKS) * SEEDS * len(spaces.SEQUENTIAL_TASKS),
    # per task: 50 seeds x k = 0..L
    "small_data": PAPER * SMALL_SEEDS * (L + 1),
    # per task: reference, 5x lr and LayerNorm curves (k = 0..L, 3 seeds at 5k) and the
    # epoch study (k in {0, 6, 12}) at 500 (50 seeds) and 5k (3 seeds)
    "variants": PAPER * (3 * (L + 1) * SEEDS + 3 * (SMALL_SEEDS + SEEDS)),
}


@pytest.fixture
def no_ray(monkeypatch):
    def refuse():
        raise AssertionError("Ray must not start for a dry run or bad input")
    monkeypatch.setattr(runner, "connect_ray", refuse)


def dry_run(capsys, name, *args) -> tuple[int, str]:
    code = scripts[name].main([*args, "--dry-run"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("name", SWEEPS)
def test_help_lists_the_common_flags(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        scripts[name].main(["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    for flag in ("--model", "--tasks", "--sizes", "--seeds", "--epochs", "--precision",
                 "--init-scheme", "--results", "--gpus-per-trial", "--dry-run"):
        assert flag in out, flag


@pytest.mark.parametrize("name", SWEEPS)
def test_default_grid_is_the_papers_for_bert_base(name, capsys, monkeypatch, no_ray, tmp_path):
    monkeypatch.delenv("REINIT_TUNE_DATA")  # official GLUE split sizes
    code, out = dry_run(capsys, name, "--results", str(tmp_path / "r"))
    assert code == 0, out
    assert trial_count(out) == PAPER_COUNTS[name]
    assert name in out and "bert-base-uncased" in out
    assert not (tmp_path / "r").exists()


def test_grids_scale_to_the_embedded_minilm(capsys, no_ray):
    n_layers, n_heads = 6, 12
    m = ["--model", EMBEDDED_MODEL, "--tasks", "cola", "--seeds", "1"]
    blocks = [frozenset(range(b, b + 3)) for b in range(n_layers - 2)]
    everything = frozenset(range(n_layers))
    # With 6 layers, preserving block 0-2 is reinitializing block 3-5: one trial, not two.
    localized = {frozenset(), everything, *blocks, *(everything - b for b in blocks)}
    assert len(localized) == 2 + 2 * len(blocks) - 2
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
                        "--intermediate-tasks", "cola", "mrpc", "rte", "--seeds", "1")
    assert trial_count(out) == 2 * (1 + 3) - 1  # rte is no intermediate of itself
    code, out = dry_run(capsys, "variants", *m, "--variants", "lr", "--k", "0", "6")
    assert trial_count(out) == 2 * 2  # the 5x curve and its reference


def test_localized_rows_are_recognisable_from_reinit_layers():
    configs = spaces.localized(EMBEDDED_MODEL, ["rte"], [100], seeds=1)
    everything = set(range(6))
    blocks = [{b, b + 1, b + 2} for b in range(4)]
    layer_sets = [set(c.reinit_layers) for c in configs]
    assert set() in layer_sets and everything in layer_sets
    for block in blocks:
        assert block in layer_sets and everything - block in layer_sets
    # No trial twice: preserving block 0-2 of 6 layers is reinitializing block 3-5.
    assert len(layer_sets) == len({frozenset(s) for s in layer_sets}) == 2 + 2 * 4 - 2
    assert {c.experiment for c in configs} == {"localized"}


@pytest.mark.parametrize("name,args,message", [
    ("heads", ["--layers", "12"], "--layers: [12] out of range"),
    ("single_layer", ["--layers", "-1"], "--layers: [-1] out of range"),
    ("probing", ["--k", "13"], "--k: [13] out of range"),
    ("permutations", ["--permutations", "0"], "--permutations: must be >= 1"),
    ("localized", ["--model", EMBEDDED_MODEL, "--num-layers", "2"], "at least 3 layers"),
    ("variants", ["--lr-multiplier", "0"], "reinit_lr_multiplier: must be a positive number"),
    ("sequential", ["--tasks", "rte", "--intermediate-tasks", "wnli", "--sizes", "1000"],
     "wnli train split"),
])
def test_bad_input_exits_2_before_ray(name, args, message, capsys, no_ray):
    code = scripts[name].main(args)
    err = capsys.readouterr().err
    assert code == 2 and message in err, err


# -- tiny end-to-end runs through Ray Tune ------------------------------------------------
def _layers(df, column) -> list:
    return [None if v is None else tuple(int(i) for i in v) for v in df[column]]


def check_localized(df, _):
    assert set(_layers(df, "reinit_layers")) == {(), (0, 1, 2, 3), (0, 1, 2), (1, 2, 3), (3,),
                                                 (0,)}


def check_single_layer(df, _):
    assert sorted(_layers(df, "reinit_layers")) == [(), (0,), (3,)]


def check_heads(df, _):
    heads = {tuple(tuple(p) for p in v) for v in df["reinit_heads"]}
    assert heads == {(), *(((3, h),) for h in range(4))}
    assert (df["task"] == "stsb").all() and df["eval_pearson"].notna().all()


def check_permutations(df, _):
    permuted = df[df["layer_order"].notna()].sort_values("seed")
    assert _layers(permuted, "layer_order") == [spaces.permutation(n, 4) for n in (0, 1)]
    assert list(permuted["seed"]) == [0, 1] and _layers(permuted, "reinit_layers") == [(), ()]
    baselines = df[df["layer_order"].isna()]
    assert sorted(_layers(baselines, "reinit_layers")) == [(), (0, 1, 2, 3)]


def check_probing(df, epochs):
    assert sorted(df["probe_layer"]) == [0, 4] and (df["epochs_completed"] == 2).all()
    assert len(epochs) == 4


def check_sequential(df, _):
    pairs = set(zip(df["intermediate_task"].fillna("-"), df["task"], strict=True))
    assert pairs == {("-", "rte"), ("-", "wnli"), ("wnli", "rte"), ("rte", "wnli")}
    from reinit_tune import TrialConfig

    for blob in df["config_json"]:
        config = TrialConfig.from_dict(__import__("json").loads(blob))
        if config.intermediate_task:  # trained once per (task, seed, surgery) and kept
            assert sequential.cache_path(config).is_file()


def check_small_data(df, _):
    assert sorted(df["num_pretrained_layers"]) == [0, 0, 4, 4] and set(df["seed"]) == {0, 1}


def check_variants(df, epochs):
    fast = df[df["reinit_lr_multiplier"] == 5.0]
    kept = df[df["preserve_layernorm"]]
    study = df[df["epochs"] == 2]
    assert sorted(fast["num_pretrained_layers"]) == sorted(kept["num_pretrained_layers"]) == [0, 4]
    assert sorted(study["num_pretrained_layers"]) == [0, 2, 4]
    assert len(df) == 3 * 2 + 3
    last_epoch = epochs.groupby("trial_id")["epoch"].max()
    assert [last_epoch[t] for t in study["trial_id"]] == [2, 2, 2]


TINY = ["--tasks", "rte", "--sizes", "16", "--seeds", "1", "--epochs", "1", "--lr", "1e-3"]
E2E = {
    "localized": (TINY, 6, check_localized),
    "single_layer": ([*TINY, "--layers", "0", "3"], 3, check_single_layer),
    "heads": ([*TINY, "--tasks", "stsb", "--layers", "3"], 5, check_heads),
    "permutations": ([*TINY, "--permutations", "2"], 4, check_permutations),
    "probing": ([*TINY, "--k", "0", "4", "--epochs", "2"], 2, check_probing),
    "sequential": ([*TINY, "--tasks", "rte", "wnli"], 4, check_sequential),
    "small_data": ([*TINY, "--k", "0", "4", "--seeds", "2"], 4, check_small_data),
    "variants": ([*TINY, "--k", "0", "4", "--epoch-sizes", "16", "--max-epochs", "2"], 9,
                 check_variants),
}


@pytest.mark.ray
@pytest.mark.parametrize("name", SWEEPS)
def test_tiny_sweep_runs_through_ray_tune_into_the_store(name, ray_local, tiny_bert, glue_dir,
                                                         tmp_path, capsys):
    args, count, check = E2E[name]
    code = scripts[name].main([*args, "--model", tiny_bert, "--data-dir", str(glue_dir),
                               "--results", str(tmp_path), "--max-failures", "0"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert f"{count} trials: {count} ran ok, 0 failed" in out
    trials = store.load_trials(tmp_path)
    assert len(trials) == count and set(trials["status"]) == {"ok"}
    assert set(trials["experiment"]) == {name}
    epochs = store.load_epochs(tmp_path)
    assert set(epochs["trial_id"]) == set(trials["trial_id"])  # ours, not Tune's trial ids
    check(trials, epochs)
