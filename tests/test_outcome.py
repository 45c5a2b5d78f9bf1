"""A trial's typed outcome: it survives Tune's report, it reads back from flat per-epoch
reports, the store keeps its status text as before, and a field added to it is a column of
the store without a change there."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pyarrow.parquet as pq

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store
from reinit_tune.outcome import EpochRecord, Status, TrialOutcome
from tests.helpers import REPO


def epoch(n: int, **fields) -> EpochRecord:
    return EpochRecord(**{"epoch": n, "train_loss": 1.0 / n, "eval_loss": 0.5, "score": 0.6,
                          "metrics": {"accuracy": 0.6, "f1": 0.5}, "train_time_s": 2.0,
                          "eval_time_s": 1.0, "train_examples_per_s": 50.0,
                          "train_examples": 100, "device": "cpu", "precision_used": "fp32",
                          "steps": ((n * 10, 0.7, 1e-5),), **fields})


def finished(config: TrialConfig, **fields) -> TrialOutcome:
    return TrialOutcome(config.trial_id, epochs=(epoch(1), epoch(2)), num_layers=6,
                        setup_time_s=0.5, node_id="n1", hostname="host", versions="{}",
                        resumed_from_epoch=0, majority_score=0.5, data_subset=False,
                        similarity=({"layer": 0, "cka": 0.9},), **fields)


def test_an_outcome_survives_tunes_report_and_flat_reports():
    config = TrialConfig(EMBEDDED_MODEL, "rte", seed=1)
    outcome = finished(config)
    metrics = outcome.tune_metrics()
    assert TrialOutcome.from_report(metrics["outcome"]) == outcome
    assert TrialOutcome.from_report(outcome.to_report()) == outcome
    # the flat numbers Tune's loggers show: the last epoch's, no payloads
    assert metrics["epoch"] == 2 and metrics["eval_accuracy"] == 0.6
    assert "similarity_rows" not in metrics and "steps" not in metrics
    again = TrialOutcome.from_reports(config.trial_id, outcome.reports())
    assert again == outcome


def test_resumed_epochs_replace_earlier_ones_and_skips_carry_why():
    config = TrialConfig(EMBEDDED_MODEL, "rte", seed=1)
    first = TrialOutcome(config.trial_id, epochs=(epoch(1), epoch(2)))
    resumed = TrialOutcome(config.trial_id, epochs=(epoch(2, score=0.9),),
                           resumed_from_epoch=1)
    merged = first.then(resumed)
    assert [e.epoch for e in merged.epochs] == [1, 2] and merged.epochs[1].score == 0.9
    assert merged.resumed_from_epoch == 1 and merged.epoch == 2
    skipped = TrialOutcome(config.trial_id, Status.SKIPPED, error="held elsewhere")
    back = TrialOutcome.from_report(skipped.tune_metrics()["outcome"])
    assert back.status is Status.SKIPPED and back.error == "held elsewhere" and back.epoch == 0


def test_the_store_writes_an_outcome_field_by_field_with_the_status_text_of_before(tmp_path):
    ok_config = TrialConfig(EMBEDDED_MODEL, "rte", seed=1)
    bad_config = TrialConfig(EMBEDDED_MODEL, "rte", seed=2)
    for config, outcome in (
            (ok_config, finished(ok_config)),
            (bad_config, finished(bad_config, status=Status.DIVERGED,
                                  error="diverged: the training loss of epoch 3 is nan"))):
        row, epochs = store.outcome_rows(config, outcome, num_layers=4, attempts=1)
        store.write_trial(tmp_path, row, epochs)
    trials = store.load_trials(tmp_path).set_index("trial_id")
    assert trials.loc[ok_config.trial_id, "status"] == "ok"
    assert trials.loc[bad_config.trial_id, "status"] == "error"
    assert trials.loc[bad_config.trial_id, "error"] == (
        "diverged: the training loss of epoch 3 is nan")
    row = trials.loc[ok_config.trial_id]
    assert row["num_layers"] == 6 and row["train_time_s"] == 4.0 and row["total_time_s"] == 6.5
    assert row["eval_f1"] == 0.5 and row["hostname"] == "host" and row["epochs_completed"] == 2
    assert len(store.load_epochs(tmp_path)) == 4
    assert store.outcome_steps(finished(ok_config))[1] == {
        "trial_id": ok_config.trial_id, "epoch": 2, "step": 20, "train_loss": 0.7, "lr": 1e-5}
    # a trial that finished no epoch keeps only its config, status and error
    failed = TrialOutcome(ok_config.trial_id, Status.FAILED, error="KeyError: 'x'", node_id="n")
    row, epochs = store.outcome_rows(ok_config, failed, num_layers=4)
    assert row["num_layers"] == 4 and row["epochs_completed"] == 0 and "node_id" not in row
    assert epochs == []


def test_a_field_added_to_the_outcome_is_a_column_of_the_store(tmp_path):
    """A new field of ``TrialOutcome`` and one of ``EpochRecord`` (defined before the store is
    imported, as a field written into ``reinit_tune/outcome.py`` would be) reach the trial
    and epoch tables through the store's own writer and readers."""
    script = textwrap.dedent('''
        import dataclasses, sys
        from reinit_tune import outcome

        def field(name, annotation, base):
            return dataclasses.make_dataclass(base.__name__, [
                (name, annotation, dataclasses.field(default=None))], bases=(base,), frozen=True)

        outcome.TrialOutcome = field("gpu_name", "str | None", outcome.TrialOutcome)
        outcome.EpochRecord = field("grad_norm", "float | None", outcome.EpochRecord)

        from reinit_tune import EMBEDDED_MODEL, TrialConfig, store

        config = TrialConfig(EMBEDDED_MODEL, "rte", seed=0)
        record = outcome.EpochRecord(
            epoch=1, train_loss=0.5, eval_loss=0.4, score=0.6, metrics={"accuracy": 0.6},
            train_time_s=1.0, eval_time_s=0.5, train_examples_per_s=8.0, train_examples=8,
            device="cpu", precision_used="fp32", grad_norm=2.5)
        done = outcome.TrialOutcome(config.trial_id, epochs=(record,), setup_time_s=0.1,
                                    gpu_name="H100")
        row, epochs = store.outcome_rows(config, done, num_layers=6)
        store.write_trial(sys.argv[1], row, epochs)
        trials, per_epoch = store.load_trials(sys.argv[1]), store.load_epochs(sys.argv[1])
        print(trials.loc[0, "gpu_name"], trials.loc[0, "grad_norm"], per_epoch.loc[0, "grad_norm"])
    ''')
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["H100", "2.5", "2.5"]
    [path] = (tmp_path / "trials").iterdir()
    names = pq.read_schema(path).names
    # the columns of before keep their places; the new ones come after them
    assert names[:len(store.TRIAL_SCHEMA)] == store.TRIAL_SCHEMA.names
    assert set(names[len(store.TRIAL_SCHEMA):]) == {"gpu_name", "grad_norm"}
