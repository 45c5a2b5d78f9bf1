"""Checking a store: trials whose epoch rows are lost, and the ``reinit-tune store`` command."""

from __future__ import annotations

import pytest

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store


def test_a_trial_whose_epoch_file_is_unreadable_is_not_finished(tmp_path, write):
    lost, kept = TrialConfig(EMBEDDED_MODEL, "rte", seed=0), TrialConfig(EMBEDDED_MODEL, "rte",
                                                                        seed=1)
    write(tmp_path, lost)
    write(tmp_path, kept)
    (tmp_path / "epochs" / f"{lost.trial_id}.parquet").write_bytes(b"disk fault")
    assert len(store.load_trials(tmp_path)) == 2 and len(store.load_epochs(tmp_path)) == 2
    assert store.finished_ids(tmp_path) == {kept.trial_id}  # the next sweep reruns it
    check = store.check_store(tmp_path)
    assert check.lost_epochs == [lost.trial_id] and "trains it again" in str(check)
    write(tmp_path, lost)  # the rerun rewrites both files
    assert store.finished_ids(tmp_path) == {lost.trial_id, kept.trial_id}
    assert store.check_store(tmp_path).clean


def test_a_deleted_epoch_file_is_named_and_the_check_fails(tmp_path, capsys, write, fill):
    """A trial stored ok after training epochs, its epoch file deleted (a sync that lost it):
    `store check` names the trial and the file and exits 1 (before: "store is clean"); the
    trial still counts as finished (its score is sound). Compacted, the same."""
    from tests.helpers import cli

    configs = fill(tmp_path, 4)
    gone = configs[2].trial_id
    (tmp_path / "epochs" / f"{gone}.parquet").unlink()
    check = store.check_store(tmp_path)
    assert check.missing_epochs == [gone] and not check.clean and check.lost_epochs == []
    assert gone in store.finished_ids(tmp_path)
    code, out = cli(capsys, "store", "check", "--results", str(tmp_path))
    assert code == 1 and f"trial {gone} is stored ok after training, but the store has no " \
        f"epoch rows of it (its file epochs/{gone}.parquet" in out, out
    assert "store has problems" in out
    cli(capsys, "store", "compact", "--results", str(tmp_path))
    assert store.check_store(tmp_path).missing_epochs == [gone]
    write(tmp_path, configs[0], status="error", epochs=0)  # no epochs trained: nothing missing
    assert store.check_store(tmp_path).missing_epochs == [gone]


def test_the_store_command_checks_and_compacts(tmp_path, capsys, write, fill):
    from tests.helpers import cli

    configs = fill(tmp_path, 4)
    code, out = cli(capsys, "store", "check", "--results", str(tmp_path))
    assert code == 0 and "trials: 4 per-trial files, 0 compacted" in out
    assert "store is clean" in out
    code, out = cli(capsys, "store", "compact", "--results", str(tmp_path))
    assert code == 0 and "merged 4 trials, 4 epochs per-trial files" in out
    assert store.small_file_count(tmp_path) == 0
    (tmp_path / "epochs" / f"{configs[0].trial_id}.parquet").write_bytes(b"disk fault")
    write(tmp_path, configs[1], status="error", epochs=0)
    code, out = cli(capsys, "store", "check", "--results", str(tmp_path))
    assert code == 1 and "unreadable file (restore it" in out and str(tmp_path) in out
    assert out.splitlines()[0].startswith("unreadable file") and "(1 trial)" in out
    assert "trials: 1 per-trial files, 1 compacted" in out
    code, out = cli(capsys, "store", "check", "--results", str(tmp_path / "missing"))
    assert code == 2


