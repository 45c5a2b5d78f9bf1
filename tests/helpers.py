"""Test helpers: tiny models saved like a user's, synthetic results stores, the command line
run in-process, and Ray clusters of several nodes on loopback. Fixtures are in ``conftest.py``."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

from reinit_tune import EMBEDDED_MODEL, TrialConfig, store
from reinit_tune.analysis import frames
from reinit_tune.verdicts.depth import blocks

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SHARED_GLUE = SHARED_DATA / "glue"


# -- models -------------------------------------------------------------------------------
def save_tiny_bert(path: Path, *, layers: int = 4, hidden: int = 32, heads: int = 4,
                   intermediate: int = 64, seed: int = 0) -> Path:
    """A small randomly initialized BERT with the embedded MiniLM's real tokenizer, saved as
    a local ``save_pretrained`` folder: a stand-in "pretrained" checkpoint for unit tests."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from reinit_tune.model.shape import resolve_model

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=intermediate, max_position_embeddings=128,
    )
    model = BertModel(config)
    with torch.no_grad():  # make LayerNorms and biases non-trivial, as in a trained checkpoint
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(resolve_model(EMBEDDED_MODEL)).save_pretrained(path)
    return path



# -- the command line ---------------------------------------------------------------------
def cli(capsys, *argv: str) -> tuple[int, str]:
    """Run ``reinit-tune ARGV`` in this process; (exit status, stdout + stderr)."""
    from reinit_tune.cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def trial_count(output: str) -> int:
    """The grid size a sweep printed (its ``total: N trials`` line)."""
    line = next(ln for ln in output.splitlines() if ln.startswith("total:"))
    return int(line.split()[1])


# -- synthetic stores ---------------------------------------------------------------------
class SyntheticStore:
    """A results folder filled with rows written through the real store functions."""

    def __init__(self, root):
        self.root = root

    def add(self, experiment: str, task: str, score: float, *, seed: int = 0,
            train_size=5000, reinit_layers=(), epochs: int = 3, model: str = EMBEDDED_MODEL,
            epoch_scores: list[float] | None = None, epoch_losses: list[float] | None = None,
            num_layers: int = 6, majority: float | None = None, chance: float | None = None,
            status: str = "ok", data_source: str | None = None, **fields) -> str:
        config = TrialConfig(model, task, train_size=train_size, seed=seed,
                             reinit_layers=tuple(reinit_layers), epochs=epochs,
                             experiment=experiment, **fields)
        metric = config.task_spec.primary
        scores = epoch_scores or [score] * epochs
        losses = epoch_losses or [0.5] * epochs
        examples = train_size if isinstance(train_size, int) else 1000
        reports = [{"epoch": e + 1, "train_loss": 0.4, "eval_loss": losses[e],
                    f"eval_{metric}": scores[e], "score": scores[e], "train_time_s": 1.0,
                    "eval_time_s": 0.5, "train_examples_per_s": 10.0,
                    "train_examples": examples, "setup_time_s": 0.1, "device": "cpu",
                    "precision_used": "fp32", "node_id": "n", "majority_score": majority,
                    "chance_score": chance, "data_source": data_source,
                    "versions": json.dumps({"torch": "2.x", "python": "3.11"})}
                   for e in range(epochs)]
        if status != "ok":
            reports = reports[:1]
        row = store.trial_row(config, reports, num_layers=num_layers, status=status,
                              error=None if status == "ok" else "RuntimeError: boom")
        store.write_trial(self.root, row, store.epoch_rows(config, reports))
        return config.trial_id

    def load(self) -> frames.Store:
        return frames.load(self.root)


def permutation_store(synth: SyntheticStore, layers: int = 6) -> tuple[list, dict]:
    """Permutation runs of three tasks (one permutation missing for QNLI) and their baselines;
    returns the layer orders and the score of each (task, order)."""
    rng = np.random.default_rng(1)
    orders = [tuple(rng.permutation(layers).tolist()) for _ in range(6)]
    effect = rng.normal(0, 0.05, len(orders))
    expected = {}
    for task, offset in (("sst2", 0.7), ("cola", 0.2), ("qnli", 0.65)):
        for n, order in enumerate(orders):
            if task == "qnli" and n == 5:
                continue  # a permutation missing for one task leaves the pairs with it
            s = offset + effect[n] + rng.normal(0, 0.01)
            expected[(task, order)] = s
            synth.add("permutations", task, s, seed=n, layer_order=order)
        for seed in range(3):
            synth.add("permutations", task, offset + 0.2 + 0.01 * seed, seed=seed)
            synth.add("permutations", task, offset - 0.2 + 0.02 * seed, seed=seed,
                      reinit_layers=range(layers))
    return orders, expected


