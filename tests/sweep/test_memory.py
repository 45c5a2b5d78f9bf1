"""Trial memory: the estimate's shape, the pre-flight refusal, Ray's memory kills, and
tokenization that long texts cannot blow up."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reinit_tune.config import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.model.shape import ModelShape
from reinit_tune.sweep import cluster, memory
from tests.helpers import REPO

MINILM = ModelShape(6, 12, 384)
BASE = ModelShape(12, 12, 768)


def config(**changes) -> TrialConfig:
    return TrialConfig(model="m", task="rte", train_size=100, **changes)


def test_the_estimate_grows_with_batch_sequence_and_model():
    at = lambda shape=MINILM, **c: memory.trial_bytes(config(**c), shape)  # noqa: E731
    assert at(batch_size=8) < at(batch_size=32) < at(batch_size=128)
    assert at(max_seq_length=64) < at(max_seq_length=128) < at(max_seq_length=512)
    assert at(MINILM) < at(BASE) < at(ModelShape(24, 16, 1024))
    assert at(precision="fp32") < at(precision="bf16")  # autocast's weight copies
    # attention is quadratic in the sequence: 4x the tokens as length costs more than as batch
    assert at(max_seq_length=512, batch_size=8) > at(max_seq_length=128, batch_size=32)


def test_a_gpu_trial_keeps_only_its_loading_copy_and_data_in_host_memory():
    big = config(batch_size=256, max_seq_length=512)
    assert memory.trial_bytes(big, BASE, use_gpu=True) < memory.trial_bytes(big, BASE)
    assert (memory.trial_bytes(big, BASE, use_gpu=True)
            == memory.trial_bytes(config(), BASE, use_gpu=True))


def test_a_pack_costs_one_process_plus_each_members_state():
    members = [config(seed=s) for s in range(4)]
    one = memory.trial_bytes(members[0], MINILM)
    pack = memory.pack_bytes(members, MINILM)
    assert memory.pack_bytes(members[:1], MINILM) == one
    assert 2 * one < pack < 4 * one  # the baseline and the data are shared
    assert memory.pack_bytes(members[:2], MINILM) < pack


def test_tune_asks_ray_for_each_trials_memory():
    packs = {"a": [config(batch_size=8)], "b": [config(batch_size=64)]}
    needs = memory.tune_trial_bytes(packs, {"m": MINILM}, use_gpu=False)
    assert needs["a"] < needs["b"]
    request = memory.resources(1, 0, needs)({"trial": {"trial_id": "b"}})
    assert request.bundles == [{"CPU": 1, "memory": needs["b"]}]
    need, what = memory.largest(needs, packs)
    assert need == needs["b"] and "--batch-size 64 --max-seq-length 128" in what


def test_similar_needs_ask_for_one_request_never_more_than_the_slack_above_a_need():
    """Tune gives a finished trial's worker only to a trial whose request is equal: needs
    within 25% of a larger one ask for that one; a need further below starts a level."""
    mib = 2**20
    needs = {"a": 1000 * mib, "b": 900 * mib, "c": 801 * mib, "d": 700 * mib, "e": 560 * mib,
             "f": 559 * mib}
    shared = memory.shared_requests(needs)
    assert shared == {"a": 1000 * mib, "b": 1000 * mib, "c": 1000 * mib, "d": 700 * mib,
                      "e": 700 * mib, "f": 559 * mib}
    assert all(needs[p] <= shared[p] <= memory.SHARED_SLACK * needs[p] for p in needs)
    assert memory.shared_requests({}) == {}
    request = memory.resources(1, 0, needs)
    assert request({"trial": {"trial_id": "c"}}) == request({"trial": {"trial_id": "a"}})
    assert request({"trial": {"trial_id": "d"}}).bundles == [{"CPU": 1, "memory": 700 * mib}]


def test_preflight_refuses_a_trial_no_node_can_hold():
    node = {"CPU": 8.0, "memory": 16.0 * memory.GiB}
    cluster.check_memory(15 * memory.GiB, "a trial", [node])
    with pytest.raises(InputError, match=r"needs an estimated 20.0 GB .* the largest node has "
                                         r"16.0 GB .*lower --batch-size or --max-seq-length"):
        cluster.check_memory(20 * memory.GiB, "a trial", [node])
    bigger = {"worker": {"CPU": 8.0, "memory": 64.0 * memory.GiB}}
    cluster.check_memory(20 * memory.GiB, "a trial", [node], bigger)  # autoscaler can start
    cluster.check_memory(20 * memory.GiB, "a trial", [node], {"worker": None})  # unknown size
    cluster.check_memory(20 * memory.GiB, "a trial", [{"CPU": 8.0}])  # no memory reported


def test_ray_memory_kills_are_recognised_through_tunes_wrapper():
    from ray.exceptions import NodeDiedError, OutOfMemoryError

    kill = OutOfMemoryError("Task was killed due to the node running low on memory.")
    try:
        try:
            raise kill
        except OutOfMemoryError as e:
            raise RuntimeError(f"Caught unexpected exception: {e}") from e
    except RuntimeError as wrapped:
        assert memory.is_memory_kill(wrapped) and memory.is_lost_worker(wrapped)
    # the driver's message alone (a traceback printed elsewhere, the cause dropped)
    assert memory.is_memory_kill(RuntimeError(
        "Caught unexpected exception: 1 worker(s) were killed due to the node running low "
        "on memory"))
    assert memory.is_lost_worker(NodeDiedError("node 1 died"))
    assert not memory.is_memory_kill(RuntimeError("shape mismatch"))
    assert not memory.is_lost_worker(ValueError("bad label"))


def test_a_python_memory_error_in_a_trial_is_retried_not_stored():
    from ray.exceptions import OutOfMemoryError

    from reinit_tune.sweep.trial import is_infrastructure_failure

    assert is_infrastructure_failure(MemoryError())
    assert is_infrastructure_failure(OutOfMemoryError("killed"))


# -- tokenization ------------------------------------------------------------------------
def test_chunked_tokenization_is_exactly_one_call(tiny_bert):
    from reinit_tune import data

    tokenizer = data.load_tokenizer(tiny_bert)
    rng = np.random.default_rng(0)
    words = ["a", "movie", "of", "long", "scenes", "unbelievably", "x" * 150]
    first = [" ".join(rng.choice(words, n)) for n in rng.integers(1, 400, 40)]
    second = [" ".join(rng.choice(words, n)) for n in rng.integers(1, 400, 40)]
    whole = tokenizer(first, second, truncation=True, max_length=31)
    chunks = data.text_chunks([first, second], limit=500)
    assert len(chunks) > 5 and sum(len(c[0]) for c in chunks) == 40
    ids = [row for a, b in chunks
           for row in tokenizer(a, b, truncation=True, max_length=31)["input_ids"]]
    assert ids == whole["input_ids"]


# VmHWM, not ru_maxrss: a child's ru_maxrss starts at its forking parent's peak (pytest's,
# here), which would hide any growth below it (benchmarks.common.peak_rss_bytes)
LONG_TEXTS = textwrap.dedent("""
    import sys
    from benchmarks.common import peak_rss_bytes
    from reinit_tune import data
    data.load_tokenizer(sys.argv[2])("warm up", truncation=True, max_length=32)
    data.load_split("sst2", "train", sys.argv[1])  # imports datasets; the texts stay mapped
    before = peak_rss_bytes()
    split = data.encoded_split("sst2", "train", sys.argv[2], 32, sys.argv[1])
    grew = peak_rss_bytes() - before
    print(len(split), int(split.lengths.max()), grew)
