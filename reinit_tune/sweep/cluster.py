"""Which Ray cluster a sweep runs on, and whether it can place the sweep's trials.

The same command runs on a laptop and on a cluster: ``connect_ray`` joins the cluster named
by ``RAY_ADDRESS``, else the one last started with ``ray start`` on this machine (``ray up``
starts the head node that way), else starts a local Ray instance. A stale address file left by
a cluster that no longer runs falls back to a local instance with a log line instead of
failing. ``check_resources`` compares what a trial asks for with every node the cluster has,
or can start: an autoscaling cluster may have no GPU until its GPU worker type scales up;
``check_memory`` does the same for a trial's estimated peak memory against Ray's ``memory``
resource of each node. ``HeadWatch`` notices a head node that is gone while a sweep runs.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from reinit_tune.errors import ClusterError, InputError
from reinit_tune.sweep import signals
from reinit_tune.wording import counted

log = logging.getLogger("reinit_tune")

ADDRESS_ENV = "RAY_ADDRESS"
AUTH_ENV = "RAY_AUTH_MODE"
# Written by the cluster launcher on the head node (``ray up``): the autoscaler's node types.
BOOTSTRAP_CONFIG = "~/ray_bootstrap_config.yaml"

NodeResources = dict[str, float]


def address_file() -> Path:
    """Where ``ray start`` records the cluster that a bare ``ray.init()`` joins: Ray 2.60's
    ``get_ray_address_file``, computed here without importing Ray (see ``secure_local_ray``)."""
    if "RAY_TMPDIR" in os.environ:
        root = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        root = os.environ["TMPDIR"]
    elif sys.platform.startswith(("linux", "darwin")):
        root = "/tmp"
    else:
        root = tempfile.gettempdir()
    return Path(root) / "ray" / "ray_current_cluster"


def secure_local_ray() -> None:
    """Turn on Ray's token authentication when this process is about to start its own local
    Ray instance: Ray 2.60's GCS, raylet and workers listen on every network interface
    whatever address they are given, so a token is what keeps other machines out. A
    ``RAY_AUTH_MODE`` the user set is kept, with a warning. Ray reads
    ``RAY_AUTH_MODE`` once, when first imported: ``reinit_tune.sweep.environment.prepare``
    calls this before a sweep imports Ray; later it changes nothing and ``connect_ray`` warns
    instead."""
    if "ray" in sys.modules:
        return
    try:
        address, _ = choose_address()
    except InputError:
        return  # reported by connect_ray
    if address != "local":
        return
    own = os.environ.get(AUTH_ENV, "")
    if own and own != "token":  # the user's choice stands, said once
        log.warning("%s=%s is set: the local Ray instance this sweep starts listens on every "
                    "network interface without a token; unset it to have one", AUTH_ENV, own)
        return
    os.environ[AUTH_ENV] = "token"
    ensure_token()


def ensure_token(home: Path | None = None) -> None:
    """Create the token a local Ray instance in token mode reads (``~/.ray/auth_token``)
    where none exists, so that two sweeps started at once on a fresh machine (a job array's
    two tasks on one node) share one: Ray writes a missing token in place, and the second
    writer replaces the token the first one's cluster already holds, whose workers then fail
    to authenticate. Linking a complete file under the name is atomic: the first writer wins,
    the others keep its token. ``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH``, where set, are
    Ray's to read."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return
    path = (home or Path.home()) / ".ray" / "auth_token"
    if path.exists():
        return
    import secrets

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".auth_token.{os.getpid()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))  # Ray's own form: 256 bits as hex
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another sweep's token won: keep it
        finally:
            draft.unlink()
    except OSError as exc:  # an unwritable home: Ray says so itself when it starts
        log.debug("could not write %s: %s", path, exc)


def _driver_raylet() -> str | None:
    """``host:port`` of the raylet of the node this driver runs on (None where this Ray does
    not say)."""
    import ray

    node = getattr(ray._private.worker, "_global_node", None)
    host, port = getattr(node, "node_ip_address", None), getattr(node, "node_manager_port", 0)
    return f"{host}:{port}" if host and port else None


