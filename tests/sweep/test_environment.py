"""The process environment a sweep sets for Ray (``reinit_tune.sweep.environment``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.helpers import REPO

# a local Ray instance started as a sweep starts it, and the niceness of a task's worker
NICENESS = """
import os, sys
if sys.argv[1] == "sweep":
    from reinit_tune.sweep import environment
    environment.prepare()
os.environ["RAY_AUTH_MODE"] = "disabled"
import ray
ray.init(num_cpus=1, include_dashboard=False, logging_level="error")
print("niceness", ray.get(ray.remote(lambda: os.nice(0)).remote()))
ray.shutdown()
"""


@pytest.mark.ray
def test_a_sweeps_trial_workers_run_at_normal_priority():
    """Ray starts its workers at nice 15 (a trial then starves beside any busy process of
    normal priority); a sweep's local Ray instance runs them at 0, and a niceness the user
    set in RAY_worker_niceness is kept."""
    # Ray's own temp dir, short: a socket path longer than 107 bytes fails
    temp = tempfile.mkdtemp(prefix="rt-nice-", dir="/tmp")
    base = {k: v for k, v in os.environ.items()
            if k not in ("RAY_ADDRESS", "RAY_worker_niceness")} | {"RAY_TMPDIR": temp}

    def niceness(mode: str, **env: str) -> int:
        run = subprocess.run([sys.executable, "-c", NICENESS, mode], cwd=REPO,
                             capture_output=True, text=True, timeout=300,
                             env={**base, **env})
        assert run.returncode == 0, run.stdout + run.stderr
        return int(run.stdout.split("niceness")[-1])

    try:
        assert niceness("plain") == 15  # Ray's own default: what the sweep must undo
        assert niceness("sweep") == 0
        assert niceness("sweep", RAY_worker_niceness="5") == 5
    finally:
        shutil.rmtree(temp, ignore_errors=True)
