"""Checking a store: trials whose epoch rows are lost, and the ``reinit-tune store`` command."""

from __future__ import annotations

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
    assert check.lost_epochs == [lost.trial_id] and "runs it again" in str(check)
    write(tmp_path, lost)  # the rerun rewrites both files
    assert store.finished_ids(tmp_path) == {lost.trial_id, kept.trial_id}
    assert store.check_store(tmp_path).clean


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
    assert code == 1 and f"unreadable file (delete or restore it): {tmp_path}" in out
    assert "trials: 1 per-trial files, 1 compacted" in out
    code, out = cli(capsys, "store", "check", "--results", str(tmp_path / "missing"))
    assert code == 2
