"""Fixtures of the store's tests: trials written through the real row builders and writer,
and every reader's view of a store, to compare before and after a change to its files."""

from __future__ import annotations

import pytest

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store


def _fake_reports(task: str, epochs: int = 2) -> list[dict]:
    metric = TrialConfig(EMBEDDED_MODEL, task).task_spec.primary
    return [{"epoch": e, "train_loss": 1.0 / e, "eval_loss": 0.5, f"eval_{metric}": 0.5 + e / 10,
             "score": 0.5 + e / 10, "train_time_s": 2.0, "eval_time_s": 1.0,
             "train_examples_per_s": 50.0, "train_examples": 100, "setup_time_s": 0.5,
             "device": "cpu", "precision_used": "fp32", "node_id": "n1", "versions": "{}"}
            for e in range(1, epochs + 1)]


def _write(results, config, status="ok", epochs=2):
    reports = _fake_reports(config.task, epochs)
    row = store.trial_row(config, reports, num_layers=6, status=status,
                          error=None if status == "ok" else "boom")
    return store.write_trial(results, row, store.epoch_rows(config, reports))


def _fill(tmp_path, n=6):
    configs = [TrialConfig(EMBEDDED_MODEL, task, seed=seed, train_size=500)
               for task in ("sst2", "cola") for seed in range(n // 2)]
    for c in configs:
        _write(tmp_path, c)
    return configs


def _frame(df):
    return df.sort_values(list(df.columns[:1])).reset_index(drop=True).astype(str)


def _everything(root):
    return (_frame(store.load_trials(root)), _frame(store.load_epochs(root)),
            store.finished_ids(root))


def _same(a, b):
    assert a[0].equals(b[0]) and a[1].equals(b[1]) and a[2] == b[2]


@pytest.fixture
def fake_reports():
    """``fake_reports(task, epochs=2)``: a trial's per-epoch reports, as a worker makes them."""
    return _fake_reports


@pytest.fixture
def write():
    """``write(results, config, status="ok", epochs=2)``: store one trial; its trial file."""
    return _write


@pytest.fixture
def fill():
    """``fill(results, n=6)``: store n trials on two tasks; their configs."""
    return _fill


@pytest.fixture
def everything():
    """``everything(results)``: what every reader sees (trials, epochs, finished ids)."""
    return _everything


@pytest.fixture
def same():
    """``same(a, b)``: assert two ``everything`` views are equal."""
    return _same