""")


def test_ten_thousand_word_texts_are_truncated_in_bounded_memory(tmp_path, tiny_bert):
    """A task of 10,000-word texts at --max-seq-length 32: every example is 32 tokens and
    tokenizing 400 of them grows the process by far less than the ~800 MB one tokenizer
    call over the batch took."""
    rng = np.random.default_rng(0)
    vocab = ["movie", "actor", "story", "great", "dull", "plot", "scene"]
    rows = 400
    texts = [" ".join(rng.choice(vocab, 10_000)) for _ in range(rows)]
    (tmp_path / "sst2").mkdir()
    pq.write_table(pa.table({"sentence": texts, "label": rng.integers(0, 2, rows),
                             "idx": np.arange(rows)}), tmp_path / "sst2" / "train.parquet")
    out = subprocess.run([sys.executable, "-c", LONG_TEXTS, str(tmp_path), tiny_bert],
                         capture_output=True, text=True, check=True, cwd=REPO,
                         env={**__import__("os").environ,
                              "REINIT_TUNE_CACHE": str(tmp_path / "cache")})
    count, longest, grew = map(int, out.stdout.split()[-3:])
    assert count == rows and longest == 32
    # > 0: the measure sees this process's own growth (tokenizing does allocate)
    assert 0 < grew < 300 * 2**20, f"tokenizing grew the process by {grew / 2**20:.0f} MB"


def test_memory_cost_and_packs_count_parameters_one_way():
    """One parameter count (``ModelShape.parameter_count``): bert-base's 110M, less the
    pooler; the pack estimate is 16 bytes of it per fp32 member plus activations (18 with
    bf16's weight copies)."""
    from reinit_tune.sweep import cost, packs

    base = ModelShape(12, 12, 768)
    assert base.parameter_count() == pytest.approx(109.5e6, rel=0.01)
    activations = packs.member_bytes(base, 1, 8, bf16=False) - 16 * base.parameter_count()
    assert 0 < activations < 16 * base.parameter_count() / 100
    assert packs.member_bytes(base, 1, 8) - packs.member_bytes(base, 1, 8, bf16=False) == \
        2 * base.parameter_count()
    large, note = cost.recorded_coefficients(ModelShape(24, 16, 1024), "fp32")
    recorded = cost.RECORDED[(12, 768, "fp32")]
    assert large.step_s == pytest.approx(
        recorded.step_s * ModelShape(24, 16, 1024).parameter_count() / base.parameter_count())