def flip_a_byte(path, column: str) -> None:
    """Flip one byte inside ``column``'s data page, as a disk fault would."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    index = meta.schema.names.index(column)
    chunk = meta.row_group(0).column(index)
    at = chunk.data_page_offset + chunk.total_compressed_size - 2
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.ray
def test_a_flipped_byte_is_found_named_and_never_retrained_silently(tmp_path, capsys,
                                                                    glue_dir):
    from reinit_tune.outcome import EpochRecord, TrialOutcome
    from tests.helpers import cli, save_tiny_model

    model = save_tiny_model(tmp_path / "tiny", "bert", layers=4)
    results = tmp_path / "results"
    argv = ["sweep", "progressive", "--model", str(model), "--tasks", "rte", "--sizes", "50",
            "--seeds", "2", "--epochs", "1", "--k", "4", "--precision", "fp32",
            "--results", str(results), "--dry-run"]
    for seed in range(2):
        config = TrialConfig(str(model.resolve()), "rte", train_size=50, seed=seed, epochs=1,
                             experiment="progressive")
        record = EpochRecord(epoch=1, train_loss=0.5, eval_loss=0.6, score=0.6955934758,
                             metrics={"accuracy": 0.6955934758}, train_time_s=1.0,
                             eval_time_s=0.5, train_examples_per_s=8.0, train_examples=50,
                             device="cpu", precision_used="fp32")
        row, epochs = store.outcome_rows(config, TrialOutcome(
            config.trial_id, epochs=(record,), setup_time_s=0.1), num_layers=4)
        store.write_trial(results, row, epochs)
    code, out = cli(capsys, "store", "check", "--results", str(results))
    assert code == 0 and "store is clean" in out, out
    damaged = results / "trials" / f"{config.trial_id}.parquet"
    flip_a_byte(damaged, "score")

    code, out = cli(capsys, "store", "check", "--results", str(results))
    assert code == 1, out
    assert out.splitlines()[0].startswith("damaged file (its checksums fail"), out
    assert str(damaged) in out.splitlines()[0]
    code, out = cli(capsys, *argv)  # the sweep stops before any trial, naming it
    assert code == 2 and "damaged results files" in out and f"{damaged} (1 trial)" in out, out
    assert damaged.exists()
    code, out = cli(capsys, *argv, "--rerun-damaged")  # a dry run plans it, moves nothing
    assert code == 0 and "dry run: 1 of 2 trials would run" in out, out
    assert damaged.exists() and not (results / "damaged").exists()
    code, out = cli(capsys, *argv[:-1], "--rerun-damaged", "--max-failures", "0")
    assert code == 0 and "1 ran ok" in out, out  # trained again, in a new file
    assert (results / "damaged" / "trials" / damaged.name).is_file()  # moved, not deleted
    code, out = cli(capsys, "store", "check", "--results", str(results))
    assert code == 0, out


def test_a_compacted_file_cut_in_half_is_counted_named_and_never_retrained_silently(
        tmp_path, capsys):
    """A compacted trials file cut in half (no footer): the report says how many trials it
    held instead of "no trials yet", `store check` leads with it, and the sweep stops
    before training them again unless --rerun-damaged moves it aside."""
    from tests.helpers import SyntheticStore, cli, save_tiny_model

    model = save_tiny_model(tmp_path / "tiny", "bert", layers=4)
    results = tmp_path / "results"
    synth = SyntheticStore(results)
    for seed in range(3):
        for k in (0, 4):
            synth.add("progressive", "rte", 0.6 + 0.01 * seed, seed=seed, model=str(model),
                      reinit_layers=tuple(range(k, 4)), train_size=50, epochs=1,
                      num_layers=4)
    store.compact(results)
    [path] = (results / "trials").glob(f"{store.COMPACTED_PREFIX}*.parquet")
    assert store.key_count(path) == 6
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert store.key_count(path) == 6  # from its name: the file no longer says

    code, out = cli(capsys, "report", "--results", str(results))
    page = (results / "report" / "report.html").read_text()
    assert f"6 trials unreadable in {path}" in out, out
    assert "No trial of this store can be read" in page and "holds no trials yet" not in page
    assert f"6 trials unreadable in {path}" in page
    code, out = cli(capsys, "store", "check", "--results", str(results))
    assert code == 1 and out.splitlines()[0].startswith("unreadable file"), out
    assert f"{path} (6 trials)" in out.splitlines()[0]
    argv = ["sweep", "progressive", "--model", str(model), "--tasks", "rte", "--sizes", "50",
            "--seeds", "3", "--epochs", "1", "--k", "0", "4", "--results", str(results),
            "--dry-run"]
    code, out = cli(capsys, *argv)
    assert code == 2 and f"{path} (6 trials): no readable Parquet footer" in out, out
    assert "--rerun-damaged" in out and path.exists()
    code, out = cli(capsys, *argv, "--rerun-damaged")
    assert code == 0 and "dry run: 6 of 6 trials would run" in out, out
    assert path.exists() and not (results / "damaged").exists()  # a dry run moves nothing


def test_a_read_only_store_is_one_line_for_compact_and_for_a_sweep(tmp_path, capsys,
                                                                   tiny_bert, no_ray):
    """A store whose folders refuse new files (immutable here: root ignores permission
    bits), with a killed compaction's plan left in it: `store compact` and a sweep that
    would train each say so in one line naming --results (exit 2), before any compaction
    or trial, and no traceback."""
    import subprocess

    from tests.helpers import SyntheticStore, cli

    results = tmp_path / "store"
    synth = SyntheticStore(results)
    for seed in range(2):
        synth.add("progressive", "rte", 0.6, seed=seed, train_size=200,
                  reinit_layers=range(2, 6))
    (results / "trials" / ".compaction-00000000000000000001-abcd.json").write_text("{}")
    folders = [results, results / "trials", results / "epochs"]
    if subprocess.run(["chattr", "+i", *map(str, folders)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here")
    try:
        code, out = cli(capsys, "store", "compact", "--results", str(results))
        assert code == 2 and f"--results {results} is not writable" in out, out
        assert "Traceback" not in out
        code, out = cli(capsys, "sweep", "progressive", "--model", tiny_bert, "--tasks", "rte",
                        "--sizes", "200", "--k", "0", "--seeds", "1", "--results",
                        str(results))
        assert code == 2 and f"--results {results} is not writable" in out, out
        assert "Traceback" not in out
    finally:
        subprocess.run(["chattr", "-i", *map(str, folders)], check=True)


def test_a_trial_stored_ok_with_two_scores_is_named_and_the_check_fails(tmp_path, capsys,
                                                                          write, fill):
    """A compacted file restored from a backup beside the current one, one trial's score in
    it different: `store check` names the trial, both scores and files (the kept one
    first, as every reader takes it) and exits 1; the same trial first stored as an error
    and then rerun ok is the store's history, not a disagreement."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reinit_tune.store.files import compacted_name
    from tests.helpers import cli

    configs = fill(tmp_path, 4)
    write(tmp_path, configs[3], status="error", epochs=0)
    cli(capsys, "store", "compact", "--results", str(tmp_path))
    write(tmp_path, configs[3])  # the rerun, per-trial beside the compacted error row
    assert store.check_store(tmp_path).clean
    (current,) = (tmp_path / "trials").glob("compacted-*.parquet")
    table = pq.read_table(current)
    changed = configs[1].trial_id
    scores = [s + 0.25 if t == changed else s
              for t, s in zip(table["trial_id"].to_pylist(), table["score"].to_pylist(),
                              strict=True)]
    older = tmp_path / "trials" / compacted_name(1, table.num_rows)  # stamped before it
    pq.write_table(table.set_column(table.schema.get_field_index("score"), "score",
                                    pa.array(scores, table.schema.field("score").type)),
                   older)
    kept = store.load_trials(tmp_path).set_index("trial_id").loc[changed, "score"]
    check = store.check_store(tmp_path)
    assert [d.trial_id for d in check.disagreeing] == [changed] and not check.clean
    assert check.disagreeing[0].rows[0] == (str(current), pytest.approx(kept))
    code, out = cli(capsys, "store", "check", "--results", str(tmp_path))
    assert code == 1, out
    assert f"trial {changed} is stored ok with different scores: {kept:.6g} in " \
           f"{current.name} (what every reader takes), {kept + 0.25:.6g} in {older.name}" \
           in out, out
