"""Reusing a stored run for a config that differs only in its experiment name."""

from __future__ import annotations

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store


def test_reuse_and_ids_work_on_a_compacted_store(tmp_path, write):
    source = TrialConfig(EMBEDDED_MODEL, "rte", seed=0, experiment="progressive")
    other = TrialConfig(EMBEDDED_MODEL, "rte", seed=1, experiment="progressive")
    for c in (source, other):
        write(tmp_path, c)
        store.write_similarity(tmp_path, c.trial_id, [{"layer": 0, "cka": 0.5}])
    store.compact(tmp_path)
    assert store.similarity_ids(tmp_path) == {source.trial_id, other.trial_id}
    copy = TrialConfig(EMBEDDED_MODEL, "rte", seed=0, experiment="heads")
    assert store.equivalent_ids(tmp_path)[store.equivalence_key(copy)] == source.trial_id
    store.reuse_trial(tmp_path, source.trial_id, copy)
    df = store.load_trials(tmp_path).set_index("trial_id")
    assert df.loc[copy.trial_id, "reused_from"] == source.trial_id
    assert df.loc[copy.trial_id, "score"] == df.loc[source.trial_id, "score"]
    epochs = store.load_epochs(tmp_path)
    assert list(epochs[epochs["trial_id"] == copy.trial_id]["experiment"]) == ["heads"] * 2
    assert copy.trial_id in store.similarity_ids(tmp_path)
    assert store.finished_ids(tmp_path) == {source.trial_id, other.trial_id, copy.trial_id}