def answers(address: str, timeout_s: float = 3.0) -> bool:
    """Whether something listens at ``host:port`` (a live cluster's GCS does)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


# An HTTP/2 client's connection preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5):
# a gRPC server, as Ray's GCS is, answers with its own SETTINGS frame.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4


def speaks_grpc(address: str, timeout_s: float = 5.0) -> bool:
    """Whether ``host:port`` answers an HTTP/2 connection preface with a SETTINGS frame, as
    Ray's GCS (a gRPC server) does. Something else listening there (a web server, a
    database, a stray port) would leave ``ray.init`` retrying for minutes."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s) as s:
            s.settimeout(timeout_s)
            s.sendall(_HTTP2_PREFACE)
            header = b""
            while len(header) < 9:
                chunk = s.recv(9 - len(header))
                if not chunk:
                    return False
                header += chunk
    except (OSError, ValueError):
        return False
    return header[3] == _SETTINGS


def choose_address(environ: dict[str, str] | None = None,
                   recorded_file: Path | None = None) -> tuple[str, str]:
    """The address to pass to ``ray.init`` and a line saying why."""
    environ = os.environ if environ is None else environ
    explicit = environ.get(ADDRESS_ENV, "").strip()
    if explicit == "local":
        return "local", f"starting a local Ray instance ({ADDRESS_ENV}=local)"
    if explicit and explicit != "auto":
        if explicit.startswith("ray://") or answers(explicit):
            return explicit, f"joining the Ray cluster at {ADDRESS_ENV}={explicit}"
        raise InputError(
            f"{ADDRESS_ENV}={explicit} does not answer: start that cluster (`ray start --head` "
            f"or `ray up cluster.yaml`), fix the address, or unset {ADDRESS_ENV} to run on a "
            "local Ray instance"
        )
    recorded_file = recorded_file or address_file()
    recorded = recorded_file.read_text().strip() if recorded_file.is_file() else ""
    if recorded and answers(recorded):
        return recorded, f"joining the Ray cluster started with `ray start` at {recorded}"
    if explicit == "auto":
        raise InputError(
            f"{ADDRESS_ENV}=auto but no Ray cluster runs on this machine: start one with "
            f"`ray start --head` or unset {ADDRESS_ENV} to run on a local Ray instance"
        )
    if recorded:
        return "local", (
            f"{recorded_file} names the cluster at {recorded}, which does not answer (stopped "
            "or crashed); starting a local Ray instance instead. Set RAY_ADDRESS to choose a "
            "cluster, or delete that file"
        )
    return "local", "starting a local Ray instance (no RAY_ADDRESS and no `ray start` cluster)"


@dataclass(frozen=True)
class JobInfo:
    """The Ray job a sweep's driver is, as the dashboard's Jobs page shows it: the family,
    its models and its results folder (``connect_ray`` hands it to Ray as job metadata)."""

    family: str
    models: tuple[str, ...]
    results: str

    @property
    def metadata(self) -> dict[str, str]:
        """Ray's job metadata; ``job_name`` is what the Jobs page's Name column reads."""
        models = ", ".join(self.models)
        return {"job_name": f"reinit-tune {self.family}: {models} -> {self.results}",
                "family": self.family, "model": models, "results": self.results}


def name_job(family: str, models: list[str], results: str | os.PathLike) -> JobInfo:
    """The job a driver running ``family`` on ``models`` into ``results`` is."""
    return JobInfo(family, tuple(models), str(results))


def token_hint(environ: dict[str, str] | None = None) -> str:
    """How to open a dashboard that asks for a token: Ray 2.60 takes it only in the page's
    prompt (or an Authorization header), never in the URL."""
    environ = os.environ if environ is None else environ
    if environ.get("RAY_AUTH_TOKEN"):
        where = "the RAY_AUTH_TOKEN variable"
    else:
        where = environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    return (f"the page asks for a token: paste what `ray get-auth-token` prints (it reads "
            f"{where})")


def check_is_ray(address: str) -> None:
    """``InputError`` where ``address`` (not ``local``) answers but is not a Ray head: a
    ``ray.init`` there would retry for minutes."""
    if address == "local" or address.startswith("ray://") or speaks_grpc(address):
        return
    named = (f"{ADDRESS_ENV}={address}" if os.environ.get(ADDRESS_ENV, "").strip() == address
             else f"{address} (recorded in {address_file()})")
    raise InputError(
        f"{named} answers but is not a Ray cluster (its port does not "
        "speak gRPC, as a Ray head's GCS port does): set it to the head's GCS address "
        f"(`ray start --head` prints it; default port 6379), or unset {ADDRESS_ENV} to run "
        "on a local Ray instance"
    )


