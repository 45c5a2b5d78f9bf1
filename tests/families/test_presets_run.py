"""Each new preset end to end on a tiny model through the command line and Ray Tune: rows in
the store (QA and MNLI included), its figures, 001's per-step losses and 002's consistency
pairs; the heads and sequential families' own checks run on 001-heads and 001-sequential.
The data are real rows (SQuAD 2.0, MNLI with held-out dev splits, GLUE)."""

from __future__ import annotations

import json

import pytest

from reinit_tune import TrialConfig, families, store
from reinit_tune.training import sequential
from tests.helpers import cli

TINY = ["--seeds", "1", "--epochs", "1", "--lr", "1e-3", "--max-failures", "0"]
RUNS = {
    "000-progressive": (["--tasks", "qnli", "--sizes", "0.006", "--k", "0", "4"], 2),
    "000-probing": (["--tasks", "sst2", "--sizes", "32", "--k", "1", "3"], 2),
    "000-distance": (["--tasks", "sst2", "--sizes", "16", "32", "--similarity-examples",
                      "16"], 2),
    "001-layers": (["--tasks", "squad_v2", "mrpc", "--sizes", "24", "--k", "0", "4",
                    "--max-seq-length", "96", "--batch-size", "8"], 4),
    "001-sequential": (["--tasks", "rte", "wnli", "--sizes", "16"], 4),
    "001-heads": (["--tasks", "stsb", "--sizes", "16", "--layers", "3"], 5),
    "002-dynamics": (["--tasks", "mnli", "rte", "--sizes", "24", "--seeds", "2",
                      "--similarity-examples", "16", "--no-layer-replacement"], 4),
    "003-permutations-authors": (["--tasks", "rte", "--sizes", "16", "--permutations",
                                  "2"], 4),
}


# Presets whose run options differ only in 001's per-step losses share one sweep (with
# them: a superset); 000-distance and 002-dynamics measure similarity, each run on its own.
SHARED = ("000-progressive", "000-probing", "001-layers", "001-sequential", "001-heads",
          "003-permutations-authors")


@pytest.fixture(scope="module")
def shared_presets(ray_local, tiny_bert, small_data, tmp_path_factory):
    """One sweep of the SHARED presets' grids as their command lines build them, its
    summary, the store, each preset's trial ids and the report's output on that store."""
    import contextlib
    import io

    from reinit_tune.cli import main
    from reinit_tune.cli.sweep import configs_of, run_options, sweep_parser
    from reinit_tune.sweep.runner import run_sweep

    results = tmp_path_factory.mktemp("presets")
    ids, configs = {}, []
    for name in SHARED:
        family = families.get(name)
        args = sweep_parser(family).parse_args([
            "--model", tiny_bert, *TINY, *RUNS[name][0], "--data-dir", str(small_data),
            "--results", str(results)])
        grid = configs_of(args, family)
        ids[name] = {c.trial_id for c in grid}
        configs += grid
        if name == "001-layers":
            options = run_options(args, family)
    summary = run_sweep(configs, options)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = main(["report", "--results", str(results)])
    return summary, results, ids, code, printed.getvalue()