# -- a two-node Ray cluster ---------------------------------------------------------------
# Each node gets its own custom resource (``rt_head``, ``rt_worker``) so a test can tell them
# apart. The cluster lives under its own ``--temp-dir`` with its own ports, so its address file
# (``ray_current_cluster``) never lands in the machine-wide ``/tmp/ray``, where every other
# ``ray.init()`` on this machine would find it and join it. Nodes run ``ray start --block`` in
# their own sessions and are stopped by process group id, never with a global ``ray stop``.
RAY = str(Path(sys.executable).with_name("ray"))
NODE_RESOURCES = ("rt_head", "rt_worker")


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports: every socket stays bound until all are chosen, so two
    calls in a row cannot hand out the same port."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


_NODE_PORTS = ("--node-manager-port", "--object-manager-port", "--metrics-export-port",
               "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
               "--runtime-env-agent-port")


def _node_flags(resource: str, ports: list[int]) -> list[str]:
    flags = ["--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
             "--resources", json.dumps({resource: 1}), "--disable-usage-stats",
             "--object-store-memory", str(100 * 2**20)]
    for option, port in zip(_NODE_PORTS, ports, strict=True):
        flags += [option, str(port)]
    return flags


def _wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ray start exited with {proc.returncode}:\n{log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.3)
    raise TimeoutError(f"the Ray head did not open port {port}:\n{log.read_text()}")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM makes ``ray start --block`` stop its node; the group kill catches stragglers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
    kill_node(proc)


def kill_node(proc: subprocess.Popen) -> None:
    """SIGKILL a node started by ``ray_cluster``: its raylet, GCS (the head's) and workers,
    as when a machine dies."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group is this node's own (start_new_session)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


@dataclass
class RayNodes:
    address: str
    head: subprocess.Popen
    workers: list[subprocess.Popen]
    logs: Path


def _node_count(address: str) -> int:
    """Alive nodes in the GCS's node table, read in this process as Ray's own test clusters
    wait for a node (``ray._private.services.wait_for_node``): a ``ray status`` process a
    poll cost seconds of a loaded machine's CPU."""
    from ray._private.state import GlobalState
    from ray._raylet import GcsClientOptions

    state = GlobalState()
    state._initialize_global_state(GcsClientOptions.create(
        address, None, allow_cluster_id_nil=True, fetch_cluster_id_if_nil=False))
    try:
        return sum(1 for node in state.node_table() if node["Alive"])
    finally:
        state.disconnect()


