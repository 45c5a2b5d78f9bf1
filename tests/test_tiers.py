"""scripts/tiers.py, the test commands' runner, on a folder of its own tests: the tests marked
``ray`` run at the caller's priority, the others beside them at nice 19, each tier's own
selection, and the exit status says whether either failed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.helpers import REPO

SUITE = textwrap.dedent("""
    import os, pathlib, pytest

    OUT = pathlib.Path(os.environ["TIERS_OUT"])

    @pytest.mark.ray
    def test_with_ray():
        (OUT / "ray").write_text(str(os.nice(0)))

    def test_without_ray():
        (OUT / "free").write_text(str(os.nice(0)))
        assert os.environ.get("FAIL") != "free"

    @pytest.mark.ray
    @pytest.mark.slow
    def test_slow_with_ray():
        (OUT / "slow").write_text(str(os.nice(0)))
""")


def test_the_ray_tests_keep_their_priority_the_others_run_beside_at_nice_19(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_it.py").write_text(SUITE)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    ray: r\n    slow: s\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}

    def run(*args: str, **extra: str) -> tuple[subprocess.CompletedProcess, dict]:
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        out.mkdir()
        done = subprocess.run([sys.executable, str(REPO / "scripts" / "tiers.py"), *args, "--",
                               "-p", "no:cacheprovider", "-q"],
                              cwd=suite, env={**env, "TIERS_OUT": str(out), **extra},
                              capture_output=True, text=True, timeout=300)
        return done, {p.name: int(p.read_text()) for p in out.iterdir()}

    ours = os.nice(0)
    done, seen = run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert seen == {"ray": ours, "free": min(ours + 19, 19)}  # the slow test: not this tier
    assert "tests without Ray exit 0" in done.stdout and "ray tests exit 0" in done.stdout

    done, seen = run(FAIL="free")  # a failure beside the Ray tests fails the command
    assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout
    assert set(seen) == {"ray", "free"}

    done, seen = run("--slow")  # no slow test without Ray: that run collects none, passing
    assert done.returncode == 0, done.stdout + done.stderr
    assert seen == {"slow": ours}
