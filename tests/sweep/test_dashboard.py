"""The dashboard opens: a token-protected one says how to get in, and the Jobs page names
the sweep that runs (family, model, results folder)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from reinit_tune.sweep import cluster
from tests.helpers import REPO


def test_a_token_dashboard_says_how_to_open_it(monkeypatch, caplog):
    import ray

    calls = []

    def init(**kwargs):
        calls.append(kwargs)
        return SimpleNamespace(dashboard_url="127.0.0.1:8265")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(cluster, "choose_address", lambda: ("local", "starting a local Ray"))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", "/shared/ray-token")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    job = cluster.name_job("progressive", ["my-bert"], "results/progressive")
    with caplog.at_level(logging.INFO, logger="reinit_tune"):
        cluster.connect_ray(job)
    line = next(r.getMessage() for r in caplog.records if "Ray dashboard" in r.getMessage())
    assert "http://127.0.0.1:8265" in line
    assert "`ray get-auth-token`" in line and "/shared/ray-token" in line
    metadata = calls[0]["job_config"].metadata
    assert metadata["job_name"] == "reinit-tune progressive: my-bert -> results/progressive"
    assert metadata["family"] == "progressive" and metadata["results"] == "results/progressive"

    caplog.clear()
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with caplog.at_level(logging.INFO, logger="reinit_tune"):
        cluster.connect_ray()
    assert "get-auth-token" not in caplog.text  # nothing to paste without tokens


def test_the_token_hint_names_where_the_token_is():
    assert "~" not in cluster.token_hint({})  # the real home folder, not a tilde
    assert str(Path.home() / ".ray" / "auth_token") in cluster.token_hint({})
    assert "RAY_AUTH_TOKEN variable" in cluster.token_hint({"RAY_AUTH_TOKEN": "abc"})


NAMED = """
from reinit_tune.sweep import cluster
cluster.secure_local_ray()
cluster.connect_ray(cluster.name_job("progressive", ["tiny"], "/r/progressive"))
import ray
infos = ray._private.worker.global_worker.gcs_client.get_all_job_info()
print("JOBS", sorted(i.config.metadata.get("job_name", "") for i in infos.values()))
cluster.shutdown_ray()
"""


@pytest.mark.ray
def test_the_ray_job_carries_the_sweeps_name():
    """What the Jobs page's Name column reads: the driver's job metadata in the GCS."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))  # short: socket path limit
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmp)}
    env.pop("RAY_ADDRESS", None)
    try:
        run = subprocess.run([sys.executable, "-c", NAMED], env=env, cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert "JOBS ['reinit-tune progressive: tiny -> /r/progressive']" in run.stdout, (
        run.stdout[-2000:] + run.stderr[-2000:])