@pytest.mark.ray
@pytest.mark.parametrize("name", sorted(RUNS))
def test_tiny_run_of_each_preset_lands_rows_and_figures(name, request, tiny_bert, small_data,
                                                        tmp_path, capsys):
    args, count = RUNS[name]
    if name in SHARED:
        summary, results, ids, code, report = request.getfixturevalue("shared_presets")
        assert (summary.ok, summary.failed) == (sum(RUNS[n][1] for n in SHARED), 0), summary
        trials = store.load_trials(results)
        # seven tasks, QA among them, one at a time: trials of similar memory estimates ask
        # Ray for one request, so each runs on a worker a trial before it used
        workers = trials["worker_pid"].value_counts()
        assert len(workers) <= len(trials) // 3, workers
        trials = trials[trials["trial_id"].isin(ids[name])]
    else:
        request.getfixturevalue("ray_local")
        results = tmp_path
        code, out = cli(capsys, "sweep", name, "--model", tiny_bert, *TINY, *args,
                        "--data-dir", str(small_data), "--results", str(results))
        assert code == 0, out[-3000:]
        trials = store.load_trials(results)
    assert len(trials) == count and set(trials["status"]) == {"ok"}, trials["error"]
    assert set(trials["experiment"]) == {name}
    if name == "001-layers":
        squad = trials[trials["task"] == "squad_v2"]
        assert squad["eval_f1"].between(0, 1).all() and squad["eval_exact"].notna().all()
        assert (squad["score"] == squad["eval_f1"]).all()
        mrpc = trials[trials["task"] == "mrpc"]
        assert (mrpc["eval_acc_and_f1"] == (mrpc["eval_accuracy"] + mrpc["eval_f1"]) / 2).all()
        steps = store.load_steps(results)
        steps = steps[steps["trial_id"].isin(trials["trial_id"])]
        assert set(steps["trial_id"]) == set(trials["trial_id"]) and steps["step"].min() == 1
    if name == "002-dynamics":
        mnli = trials[trials["task"] == "mnli"]
        assert mnli["eval_accuracy"].between(0, 1).all()
        assert mnli["eval_accuracy_mismatched"].between(0, 1).all()
        assert set(trials["schedule"]) == {"slanted-triangular"}
        code, printed = cli(capsys, "consistency", "--results", str(results), "--examples",
                            "12", "--data-dir", str(small_data))
        assert code == 0, printed
        pairs = store.load_pairs(results)
        kinds = pairs.groupby("kind")["pair_id"].nunique().to_dict()
        assert kinds == {"seeds": 2, "tasks": 2}  # per task two seeds; per seed two tasks
        assert (pairs.loc[pairs["kind"] == "tasks", "examples"] == 24).all()
        assert pairs.loc[pairs["layer"] > 0, "attention_js"].gt(0).all()
        code, again = cli(capsys, "consistency", "--results", str(results), "--examples",
                          "12", "--data-dir", str(small_data))
        assert code == 0 and "0 pairs compared" in again  # nothing twice
    if name == "001-heads":  # the heads family's run: every head of layer 3 and a baseline
        heads = {tuple(tuple(p) for p in v) for v in trials["reinit_heads"]}
        assert heads == {(), *(((3, h),) for h in range(4))}
        assert trials["eval_pearson"].notna().all()
    if name == "001-sequential":  # the sequential family's run: each task after the other
        pairs = set(zip(trials["intermediate_task"].fillna("-"), trials["task"], strict=True))
        assert pairs == {("-", "rte"), ("-", "wnli"), ("wnli", "rte"), ("rte", "wnli")}
        for blob in trials["config_json"]:
            config = TrialConfig.from_dict(json.loads(blob))
            if config.intermediate_task:  # trained once per (task, seed, surgery) and kept
                assert sequential.cache_path(config).is_file()
        epochs = store.load_epochs(results)
        epochs = epochs[epochs["trial_id"].isin(trials["trial_id"])]
        assert set(epochs["trial_id"]) == set(trials["trial_id"])  # ours, not Tune's ids
    if name == "000-distance":
        sim = store.load_similarity(results)
        moved = sim.loc[sim["layer"] > 0, "w_output_spectral_pretrained"]
        assert len(moved) == 2 * 4 and moved.gt(0).all()
    if name not in SHARED:
        code, report = cli(capsys, "report", "--results", str(results))
    assert code == 0, report
    out = report
    for spec in families.get(name).figures:
        line = next(ln for ln in out.splitlines() if ln.startswith(spec.key + " "))
        assert "not drawn" not in line and ".png" in line, line


def test_a_qa_trial_keeps_its_surgery_and_scores_what_its_logits_point_at(tiny_bert,
                                                                         small_data):
    """Surgery works on a span-extraction model as on a classifier; and evaluation turns
    logits into answers right: logits that point at every window's gold tokens (CLS where
    the window holds no answer) score exact match 1 on the unanswerable questions and on the
    answerable ones; logits that always prefer CLS answer nothing."""
    import torch
    from transformers.modeling_outputs import QuestionAnsweringModelOutput

    from reinit_tune import TrialConfig, data
    from reinit_tune.model.build import build_model
    from reinit_tune.model.surgery import layer_stack
    from reinit_tune.training.finetune import SpanExtraction

    config = TrialConfig(tiny_bert, "squad_v2", train_size=8, reinit_layers=(3,),
                         max_seq_length=96)
    model = build_model(config)
    assert model.qa_outputs.out_features == 2
    assert torch.count_nonzero(model.qa_outputs.bias) == 0
    fresh = build_model(config.replace(reinit_layers=()))
    assert not torch.equal(layer_stack(model)[3].output.dense.weight,
                           layer_stack(fresh)[3].output.dense.weight)
    assert torch.equal(layer_stack(model)[2].output.dense.weight,
                       layer_stack(fresh)[2].output.dense.weight)

    class Pointing(torch.nn.Module):
        def __init__(self, gold: bool):
            super().__init__()
            self.gold = gold

        def forward(self, input_ids, attention_mask, start_positions, end_positions, **_):
            start = torch.full(input_ids.shape, -10.0)
            end = torch.full(input_ids.shape, -10.0)
            rows = torch.arange(len(input_ids))
            if self.gold:
                start[rows, start_positions], end[rows, end_positions] = 10.0, 10.0
            else:
                start[:, 0], end[:, 0] = 10.0, 10.0
            return QuestionAnsweringModelOutput(loss=torch.tensor(1.0), start_logits=start,
                                                end_logits=end)

    train, devs = data.train_and_devs("squad_v2", tiny_bert, 96, 8, 0, str(small_data))
    scores = {}
    for gold in (True, False):
        objective = SpanExtraction(Pointing(gold), train, devs, "squad_v2")
        objective.device = torch.device("cpu")
        loss, scores[gold] = objective.evaluate()
        assert loss == pytest.approx(1.0)
    answers = devs["validation"].examples.answers
    no_answer = sum(not a for a in answers) / len(answers)
    assert 0 < no_answer < 1
    assert scores[True]["noans_exact"] == 1.0 and scores[True]["hasans_exact"] > 0.9
    assert scores[False]["exact"] == pytest.approx(no_answer)
    assert (scores[False]["noans_exact"], scores[False]["hasans_f1"]) == (1.0, 0.0)
