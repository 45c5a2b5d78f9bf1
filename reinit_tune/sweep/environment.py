"""The process environment a sweep sets for Ray and Tune, in one place and once: ``prepare``
runs before the sweep imports or starts Ray, since Ray reads some of these variables only
when first imported and Tune reads the others when a run starts.

- ``RAY_AUTH_MODE=token`` where this process is about to start its own local Ray instance
  (``cluster.secure_local_ray``: Ray listens on every network interface);
- ``RAY_worker_niceness=0`` (a value the user set is kept): Ray starts its worker processes
  at nice 15, so on a machine whose other processes run at normal priority a trial gets
  almost none of the CPU (the quickstart beside 20 busy processes on 2 cores: its trial
  workers still importing torch after 17 minutes, 0 of 12 trials done); a sweep's trials are
  the work the user asked for. Ray reads it when this process starts its local instance;
  a cluster's nodes take it from the environment of their own ``ray start``;
- ``RAY_COLOR_PREFIX=0`` where the output is a file or a pipe (or ``NO_COLOR`` is set): Ray
  colours each worker's log prefix with escape codes;
- ``TUNE_DISABLE_SIGINT_HANDLER=1``: Ctrl+C reaches ``reinit_tune.sweep.signals`` first,
  which asks Tune to stop through its SIGUSR1 handler;
- ``RAY_AIR_NEW_OUTPUT`` and ``TUNE_PRINT_ALL_TRIAL_ERRORS`` off unless verbose: Tune's newer
  console output prints an experiment box and, with TensorBoard logging, a hint naming a
  temporary staging folder even at verbose 0, and a traceback for each failed attempt; its
  classic reporter prints nothing, which leaves one line per trial (``StoreWriter``; the whole
  error stays in the trial's error.txt in Tune's folder). Verbose: Tune's own table.

``TUNE_MAX_PENDING_TRIALS_PG`` is the exception: it depends on the cluster's size, so
``reinit_tune.sweep.launch`` sets it once Ray is connected.
"""

from __future__ import annotations

import os
import sys

from reinit_tune.sweep import cluster


def prepare(verbose: bool = False) -> None:
    """Set every variable above for a sweep about to run (``verbose``: Tune's own output)."""
    cluster.secure_local_ray()
    os.environ.setdefault("RAY_worker_niceness", "0")
    if os.environ.get("NO_COLOR") or not sys.stderr.isatty():
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    os.environ["RAY_AIR_NEW_OUTPUT"] = "1" if verbose else "0"
    os.environ["TUNE_PRINT_ALL_TRIAL_ERRORS"] = "1" if verbose else "0"