@contextlib.contextmanager
def ray_cluster(workers: int = 1, timeout: float = 120,
                worker_gpus: int = 0) -> Iterator[RayNodes]:
    """A head plus ``workers`` worker nodes, each its own ``ray start`` on loopback with one
    CPU and a resource of its own (``NODE_RESOURCES``: ``rt_head``, ``rt_worker``,
    ``rt_worker2``...); workers start one after another, each once the previous one has
    joined (two joining at once can stall one of them). ``worker_gpus``: the GPUs each worker
    declares (as a ``ray up`` GPU worker does; none need exist)."""
    temp = Path(tempfile.mkdtemp(prefix="rt-ray-", dir="/tmp"))  # short: socket path limit
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    ports = free_ports(2 + len(_NODE_PORTS) * (1 + workers))
    port, dashboard, ports = ports[0], ports[1], ports[2:]
    procs: list[subprocess.Popen] = []

    def start(args: list[str], log: Path) -> subprocess.Popen:
        with log.open("w") as out:
            proc = subprocess.Popen([RAY, "start", *args], env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc

    def node_ports(i: int) -> list[int]:
        return ports[i * len(_NODE_PORTS):(i + 1) * len(_NODE_PORTS)]

    try:
        head = start(["--head", "--port", str(port), "--temp-dir", str(temp),
                      "--include-dashboard", "false", "--dashboard-port", str(dashboard),
                      *_node_flags(NODE_RESOURCES[0], node_ports(0))],
                     temp / "head.log")
        _wait_for_port(port, head, temp / "head.log", timeout)
        address = f"127.0.0.1:{port}"
        started = []
        for i in range(workers):
            resource = NODE_RESOURCES[1] + (str(i + 1) if i else "")
            started.append(start(["--address", address,
                                  *_node_flags(resource, node_ports(i + 1)),
                                  "--num-gpus", str(worker_gpus)],
                                 temp / f"worker{i + 1}.log"))
            # every worker joins before the test goes on (a sweep started before its
            # worker joined can run every trial on the head)
            deadline = time.monotonic() + timeout
            while _node_count(address) < i + 2:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"worker {i + 1} did not join:\n"
                                       + (temp / f"worker{i + 1}.log").read_text())
                time.sleep(0.2)
        yield RayNodes(address, head, started, temp)
    finally:
        # a worker node whose head is gone ignores SIGTERM for the GCS reconnection timeout
        # (30 s): with the head dead nothing is left to stop gracefully, so each is killed
        headless = not procs or procs[0].poll() is not None
        for proc in reversed(procs):
            if headless:
                kill_node(proc)
            else:
                stop(proc)
        shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def two_node_cluster(timeout: float = 120) -> Iterator[str]:
    """Yield the address (``127.0.0.1:port``) of a head plus one worker node."""
    with ray_cluster(1, timeout) as nodes:
        yield nodes.address


# Tiny random configs of every supported architecture (3 blocks, hidden 32, 4 heads, BERT's
# vocabulary so the embedded tokenizer serves them all).
FAMILIES = ("bert", "roberta", "xlm-roberta", "electra", "distilbert", "deberta-v2", "mpnet",
            "gpt2", "llama")


def tiny_config(family: str, layers: int = 3):
    from transformers import AutoConfig

    common = dict(vocab_size=30522, num_hidden_layers=layers, num_attention_heads=4,
                  hidden_size=32, intermediate_size=64, max_position_embeddings=128)
    if family == "distilbert":
        common = dict(vocab_size=30522, n_layers=layers, n_heads=4, dim=32, hidden_dim=64,
                      max_position_embeddings=128)
    elif family == "gpt2":
        common = dict(vocab_size=30522, n_layer=layers, n_head=4, n_embd=32, n_inner=64,
                      n_positions=128)
    elif family == "llama":
        common.update(num_key_value_heads=2)  # grouped-query attention
    elif family in ("roberta", "xlm-roberta"):
        common.update(max_position_embeddings=130, type_vocab_size=1, pad_token_id=0)
    elif family == "deberta-v2":
        common.update(relative_attention=True, pos_att_type=["p2c", "c2p"],
                      position_buckets=16, max_relative_positions=64)
    return AutoConfig.for_model(family, **common)


