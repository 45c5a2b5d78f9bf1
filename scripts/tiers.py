"""Run a tier of the test suite as README's test commands and CI do: the tests marked ``ray``
one at a time at normal priority, and beside them, at the lowest priority (nice 19), the
tests that start no Ray over the machine's cores (``pytest-xdist``, up to four workers).

The Ray tests leave cores idle (Ray starting, a sweep's single-trial phases, a drill waiting
for a node to be declared dead or a frozen trial to be ended: about a third of the drills'
time on 2 cores); the low-priority tests fill those gaps and give way the moment a Ray test
needs the core, so the Ray tests run about as they would alone (their workers run at normal
priority too: a sweep sets ``RAY_worker_niceness=0``, as does ``tests/conftest.py``). The
Ray tests' output streams; the other tests' is printed when both are done. The exit status
is the Ray tests' if they failed, else the others' (a run whose selection matched no test
counts as passed where the other ran tests).

    python scripts/tiers.py                 # every test not marked slow (README's test command)
    python scripts/tiers.py --slow          # the drills: the tests marked slow
    python scripts/tiers.py -- -x tests/sweep   # pytest arguments for both runs
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

NONE_COLLECTED = 5  # pytest's exit status when a selection matched no test


def commands(slow: bool, extra: list[str]) -> tuple[list[str], list[str]]:
    """The pytest commands of the Ray tests and of the tests that start no Ray."""
    tier = "slow" if slow else "not slow"
    pytest = [sys.executable, "-m", "pytest"]
    return ([*pytest, "-m", f"ray and {tier}", *extra],
            [*pytest, "-m", f"not ray and {tier}", "-n", "auto", "--maxprocesses", "4",
             *extra])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slow", action="store_true", help="the drills (tests marked slow)")
    p.add_argument("pytest_args", nargs="*", help="after --: passed to both pytest runs")
    args = p.parse_args(argv)
    with_ray, without_ray = commands(args.slow, args.pytest_args)
    began = time.monotonic()
    with tempfile.TemporaryFile("w+") as log:
        beside = subprocess.Popen(without_ray, stdout=log, stderr=subprocess.STDOUT,
                                  preexec_fn=lambda: os.nice(19))
        try:
            ray_code = subprocess.call(with_ray)
            ray_s = time.monotonic() - began
            code = beside.wait()
        finally:
            if beside.poll() is None:  # interrupted: the tests beside go with this process
                beside.terminate()
                beside.wait()
        log.seek(0)
        print(f"\n{'=' * 20} the tests that start no Ray (run beside, at nice 19) {'=' * 20}")
        sys.stdout.write(log.read())
    print(f"tiers: ray tests exit {ray_code} ({ray_s:.0f} s); tests without Ray exit {code}; "
          f"{time.monotonic() - began:.0f} s in all", flush=True)
    if {ray_code, code} == {NONE_COLLECTED}:
        return NONE_COLLECTED
    # a selection (a folder, -k) may leave one of the two runs nothing to collect
    return next((c for c in (ray_code, code) if c not in (0, NONE_COLLECTED)), 0)


if __name__ == "__main__":
    sys.exit(main())
