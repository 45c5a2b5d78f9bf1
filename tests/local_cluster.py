"""A two-node Ray cluster on loopback, started with ``ray start`` like a real one.

Each node gets its own custom resource (``rt_head``, ``rt_worker``) so a test can tell them
apart. The cluster lives under its own ``--temp-dir`` with its own ports, so its address file
(``ray_current_cluster``) never lands in the machine-wide ``/tmp/ray``, where every other
``ray.init()`` on this machine would find it and join it. Nodes run ``ray start --block`` in
their own sessions and are stopped by process group id, never with a global ``ray stop``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
NODE_RESOURCES = ("rt_head", "rt_worker")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_flags(resource: str) -> list[str]:
    flags = ["--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
             "--resources", json.dumps({resource: 1}), "--disable-usage-stats",
             "--object-store-memory", str(100 * 2**20)]
    for option in ("--node-manager-port", "--object-manager-port", "--metrics-export-port",
                   "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                   "--runtime-env-agent-port"):
        flags += [option, str(free_port())]
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
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group is this node's own (start_new_session)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


@contextlib.contextmanager
def two_node_cluster(timeout: float = 120) -> Iterator[str]:
    """Yield the address (``127.0.0.1:port``) of a head plus one worker node."""
    temp = Path(tempfile.mkdtemp(prefix="rt-ray-", dir="/tmp"))  # short: socket path limit
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    port = free_port()
    procs: list[subprocess.Popen] = []

    def start(args: list[str], log: Path) -> subprocess.Popen:
        with log.open("w") as out:
            proc = subprocess.Popen([RAY, "start", *args], env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc

    try:
        head = start(["--head", "--port", str(port), "--temp-dir", str(temp),
                      "--include-dashboard", "false", "--dashboard-port", str(free_port()),
                      *_node_flags(NODE_RESOURCES[0])],
                     temp / "head.log")
        _wait_for_port(port, head, temp / "head.log", timeout)
        start(["--address", f"127.0.0.1:{port}", *_node_flags(NODE_RESOURCES[1])],
              temp / "worker.log")
        yield f"127.0.0.1:{port}"
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(temp, ignore_errors=True)
