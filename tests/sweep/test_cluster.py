"""The cluster: cluster.yaml passes Ray's own cluster-config validation, capacity
checks read the autoscaler's node types, one sweep command runs across two Ray nodes, and an
address that is not Ray is refused."""

from __future__ import annotations

import copy
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from importlib import metadata

import pytest
import yaml

from reinit_tune import store
from reinit_tune.errors import InputError
from reinit_tune.sweep import cluster
from tests.helpers import NODE_RESOURCES, REPO, ray_cluster, stored, two_node_cluster

CLUSTER_YAML = REPO / "cluster.yaml"


def load_cluster_yaml() -> dict:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def gcp_variant(aws: dict) -> dict:
    """cluster.yaml with its commented GCP block swapped in, as its comment says to do."""
    text = CLUSTER_YAML.read_text().split("# --- GCP variant", 1)[1]
    block = "\n".join(ln[2:] for ln in text.splitlines() if ln.startswith("#   ")
                      or re.match(r"# [a-z_]+:", ln))
    config = {**copy.deepcopy(aws), **yaml.safe_load(block)}
    setup = config["setup_commands"]
    config["setup_commands"] = [c.replace("s3://", "gs://") for c in setup]
    return config


@pytest.mark.parametrize("variant", ["aws", "gcp"])
def test_cluster_yaml_passes_rays_cluster_config_validation(variant):
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = load_cluster_yaml()
    if variant == "gcp":
        config = gcp_variant(config)
    assert config["provider"]["type"] == variant
    # What `ray up` does before it talks to the cloud: merge the provider's defaults, then
    # check the result against Ray's JSON schema and its cross-field rules.
    prepared = prepare_config(config)
    validate_config(prepared)
    workers = {n: t for n, t in prepared["available_node_types"].items()
               if n != prepared["head_node_type"]}
    assert all(t["min_workers"] == 0 and t["max_workers"] > 0 for t in workers.values())
    assert all(t["resources"].get("GPU", 0) >= 1 for t in workers.values())
    assert prepared["available_node_types"][prepared["head_node_type"]]["resources"] == {"CPU": 0}
    with pytest.raises(Exception, match="setup_comands"):  # the validation is not a rubber stamp
        validate_config({**prepared, "setup_comands": []})


def test_cluster_yaml_installs_this_project_with_pinned_dependencies():
    config = load_cluster_yaml()
    assert config["file_mounts"]["~/reinit-tune"] == "."
    setup = "\n".join(config["setup_commands"])
    assert "-c ~/reinit-tune/cluster-constraints.txt" in setup
    assert '-e "$HOME/reinit-tune[embedded]"' in setup
    assert re.search(r"REINIT_TUNE_STORAGE=s3://\S+", setup)
    assert "RAY_AUTH_MODE=token" in setup and "~/.ray/auth_token" in config["file_mounts"]
    pins = dict(
        ln.split("==") for ln in (REPO / "cluster-constraints.txt").read_text().splitlines()
        if ln and not ln.startswith("#")
    )
    wanted = [r for r in metadata.requires("reinit-tune")
              if "extra ==" not in r or 'extra == "embedded"' in r]
    names = {re.split(r"[\[<>=!~; ]", dep)[0] for dep in wanted}
    assert names <= set(pins), f"not pinned: {sorted(names - set(pins))}"


def test_capacity_check_reads_the_autoscalers_node_types(caplog):
    scalable = cluster.autoscaler_node_types(CLUSTER_YAML)  # the file ray up installs
    assert scalable == {"head": {"CPU": 0.0}, "gpu_worker": {"CPU": 16.0, "GPU": 1.0},
                        "gpu_worker_8x": {"CPU": 96.0, "GPU": 8.0}}
    head_only = [{"CPU": 0.0}]  # before the first worker starts
    with caplog.at_level("INFO", logger="reinit_tune"):
        cluster.check_resources(4, 0.25, head_only, scalable)
    assert "the autoscaler will start one of ['gpu_worker', 'gpu_worker_8x']" in caplog.text
    cluster.check_resources(12, 8, head_only, scalable)
    with pytest.raises(InputError, match="exceeds the 8 GPUs of the largest node"):
        cluster.check_resources(1, 9, head_only, scalable)
    with pytest.raises(InputError, match="asks for GPUs but the Ray cluster has none and its "
                                         "autoscaler can start none"):
        cluster.check_resources(1, 1, head_only, {"head": {"CPU": 0.0},
                                                  "cpu_worker": {"CPU": 32.0}})
    with caplog.at_level("WARNING", logger="reinit_tune"):
        cluster.check_resources(1, 1, head_only, {"gpu_worker": None})  # auto-detected later
    assert "leave resources to auto-detection" in caplog.text


