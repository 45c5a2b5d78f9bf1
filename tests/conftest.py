"""Shared fixtures: offline hub settings, the GLUE folder, tiny BERTs saved as local models,
one local Ray instance. Helper functions live in ``tests/helpers.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import SHARED_DATA, SHARED_GLUE, missing, save_tiny_bert

# CI has no hub access: fail fast instead of retrying, and read GLUE from the shared folder.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "REINIT_TUNE_DATA" not in os.environ and SHARED_GLUE.is_dir():
    os.environ["REINIT_TUNE_DATA"] = str(SHARED_GLUE)
# Under pytest-xdist each worker keeps its Ray sessions and the address file `ray start`
# writes in a folder of its own: a sweep in one worker must never join the cluster another
# worker's test started (a bare ray.init() joins the one recorded there). Short: Ray's socket
# paths must fit 107 bytes.
if "PYTEST_XDIST_WORKER" in os.environ and "RAY_TMPDIR" not in os.environ:
    _ray_tmp = Path(f"/tmp/rt-{os.getpid()}-{os.environ['PYTEST_XDIST_WORKER']}")
    _ray_tmp.mkdir(exist_ok=True)
    os.environ["RAY_TMPDIR"] = str(_ray_tmp)


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Tokenized-data cache in a temporary folder, shared by the whole session."""
    os.environ["REINIT_TUNE_CACHE"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def glue_dir() -> Path:
    path = Path(os.environ["REINIT_TUNE_DATA"])
    if not (path / "sst2" / "train.parquet").is_file():
        missing("GLUE data not found; set REINIT_TUNE_DATA")
    return path


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> str:
    return str(save_tiny_bert(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture(scope="session")
def wide_bert(tmp_path_factory) -> str:
    """Wide enough (hidden 128, FFN 512) for tight statistics of reinitialized weights."""
    return str(save_tiny_bert(tmp_path_factory.mktemp("wide-bert"), layers=3, hidden=128,
                              heads=4, intermediate=512))


@pytest.fixture(autouse=True)
def _ray_only_where_marked(request, monkeypatch):
    """The ``ray`` marker says which tests start Ray (``-m "not ray"`` selects the rest): a
    test without it fails where it calls ``ray.init`` in this process, or where a process it
    started began a Ray session (each unmarked test points ``RAY_TMPDIR``, where Ray puts its
    sessions, at a folder of its own)."""
    if request.node.get_closest_marker("ray") is not None:
        yield
        return
    if "ray_local" in request.fixturenames:  # a session fixture: started before any patch
        pytest.fail(f"{request.node.nodeid} uses ray_local: mark it @pytest.mark.ray",
                    pytrace=False)
    import shutil
    import tempfile

    import ray  # a test that stands in for ray.init itself replaces this after

    def refuse(*args, **kwargs):
        raise AssertionError(f"{request.node.nodeid} starts Ray: mark it @pytest.mark.ray")
    monkeypatch.setattr(ray, "init", refuse)
    sessions = Path(tempfile.mkdtemp(prefix="noray-"))  # short: Ray's socket paths fit
    monkeypatch.setenv("RAY_TMPDIR", str(sessions))
    yield
    started = any(sessions.rglob("session_*"))
    shutil.rmtree(sessions, ignore_errors=True)
    if started:
        pytest.fail(f"{request.node.nodeid} started Ray in a process of its own: mark it "
                    "@pytest.mark.ray", pytrace=False)


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the in-process sweep tests, with one CPU: the suite runs
    one test per core (xdist), so a second trial at a time in a test buys no time, while its
    worker's start (torch and transformers imported: ~6 CPU-s) costs a core. Trials run one
    at a time on a worker Tune reuses while their requests agree; tests of trials side by
    side start a Ray of their own (the drills, the benchmarks' smokes)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=1, include_dashboard=False, logging_level="warning")
    yield ray
    ray.shutdown()


@pytest.fixture
def no_ray(monkeypatch):
    """Fail the test if anything tries to join or start Ray (dry runs, bad input)."""
    from reinit_tune.sweep import cluster

    def refuse(job=None):
        raise AssertionError("Ray must not start for a dry run or bad input")
    monkeypatch.setattr(cluster, "connect_ray", refuse)


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread_per_test_process():
    """Under xdist every core already runs a test process: a second torch thread in each
    only contends for the cores (measured: 21% more CPU for the same in-process training on
    2 cores). Trials in Ray workers and in the commands' processes keep their own counts."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # one process: the cores are its own
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread, as a Ray trial with one CPU has; also far faster on a busy machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def small_data(tmp_path_factory, glue_dir) -> Path:
    """A data folder of real rows, small enough for end-to-end tests: SQuAD 2.0 (400 train
    questions, 60 dev questions), and MNLI with dev splits held out from its local train
    subset (the shared data has none: for tests only, never for reported numbers), next to
    the GLUE folder's tasks."""
    import pyarrow.parquet as pq

    if not (SHARED_DATA / "squad_v2" / "validation.parquet").is_file():
        missing("shared SQuAD 2.0 / MNLI data not found")
    root = tmp_path_factory.mktemp("small-data")
    (root / "squad_v2").mkdir()
    squad = SHARED_DATA / "squad_v2"
    pq.write_table(pq.read_table(squad / "train.parquet").slice(0, 400),
                   root / "squad_v2" / "train.parquet")
    pq.write_table(pq.read_table(squad / "validation.parquet").slice(0, 60),
                   root / "squad_v2" / "validation.parquet")
    (root / "mnli").mkdir()
    mnli = pq.read_table(SHARED_DATA / "mnli" / "train.parquet")
    pq.write_table(mnli.slice(0, 600), root / "mnli" / "train.parquet")
    pq.write_table(mnli.slice(9000, 100), root / "mnli" / "validation_matched.parquet")
    pq.write_table(mnli.slice(9100, 100), root / "mnli" / "validation_mismatched.parquet")
    (root / "glue").symlink_to(glue_dir)
    return root



@pytest.fixture
def seen_collapses_only(monkeypatch):
    """Verdicts and seeds on demand without the bound for a collapse mode no run has shown
    (``collapse.possible`` false everywhere): for tests of a claim's own logic at a few seeds
    on small data, where that bound alone would leave every contrast undecided. The bound
    itself is tested in tests/verdicts/test_engine.py and tests/sweep/test_seeds.py."""
    monkeypatch.setattr("reinit_tune.inference.collapse.SMALL_DATA", 0)