def save_tiny_model(path: Path, family: str, *, layers: int = 3, seed: int = 0) -> Path:
    """A random model of ``family`` and the embedded tokenizer (without segment ids where the
    family has none), saved as a local folder that loads like a user's checkpoint."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from reinit_tune.model.shape import resolve_model
    from reinit_tune.model.stacks import ARCHITECTURES

    torch.manual_seed(seed)
    model = AutoModel.from_config(tiny_config(family, layers))
    with torch.no_grad():  # non-trivial norms and biases, as in a trained checkpoint
        for name, p in model.named_parameters():
            if "norm" in name.lower() or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(EMBEDDED_MODEL))
    tokenizer.save_pretrained(path)
    arch = ARCHITECTURES[family]
    if not arch.segments or family in ("roberta", "xlm-roberta"):
        config_file = path / "tokenizer_config.json"
        config = json.loads(config_file.read_text())
        config["model_input_names"] = ["input_ids", "attention_mask"]
        config_file.write_text(json.dumps(config))
    return path


def screenshot_script():
    """``scripts/report_screenshot.py`` as a module; skips the test where no Chromium is
    installed (``apt-get install chromium``)."""
    import pytest

    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import report_screenshot
    finally:
        sys.path.pop(0)
    if report_screenshot.chromium() is None:
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    return report_screenshot


# -- sweep processes (reliability and signal tests) --------------------------------------
def start_sweep(args: list[str], env: dict, started: list) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "sweeps/progressive.py", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    started.append(proc)
    return proc


def stored(results: Path) -> set[Path]:
    folder = results / store.TRIALS
    return set(folder.glob("*.parquet")) if folder.is_dir() else set()


def wait_for_rows(proc: subprocess.Popen, results: Path, more_than: int, timeout=240) -> None:
    deadline = time.monotonic() + timeout
    while len(stored(results)) <= more_than:
        if proc.poll() is not None:
            _pytest_fail(f"sweep ended early ({proc.returncode}):\n{proc.stdout.read()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            _pytest_fail("no trial finished in time")
        time.sleep(0.2)


def wait_for_trial_on(node: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until a trial trains on ``node`` (a ``ray_cluster`` node): a trial actor inside
    its ``train`` call, so that killing the node kills a running trial, not an idle actor."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in descendants(node.pid):
            with contextlib.suppress(psutil.Error):
                if any(part.startswith("ray::ReinitTuneTrial.train") for part in p.cmdline()):
                    return
        time.sleep(0.1)
    _pytest_fail("no trial started on the node in time")


def descendants(pid: int) -> list:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def reap(processes: list) -> set[str]:
    """Names of the processes (ours) still alive after a grace period; those are killed here,
    by pid. A zombie is dead, only not yet collected by its parent."""
    def alive(p) -> str | None:
        try:
            return None if p.status() == psutil.STATUS_ZOMBIE else p.name()
        except psutil.NoSuchProcess:
            return None

    _, waiting = psutil.wait_procs(processes, timeout=5)
    names = set()
    for p in waiting:
        if (name := alive(p)) is not None:
            names.add(name)
            p.kill()
    return names


def _pytest_fail(message: str) -> None:
    import pytest

    pytest.fail(message)


def diverging_stsb(glue: Path, folder: Path) -> Path:
    """A copy of STS-B whose train labels are finite (pre-flight accepts them) but so large
    that the squared error overflows: every trial on it diverges in its first epoch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.copytree(glue / "stsb", folder / "stsb")
    train = folder / "stsb" / "train.parquet"
    table = pq.read_table(train)
    huge = pa.array([1e30] * len(table), pa.float64())
    pq.write_table(table.set_column(table.schema.get_field_index("label"), "label", huge), train)
    return folder


def driver_lines(output: str) -> str:
    """A sweep's console output without its trial workers' forwarded log lines ("(run_trial
    pid=...) ..."): a worker torn down mid-step by a graceful stop may have Ray print its
    SystemExit there; the command's own lines must hold no traceback."""
    import re

    return "\n".join(ln for ln in output.splitlines() if not re.match(r"\(\S+ pid=\d+\)", ln))


def kill_all(started: list) -> None:
    """Kill every sweep process of ``started`` still running, and what it started: a failed
    assertion must not leave a sweep or its Ray behind."""
    for proc in started:
        if proc.poll() is None:
            children = descendants(proc.pid)
            proc.kill()
            proc.communicate()
            reap(children)


# -- planted stores for the claim verdicts ----------------------------------------------
def plant_progressive(synth: SyntheticStore, task: str, size: int, means: dict, *, seeds: int = 5,
                noise: float = 0.01, layers: int = 6, rng=None, **fields) -> dict:
    """Progressive runs keeping k layers for each k of ``means`` (k -> mean score); each
    seed shifts every k alike (its subset). Returns k -> per-seed scores."""
    rng = rng or np.random.default_rng(0)
    scores = {k: [] for k in means}
    for seed in range(seeds):
        shift = rng.normal(0, noise)
        for k, mean in means.items():
            s = float(mean + shift + rng.normal(0, noise))
            synth.add("progressive", task, s, seed=seed, train_size=size,
                      reinit_layers=range(k, layers), num_layers=layers, **fields)
            scores[k].append(s)
    return {k: np.array(v) for k, v in scores.items()}


SST2_MAJORITY = 0.509  # what predicting SST-2's dev majority class scores


