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
@pytest.mark.slow
def test_a_sweeps_trial_workers_run_at_normal_priority():
    """Ray starts its workers at nice 15 (a trial then starves beside any busy process of
    normal priority); a sweep's local Ray instance runs them at 0, and a niceness the user
    set in RAY_worker_niceness is kept."""
    # three Ray instances at once, each with its own temp dir (short: a socket path longer
    # than 107 bytes fails)
    temps = [tempfile.mkdtemp(prefix="rt-nice-", dir="/tmp") for _ in range(3)]
    base = {k: v for k, v in os.environ.items()
            if k not in ("RAY_ADDRESS", "RAY_worker_niceness")}
    cases = [("plain", {}), ("sweep", {}), ("sweep", {"RAY_worker_niceness": "5"})]
    runs: list[subprocess.Popen] = []
    try:
        runs += [subprocess.Popen([sys.executable, "-c", NICENESS, mode], cwd=REPO, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 env={**base, **env, "RAY_TMPDIR": temp})
                for (mode, env), temp in zip(cases, temps, strict=True)]
        outs = [run.communicate(timeout=300)[0] for run in runs]
        assert [run.returncode for run in runs] == [0, 0, 0], outs
        found = [int(out.split("niceness")[-1]) for out in outs]
        # Ray's own default (what the sweep must undo), the sweep's, the user's
        assert found == [15, 0, 5]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
        for temp in temps:
            shutil.rmtree(temp, ignore_errors=True)