def nodes_of(address: str) -> dict[str, dict]:
    """node id → resources, once both nodes have joined (asked from a separate driver)."""
    script = (
        "import json, sys, time, ray\n"
        "ray.init(address=sys.argv[1], logging_level='error')\n"
        "for _ in range(240):\n"
        "    nodes = [n for n in ray.nodes() if n['Alive']]\n"
        "    if len(nodes) == 2:\n"
        "        break\n"
        "    time.sleep(0.5)\n"
        "print(json.dumps({n['NodeID']: n['Resources'] for n in nodes}))\n"
    )
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    out = subprocess.run([sys.executable, "-c", script, address], env=env, text=True,
                         capture_output=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.ray
def test_one_sweep_command_runs_across_two_nodes(tiny_bert, glue_dir, tmp_path):
    results = tmp_path / "results"
    with two_node_cluster() as address:
        nodes = nodes_of(address)
        assert sorted(r for res in nodes.values() for r in res if r.startswith("rt_")) == sorted(
            NODE_RESOURCES)
        env = {**os.environ, "RAY_ADDRESS": address, "RAY_AUTH_MODE": "disabled",
               "REINIT_TUNE_DATA": str(glue_dir)}
        sweep = subprocess.run(
            [sys.executable, "sweeps/progressive.py", "--model", tiny_bert, "--tasks", "rte",
             "--sizes", "64", "--seeds", "2", "--epochs", "1", "--k", "0", "4",
             "--results", str(results), "--storage", str(tmp_path / "tune"),
             "--cpus-per-trial", "1"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=400,
        )
    out = sweep.stdout + sweep.stderr
    assert sweep.returncode == 0, out[-4000:]
    assert f"joining the Ray cluster at RAY_ADDRESS={address}" in out
    # --gpus-per-trial auto on a cluster without GPUs: CPU trials, said before they start
    assert f"CPU trials: no GPU in the Ray cluster at {address}" in out
    cpus = int(sum(res.get("CPU", 0) for res in nodes.values()))  # 1 per trial: each a slot
    assert f"CPU trials: one trial per Tune trial, up to {cpus} at a time" in out
    assert "4 ran ok, 0 failed" in out
    trials = store.load_trials(results)
    assert len(trials) == 4 and set(trials["status"]) == {"ok"}
    assert set(trials["node_id"]) == set(nodes)  # both nodes ran trials
    assert (tmp_path / "tune").is_dir()  # Tune's storage_path was --storage


@pytest.mark.slow
@pytest.mark.ray
def test_auto_gives_each_pack_a_gpu_on_a_cluster_whose_workers_have_gpus(tiny_bert, glue_dir,
                                                                         tmp_path):
    """A ``ray up``-like mixed cluster: a head without GPUs and a worker declaring one (Ray's
    simulated resources: this machine has no CUDA). With no GPU flag the sweep's trials ask
    for 1 GPU each and go to that worker; no GPU can measure its free memory, so the packs
    are planned for the recorded GPU's, and said so; the worker, given a GPU its PyTorch
    cannot use, refuses in one line naming its node instead of training the GPU-sized pack
    on its CPUs, and the sweep stops with nothing stored as ok."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: its GPU worker would train")
    results = tmp_path / "results"
    with ray_cluster(workers=1, worker_gpus=1) as nodes:
        env = {**os.environ, "RAY_ADDRESS": nodes.address, "RAY_AUTH_MODE": "disabled",
               "REINIT_TUNE_DATA": str(glue_dir)}
        sweep = subprocess.run(
            [sys.executable, "sweeps/progressive.py", "--model", tiny_bert, "--tasks", "rte",
             "--sizes", "32", "--seeds", "1", "--epochs", "1", "--k", "0", "4",
             "--results", str(results), "--storage", str(tmp_path / "tune"),
             "--precision", "fp32"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
        worker = {i for i, res in nodes_of(nodes.address).items() if "GPU" in res}
    out = sweep.stdout + sweep.stderr
    assert sweep.returncode != 0, out[-4000:]
    assert (f"GPU trials: 1 GPU per pack of trials (1 GPU in the Ray cluster at "
            f"{nodes.address}; --gpus-per-trial 0 runs on CPUs)") in out
    assert "--pack-size auto: no GPU of the cluster could measure its free memory; packs " \
           "of up to 2 trials planned for an NVIDIA H200's memory" in out, out[-4000:]
    trials = store.load_trials(results)
    assert len(trials) >= 1 and set(trials["status"]) == {"error"}
    assert len(worker) == 1
    message = trials["error"].iloc[0]
    assert re.fullmatch(r"node \S+ \([\d.]+\) was given 1 GPU by Ray, but its PyTorch is "
                        r"built without CUDA; install a CUDA build of PyTorch on it, or start "
                        r"it with --num-gpus 0 so only CPU trials go there", message), message
    assert message in out and "Traceback" not in out


def test_an_address_that_is_not_ray_is_refused_within_30_s(tiny_bert, glue_dir, tmp_path):
    """Something listens there (the port answers) but it is not Ray's GCS: before, ray.init
    retried for ever printing 'Failed to connect to GCS'."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        accepted: list = []
        threading.Thread(target=lambda: accepted.extend(server.accept() for _ in range(4)),
                         daemon=True).start()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        env = {**os.environ, "RAY_ADDRESS": address, "RAY_AUTH_MODE": "disabled",
               "REINIT_TUNE_DATA": str(glue_dir)}
        start = time.monotonic()
        sweep = subprocess.run(
            [sys.executable, "sweeps/progressive.py", "--model", tiny_bert, "--tasks", "rte",
             "--sizes", "16", "--seeds", "1", "--epochs", "1", "--k", "0",
             "--results", str(tmp_path / "results"), "--storage", str(tmp_path / "tune")],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        took = time.monotonic() - start
    out = sweep.stdout + sweep.stderr
    assert sweep.returncode == 2, out[-4000:]
    assert took < 30, out[-4000:]
    assert f"RAY_ADDRESS={address} answers but is not a Ray cluster" in out
    assert "Traceback" not in out and "Failed to connect to GCS" not in out, out
    assert not stored(tmp_path / "results")


def test_a_cluster_that_does_not_answer_a_driver_is_an_environment_error_saying_what_to_check(
        monkeypatch):
    """A head whose port is open but whose Ray does not answer (hung, stopped, another
    token): one line naming the address, how to check it and how to run elsewhere, as an
    environment failure (exit 1), not advice to pass --gpus-per-trial as if that were the
    fix."""
    from reinit_tune.errors import ClusterError

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        monkeypatch.setenv("RAY_ADDRESS", address)
        with pytest.raises(ClusterError) as refused:
            cluster.ask_cluster(address, timeout_s=3)
        monkeypatch.delenv("RAY_ADDRESS")  # the address a `ray start` recorded: named so
        with pytest.raises(ClusterError) as recorded:
            cluster.ask_cluster(address, timeout_s=3)
    assert f"{address} (recorded in {cluster.address_file()}) did not" in str(recorded.value)
    message = str(refused.value)
    assert message.startswith(f"the Ray cluster at {address} did not answer a driver (no "
                              "answer in time)"), message
    assert f"`ray status --address {address}`" in message and "RAY_ADDRESS=local" in message
    assert "\n" not in message


def _token_of(home: str) -> str:
    from pathlib import Path

    from reinit_tune.sweep import cluster as own

    own.ensure_token(Path(home))
    return (Path(home) / ".ray" / "auth_token").read_text()


def test_sweeps_started_at_once_on_a_fresh_machine_share_one_ray_token(tmp_path, monkeypatch):
    """Ray writes a missing token in place, so of two sweeps started at once the second
    replaced the token the first one's cluster held; the first writer now wins for all."""
    from concurrent.futures import ProcessPoolExecutor

    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    with ProcessPoolExecutor(8) as pool:
        tokens = set(pool.map(_token_of, [str(tmp_path)] * 16))
    path = tmp_path / ".ray" / "auth_token"
    assert tokens == {path.read_text()} and re.fullmatch(r"[0-9a-f]{64}", path.read_text())
    assert path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["auth_token"]  # no drafts left
    cluster.ensure_token(tmp_path)  # kept, never rewritten
    assert {path.read_text()} == tokens
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "elsewhere"))
    cluster.ensure_token(tmp_path / "other")  # the user's token source: Ray's to read
    assert not (tmp_path / "other").exists()