def plant_probes(synth: SyntheticStore, task: str, means: list[float], *, seeds: int = 5,
                 noise: float = 0.005, majority: float = SST2_MAJORITY, size: int = 5000,
                 rng=None) -> dict[int, np.ndarray]:
    """A probe of hidden state k = 0..L (``means[k]``) per seed, trained 10 epochs."""
    rng = rng or np.random.default_rng(7)
    layers = len(means) - 1
    scores = {k: [] for k in range(len(means))}
    for seed in range(seeds):
        for k, mean in enumerate(means):
            s = float(mean + rng.normal(0, noise))
            synth.add("probing", task, s, seed=seed, probe_layer=k, epochs=10,
                      num_layers=layers, train_size=size, majority=majority)
            scores[k].append(s)
    return {k: np.array(v) for k, v in scores.items()}


def plant_localized(synth: SyntheticStore, task: str, means: dict, *, seeds: int = 4,
              noise: float = 0.01, layers: int = 12, rng=None) -> dict:
    """Localized runs: means maps ("kept"|"reinit", block index) and "E"/"F" to scores."""
    rng = rng or np.random.default_rng(1)
    parts = blocks(layers)
    scores = {key: [] for key in means}
    for seed in range(seeds):
        shift = rng.normal(0, noise)
        for key, mean in means.items():
            if key == "E":
                reinit = range(layers)
            elif key == "F":
                reinit = ()
            else:
                kind, index = key
                block = set(parts[index])
                reinit = sorted(set(range(layers)) - block) if kind == "kept" else sorted(block)
            s = float(mean + shift + rng.normal(0, noise))
            synth.add("localized", task, s, seed=seed, reinit_layers=reinit,
                      num_layers=layers)
            scores[key].append(s)
    return {k: np.array(v) for k, v in scores.items()}


def plant_permutations(synth: SyntheticStore, task: str, *, perm_mean: float, effects=None,
                 orders=None, e: float = 0.5, f: float = 0.9, seeds: int = 4,
                 noise: float = 0.01, layers: int = 6, rng=None) -> dict:
    """N permutation runs (one seed each, as the family runs them) and E, F baselines."""
    rng = rng or np.random.default_rng(2)
    orders = orders or [tuple(np.random.RandomState(n).permutation(layers).tolist())
                        for n in range(1, 11)]
    effects = np.zeros(len(orders)) if effects is None else np.asarray(effects)
    perm = []
    for n, (order, effect) in enumerate(zip(orders, effects, strict=True)):
        s = float(perm_mean + effect + rng.normal(0, noise))
        synth.add("permutations", task, s, seed=n, layer_order=order, num_layers=layers)
        perm.append(s)
    base = {"E": [], "F": []}
    for seed in range(seeds):
        for key, mean, reinit in (("E", e, range(layers)), ("F", f, ())):
            s = float(mean + rng.normal(0, noise))
            synth.add("permutations", task, s, seed=seed, reinit_layers=reinit,
                      num_layers=layers)
            base[key].append(s)
    return {"perm": np.array(perm), "E": np.array(base["E"]), "F": np.array(base["F"]),
            "orders": orders}

# -- reading claim verdicts in tests ---------------------------------------------------------
NED = "not enough data"


def verdicts(root, claim: str) -> list:
    """Every verdict row of ``claim`` on the store at ``root``."""
    from reinit_tune.verdicts import BY_ID, evaluate

    return evaluate(store.load_trials(root), [BY_ID[claim]])


def one(rows, task=None, size=None):
    """The one row of ``rows`` for ``task`` (and ``size``); fails naming what there is."""
    found = [r for r in rows if r.task == task and (size is None or r.train_size == size)]
    assert len(found) == 1, [(r.task, r.train_size, r.verdict) for r in rows]
    return found[0]


def paired_t(per_seed):
    """Mean and 95% t interval of per-seed values (statsmodels), as a paired contrast."""
    from statsmodels.stats.weightstats import DescrStatsW

    low, high = DescrStatsW(per_seed).tconfint_mean(0.05)
    return per_seed.mean(), low, high