def connect_ray(job: JobInfo | None = None) -> None:
    """Join or start Ray (see module docstring) as ``job`` and say which, and where the
    dashboard is."""
    import ray

    if ray.is_initialized():
        return
    address, why = choose_address()
    (log.warning if "does not answer" in why else log.info)(why)
    check_is_ray(address)
    if address == "local" and os.environ.get(AUTH_ENV, "disabled") == "disabled":
        log.warning("this local Ray instance runs without token authentication and Ray "
                    "listens on every network interface: anyone who can reach this machine "
                    "can submit work to it. Run sweeps through the reinit-tune command or "
                    "run_sweep (they turn tokens on), or set %s=token before Python imports "
                    "Ray", AUTH_ENV)
    try:
        context = ray.init(address=address, log_to_driver=True, configure_logging=True,
                           logging_level="warning",
                           job_config=ray.job_config.JobConfig(
                               metadata=job.metadata if job else {}))
    except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception for these
        if "timed out" not in str(e) and "failed to start" not in str(e):
            raise
        # a loaded machine: the raylet or GCS did not come up within Ray's wait
        raise ClusterError(
            f"Ray did not start ({str(e).splitlines()[0].strip()}): the machine may be too "
            "busy for Ray's start-up wait; rerun the same command (stored trials are kept), "
            "with RAY_raylet_start_wait_time_s=120 to give it longer") from None
    signals.forward_sigterm()  # ray.init replaced our SIGTERM handler with sys.exit
    if context.dashboard_url:
        log.info("Ray dashboard: http://%s (Jobs: this sweep by name; Actors: its trial "
                 "workers, logs, CPU/GPU use; it lives as long as this Ray instance)%s",
                 context.dashboard_url,
                 f"; {token_hint()}" if os.environ.get(AUTH_ENV) == "token" else "")
    elif address == "local":
        log.info("no Ray dashboard: it needs ray[default] (pip install 'reinit-tune[dashboard]')")