# -- planted epoch, distance and pair tables (003-C19, 000-C14, 002-C5/C7) ------------------
def plant_epochs_study(tmp_path, size: int, gain5: float, gain10: float, noise: float,
                  seeds: int = 5):
    """variants' epochs study on SST-2: 10-epoch runs for k = 0, 3, 6 with the dev score
    flat at epochs 1-3, then + gain5 from epoch 5 on and + gain10 at epoch 10; returns
    the planted per-seed differences d[(k, e)] = s(e) - s(3)."""
    rng = np.random.default_rng(21)
    synth = SyntheticStore(tmp_path)
    planted = {}
    for seed in range(seeds):
        for k, base in ((0, 0.6), (3, 0.75), (6, 0.85)):
            s = [base + rng.normal(0, 0.001) for _ in range(10)]
            s[4:] = [v + gain5 + rng.normal(0, noise) for v in s[4:]]
            s[9] += gain10 - gain5 + rng.normal(0, noise)
            synth.add("variants", "sst2", s[-1], seed=seed, train_size=size, epochs=10,
                      epoch_scores=s, reinit_layers=range(k, 6))
            for e in (5, 10):
                planted.setdefault((k, e), []).append(s[e - 1] - s[2])
    return {key: np.array(v) for key, v in planted.items()}


def plant_distances(tmp_path, *, shift: float, noise: float, seeds: int = 6):
    """000-distance runs of SST-2 at 500 and 5,000 examples: d_l = (1 + 0.3 l) x (1 + shift)
    at the larger size, with multiplicative noise; returns d[size][seed][l]."""
    rng = np.random.default_rng(11)
    synth = SyntheticStore(tmp_path)
    planted = {}
    for size, factor in ((500, 1.0), (5000, 1.0 + shift)):
        for seed in range(seeds):
            tid = synth.add("000-distance", "sst2", 0.9, seed=seed, train_size=size)
            d = [(1 + 0.3 * layer) * factor * math.exp(rng.normal(0, noise))
                 for layer in range(1, 7)]
            planted.setdefault(size, []).append(d)
            store.write_similarity(tmp_path, tid, [
                {"trial_id": tid, "layer": layer, "w_output_spectral_pretrained": d[layer - 1]}
                for layer in range(1, 7)])
    return planted


def plant_pairs(root, curves: dict, seeds: int = 4, task_curves: dict | None = None):
    """002-dynamics trials of each task of ``curves`` (task -> JS per layer 1..6 of a seed
    pair), their seed pairs, and, with ``task_curves`` ((a, b) -> (JS, SVCCA) per layer),
    the pairs of two tasks at each seed. Returns the planted curves per pair kind."""
    rng = np.random.default_rng(4)
    synth = SyntheticStore(root)
    ids = {(t, s): synth.add("002-dynamics", t, 0.8, seed=s, train_size=2000)
           for t in curves for s in range(seeds)}
    planted = {}

    def write(kind, a, b, js, svcca):
        rows = [{"kind": kind, "experiment": "002-dynamics", "trial_a": ids[a],
                 "trial_b": ids[b], "task_a": a[0], "task_b": b[0], "seed_a": a[1],
                 "seed_b": b[1], "layer": layer, "attention_js": js[layer - 1] if layer else None,
                 "svcca_distance": svcca[layer - 1] if layer else 0.1} for layer in range(7)]
        store.write_pairs(root, f"{kind}-{ids[a]}-{ids[b]}", rows)

    for task, js in curves.items():
        for s1, s2 in itertools.combinations(range(seeds), 2):
            noisy = np.array(js) * np.exp(rng.normal(0, 0.05, 6))
            svcca = 0.2 + 0.02 * np.arange(6) + rng.normal(0, 0.005, 6)
            write("seeds", (task, s1), (task, s2), noisy, svcca)
            planted.setdefault(("seeds", task), []).append((noisy, svcca))
    for (a, b), (js, svcca) in (task_curves or {}).items():
        for s in range(seeds):
            noisy = np.array(js) * np.exp(rng.normal(0, 0.05, 6))
            write("tasks", (a, s), (b, s), noisy, np.array(svcca))
            planted.setdefault(("tasks", tuple(sorted((a, b)))), []).append(
                (noisy, np.array(svcca)))
    return planted


def missing(why: str) -> None:
    """Skip a test whose shared data is missing, or fail it where the data is required
    (``REINIT_TUNE_REQUIRE_DATA=1``, as CI sets it): a checkout without the data must not go
    green on skips there."""
    import pytest

    if os.environ.get("REINIT_TUNE_REQUIRE_DATA") == "1":
        pytest.fail(f"{why} (REINIT_TUNE_REQUIRE_DATA=1: the suite needs it here)")
    pytest.skip(why)