def shutdown_ray() -> None:
    """Disconnect from Ray; a local instance this process started stops with it (its raylet,
    GCS and agents would otherwise linger after the command)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


# -- capacity ----------------------------------------------------------------------------
def autoscaler_node_types(bootstrap_config: str | os.PathLike = BOOTSTRAP_CONFIG,
                          ) -> dict[str, NodeResources | None] | None:
    """Resources of each node type the autoscaler may start (None: not an autoscaling
    cluster). A type whose resources the config leaves to auto-detection maps to None."""
    import ray
    try:  # what the autoscaler reports to the GCS (autoscaler v2, KubeRay)
        reported = ray._private.state.state.get_cluster_config()
    except Exception:  # noqa: BLE001 - older or newer Ray without it: use the file
        reported = None
    if reported is not None and reported.node_group_configs:
        return {g.name: {k: float(v) for k, v in g.resources.items()}
                for g in reported.node_group_configs if g.max_count != 0}
    path = Path(bootstrap_config).expanduser()
    if not path.is_file():
        return None
    config = yaml.safe_load(path.read_text()) or {}
    head = config.get("head_node_type")
    return {
        name: ({k: float(v) for k, v in spec["resources"].items()} if "resources" in spec
               else None)
        for name, spec in (config.get("available_node_types") or {}).items()
        if name == head or spec.get("max_workers", 0) > 0
    }


def scalable_gpu_types(bootstrap_config: str | os.PathLike = BOOTSTRAP_CONFIG) -> list[str]:
    """What the GPU node types an autoscaler may start name of their GPUs: an
    ``accelerator_type:<name>`` resource, else the instance type of their node config
    (``ray up``'s file); empty where none is named."""
    names = []
    for resources in (autoscaler_node_types(bootstrap_config) or {}).values():
        names += [k.split(":", 1)[1] for k in resources or {} if k.startswith("accelerator_type:")]
    path = Path(bootstrap_config).expanduser()
    if not names and path.is_file():
        config = yaml.safe_load(path.read_text()) or {}
        for spec in (config.get("available_node_types") or {}).values():
            gpus = (spec.get("resources") or {}).get("GPU", 0)
            kind = (spec.get("node_config") or {}).get("InstanceType") or (
                spec.get("node_config") or {}).get("machineType")
            if gpus and kind and spec.get("max_workers", 0) > 0:
                names.append(str(kind))
    return names


def inventory() -> tuple[list[NodeResources], dict[str, NodeResources | None] | None]:
    """Total resources of each live node, and the autoscaler's node types (or None)."""
    import ray

    alive = [dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")]
    return alive, autoscaler_node_types()


def gpu_inventory() -> tuple[float, bool]:
    """GPUs of the live nodes of the connected cluster, and whether its autoscaler can start
    nodes with GPUs (a ``ray up`` cluster's GPU workers before they scale up)."""
    alive, scalable = inventory()
    scalable_gpus = any((r or {}).get("GPU", 0) > 0 for r in (scalable or {}).values())
    return sum(r.get("GPU", 0) for r in alive), scalable_gpus


@dataclass(frozen=True)
class Devices:
    """Where a sweep's trials run: ``gpus_per_trial`` (0: CPUs), the GPUs found, and a line
    saying which and why (empty where the user gave the number)."""

    gpus_per_trial: float
    gpus: float
    why: str


def resolve_gpus(gpus_per_trial: float | str) -> Devices:
    """``--gpus-per-trial`` as a number. ``auto``: 1 GPU per Tune trial (a pack, or a trial
    that cannot share one) where the cluster the sweep runs on (``choose_address``: this
    machine, ``RAY_ADDRESS``, a ``ray start``/``ray up`` cluster, a SLURM job's) has GPUs or
    can start GPU nodes; else 0, CPU trials. A cluster other than this machine is asked from
    a separate process (``ask_cluster``): this one joins Ray only once its output is
    redirected (``reinit_tune.sweep.console``)."""
    if gpus_per_trial != "auto":
        value = float(gpus_per_trial)
        return Devices(value, value, "")  # the user's own choice: nothing to say
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        gpus, scalable = gpu_inventory()
        where = "the Ray cluster"
    else:
        address, _ = choose_address()
        if address == "local":
            import torch

            gpus = float(torch.cuda.device_count()) if torch.cuda.is_available() else 0.0
            scalable, where = False, "this machine"
        else:
            check_is_ray(address)
            gpus, scalable = ask_cluster(address)
            where = f"the Ray cluster at {address}"
    if gpus > 0 or scalable:
        found = gpu_count(gpus) if gpus > 0 else "GPU nodes its autoscaler can start"
        return Devices(1.0, gpus, f"GPU trials: 1 GPU per pack of trials ({found} in {where}; "
                                  "--gpus-per-trial 0 runs on CPUs)")
    return Devices(0.0, 0.0, f"CPU trials: no GPU in {where}")


_ASK = """
import json, sys
import ray
from reinit_tune.sweep.cluster import gpu_inventory
ray.init(address=sys.argv[1], logging_level="error", log_to_driver=False)
print(json.dumps(gpu_inventory()))
"""


def ask_cluster(address: str, timeout_s: float = 120.0) -> tuple[float, bool]:
    """``gpu_inventory`` of the cluster at ``address``, asked by a short-lived driver of its
    own; ``ClusterError`` (the environment, exit 1) where it does not answer: a head whose
    port is open but whose Ray is hung, stopped or refuses this driver's token."""
    import json
    import subprocess

    try:
        done = subprocess.run([sys.executable, "-c", _ASK, address], capture_output=True,
                              text=True, timeout=timeout_s)
        gpus, scalable = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
        why = "no answer in time" if isinstance(e, subprocess.TimeoutExpired) else (
            (done.stderr.strip().splitlines() or ["no output"])[-1][:200])
        named = ("" if os.environ.get(ADDRESS_ENV, "").strip() == address
                 else f" (recorded in {address_file()})")
        raise ClusterError(
            f"the Ray cluster at {address}{named} did not answer a driver ({why}): check it "
            f"is up and takes this machine's token (`ray status --address {address}`), set "
            f"{ADDRESS_ENV} to a live cluster's address, or {ADDRESS_ENV}=local to run on "
            "this machine; --gpus-per-trial N (0: CPUs) skips this question, not the "
            "cluster") from None
    return float(gpus), bool(scalable)


def check_resources(cpus_per_trial: float, gpus_per_trial: float, alive: list[NodeResources],
                    scalable: dict[str, NodeResources | None] | None = None) -> None:
    """Raise ``InputError`` unless some node that runs or can be started fits one trial."""
    need = {"CPU": cpus_per_trial, "GPU": gpus_per_trial}
    scalable = scalable or {}
    if any(r is None for r in scalable.values()):
        unknown = sorted(name for name, r in scalable.items() if r is None)
        log.warning("autoscaler node types %s leave resources to auto-detection; cannot "
                    "check that a trial fits before they start", unknown)
        return
    nodes = [*alive, *scalable.values()]

    def fits(resources: NodeResources) -> bool:
        return all(resources.get(k, 0) >= v for k, v in need.items() if v > 0)

    if any(fits(r) for r in alive):
        return
    if any(fits(r) for r in scalable.values()):
        log.info("no running node fits a trial yet; the autoscaler will start one of %s",
                 sorted(name for name, r in scalable.items() if fits(r)))
        return
    most = {k: max((r.get(k, 0) for r in nodes), default=0) for k in need}
    if gpus_per_trial > 0 and most["GPU"] == 0:
        raise InputError(
            f"--gpus-per-trial {gpus_per_trial:g} asks for GPUs but the Ray cluster has none "
            "and its autoscaler can start none; use --gpus-per-trial 0 to run on CPUs, or "
            "start GPU nodes (see the gpu_worker type in cluster.yaml)"
        )
    if gpus_per_trial > most["GPU"]:
        raise InputError(
            f"--gpus-per-trial {gpus_per_trial:g} exceeds the {gpu_count(most['GPU'])} of "
            "the largest node (a trial runs on one node); lower it"
        )
    raise InputError(
        f"--cpus-per-trial {cpus_per_trial:g} (with --gpus-per-trial {gpus_per_trial:g}) fits "
        f"no node: the largest has {most['CPU']:g} CPUs; lower it"
    )


def gpu_count(gpus: float) -> str:
    """``1 GPU``, ``8 GPUs``, ``0.5 GPUs``."""
    return counted(gpus, "GPU")


def check_memory(need: int, what: str, alive: list[NodeResources],
                 scalable: dict[str, NodeResources | None] | None = None) -> None:
    """Raise ``InputError`` when the largest trial's estimated peak memory (``need`` bytes,
    ``reinit_tune.sweep.memory``) exceeds Ray's ``memory`` resource of every node that runs
    or can be started. Node types that declare no memory (left to auto-detection) may be
    big enough: then nothing is refused."""
    from reinit_tune.sweep import memory

    if not memory.fits(need, alive, scalable):
        largest = max(r["memory"] for r in [*alive, *(scalable or {}).values()])
        raise InputError(memory.too_big(need, largest, what))


def warn_if_storage_is_local(storage: str, alive: list[NodeResources],
                             scalable: dict[str, Any] | None) -> None:
    """Checkpoints written on one node must be readable on another (Tune's storage_path)."""
    multi_node = len(alive) > 1 or bool(scalable and len(scalable) > 1)
    if multi_node and "://" not in storage:
        log.warning(
            "--storage %s is a local path on a multi-node cluster: checkpoints of long trials "
            "need storage every node reads (an NFS mount, or s3://... / gs://...)", storage
        )


class HeadWatch:
    """Calls ``on_lost`` (from a thread, with a sentence saying what is gone) once the head
    node's GCS port has refused connections for ``grace_s``, or the raylet of the node this
    driver runs on has for ``raylet_grace_s``. Without a head, Ray ends the driver from its
    C++ side ~60 s later (``RAY_gcs_rpc_server_reconnect_timeout_s``) with only its own
    message; without its raylet, within seconds of the next object-store access ("The
    connection to the plasma store is failed. Terminate the process"), with no message on
    the terminal at all. Noticing first lets the command print its summary and exit.
    ``grace_s`` rides out a port that blinks, and a head restarted by GCS fault tolerance
    answers again within it; a raylet is never restarted, so a short grace suffices."""

    def __init__(self, on_lost: Callable[[str], None], grace_s: float = 20.0,
                 every_s: float = 2.0, raylet_grace_s: float = 2.0):
        import ray

        self.address = ray.get_runtime_context().gcs_address
        self.raylet = _driver_raylet()
        self.on_lost = on_lost
        self.grace_s = grace_s
        self.raylet_grace_s = raylet_grace_s
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="reinit-tune-head-watch",
                                        daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        watched = {self.address: (self.grace_s, (
            f"lost the Ray cluster's head node (its GCS at {self.address} stopped "
            "answering): the sweep cannot go on; restart the cluster first"))}
        if self.raylet is not None:
            watched[self.raylet] = (self.raylet_grace_s, (
                f"lost the Ray node this driver runs on (its raylet at {self.raylet} stopped "
                "answering): the sweep cannot go on. A local Ray instance starts again with "
                "the command; on a cluster, start Ray on this node again first"))
        lost_since: dict[str, float] = {}
        while not self._stop.wait(self.every_s):
            for address, (grace, what) in watched.items():
                if answers(address, timeout_s=self.every_s):
                    lost_since.pop(address, None)
                    continue
                since = lost_since.setdefault(address, time.monotonic())
                if time.monotonic() - since >= grace and not self._stop.is_set():
                    # the driver on the head node loses both: the head is the cause
                    if address != self.address and not answers(self.address, self.every_s):
                        what = watched[self.address][1]
                    self.on_lost(what)
                    return

    def stop(self) -> None:
        self._stop.set()
