"""Claims: one trial, one trainer, when several drivers run the same sweep on one store (a
job array starting the same command twice).

A trial is claimed right before it trains: its worker creates ``RESULTS/claims/<trial_id>.json``
with an exclusive create (``O_CREAT | O_EXCL``: atomic on local disks and NFSv3+), holding the
driver that owns it (host, pid, pid namespace, process start, a random token) and a unique
generation. The driver keeps its claims alive (``Heartbeat`` touches their modification time
every third of the lease) and removes each once the trial's row is stored, or when it stops.
A claim not touched for a lease (default ``DEFAULT_LEASE_S``; ``$REINIT_TUNE_CLAIM_LEASE_S``
for tests) belongs to a dead driver and is taken over; so is one whose driver process is gone
from this very machine. Of several drivers taking over one stale claim, exactly one wins: each
must first create ``<trial_id>.json.takeover.<generation>`` exclusively.

``begin`` is what a trainable calls before training: None to train, else why not (another
live driver holds the trial, or stored it after this driver planned). A driver suspended for
longer than the lease loses its claims and its trial may then train twice; the store stays
right either way (a trial's row replaces its earlier one).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from reinit_tune import store

CLAIMS = "claims"  # RESULTS/claims/: no store reader looks there
DEFAULT_LEASE_S = 600.0
LEASE_ENV = "REINIT_TUNE_CLAIM_LEASE_S"
_TAKEOVER = ".takeover."
# A claim is written microseconds after its exclusive create; one still without an owner
# this long after is one whose creator died in between (or whose disk was full).
UNWRITTEN_S = 5.0
# The report of a trainable that did not train its trial (``begin`` said why): the driver
# stores nothing for it.
SKIPPED = "claimed_elsewhere"


def _proc_start(pid: int) -> str | None:
    """The start time (clock ticks since boot) of process ``pid`` on this machine, or None
    where /proc has no such process: a pid reused by another process starts later."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


@dataclass(frozen=True)
class Owner:
    """The driver a claim belongs to."""

    host: str
    pid: int
    token: str
    pidns: str | None = None
    started: str | None = None

    @classmethod
    def this_process(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), uuid.uuid4().hex, _pid_namespace(),
                   _proc_start(os.getpid()))

    def __str__(self) -> str:
        return f"{self.host} pid {self.pid}"

    def is_dead(self) -> bool:
        """Known dead: it ran on this machine, in this pid namespace, and its process is
        gone (or the pid is another process now). Elsewhere only its lease can tell."""
        if self.host != socket.gethostname() or self.pidns is None \
                or self.pidns != _pid_namespace() or self.started is None:
            return False
        return _proc_start(self.pid) != self.started


@dataclass(frozen=True)
class Context:
    """What a trainable needs to claim its trial: the store, the driver, the lease, and
    when the driver planned (a row stored since then was stored by another driver)."""

    results_dir: str
    owner: Owner = field(default_factory=Owner.this_process)
    lease_s: float = field(default_factory=lambda: float(os.environ.get(LEASE_ENV,
                                                                        DEFAULT_LEASE_S)))
    since: float = field(default_factory=time.time)

    @property
    def folder(self) -> Path:
        return Path(self.results_dir) / CLAIMS


def _path(folder: Path, trial_id: str) -> Path:
    return folder / f"{trial_id}.json"


def _read(path: Path) -> tuple[dict, float, int] | None:
    """A claim's content, modification time and inode, or None where there is none. The
    content is empty while its creator writes it (an exclusive create shows before its
    bytes), or for good where the creator died in between."""
    try:  # content, time and inode of one and the same file, whatever replaces it meanwhile
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    try:
        content = json.loads(text)
    except ValueError:
        content = {}
    return (content if isinstance(content, dict) else {}), st.st_mtime, st.st_ino


def _create(path: Path, owner: Owner, trial_id: str) -> bool:
    """Create the claim at ``path`` if there is none (atomic); whether this call did."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"trial_id": trial_id, "gen": uuid.uuid4().hex, "created": time.time(),
                       "owner": owner.__dict__}, f)
    except OSError:  # a full disk: an empty claim left behind would hold the trial for a lease
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return True


def _owner(content: dict) -> Owner | None:
    try:
        return Owner(**content["owner"])
    except (KeyError, TypeError):
        return None


def claim(context: Context, trial_id: str) -> Owner | None:
    """Claim ``trial_id`` for ``context.owner``: None when it is ours now (also when it was
    already: a retried trial), else the live driver that holds it."""
    folder = context.folder
    path = _path(folder, trial_id)
    for _ in range(40):  # each round either settles or saw the claim change hands
        if _create(path, context.owner, trial_id):
            return None
        found = _read(path)
        if found is None:
            continue
        content, mtime, inode = found
        holder = _owner(content)
        if holder is not None and holder.token == context.owner.token:
            return None
        age = time.time() - mtime
        expired = age > context.lease_s or (holder is None and age > UNWRITTEN_S)
        if not expired and (holder is None or not holder.is_dead()):
            if holder is None:  # being written this instant
                time.sleep(0.05)
                continue
            return holder
        # A dead driver's claim: only the one who creates the takeover marker of this very
        # claim (its generation and inode) may remove it.
        key = f"{content.get('gen')}-{inode}"
        if not _create(folder / f"{trial_id}.json{_TAKEOVER}{key}", context.owner, trial_id):
            time.sleep(0.05)
            continue
        again = _read(path)
        if again is not None and f"{again[0].get('gen')}-{again[2]}" == key:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    found = _read(path)
    return (_owner(found[0]) if found else None) or Owner("?", 0, "")


def _mine(path: Path, owner: Owner) -> bool:
    found = _read(path)
    return found is not None and (_owner(found[0]) or Owner("", 0, "")).token == owner.token


def release(context: Context, trial_id: str) -> None:
    """Give up ``trial_id``'s claim if it is ours (its row is stored, or it stopped)."""
    folder = context.folder
    path = _path(folder, trial_id)
    if _mine(path, context.owner):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    for marker in folder.glob(f"{trial_id}.json{_TAKEOVER}*"):
        with contextlib.suppress(FileNotFoundError):
            marker.unlink()


def held(context: Context) -> list[str]:
    """Trial ids whose claims are ours."""
    folder = context.folder
    paths = folder.glob("*.json") if folder.is_dir() else ()
    return [p.name.removesuffix(".json") for p in paths if _mine(p, context.owner)]


def renew(context: Context) -> int:
    """Touch every claim of ours (its lease starts again); how many."""
    ids = held(context)
    for trial_id in ids:
        with contextlib.suppress(FileNotFoundError):
            os.utime(_path(context.folder, trial_id))
    return len(ids)


def release_all(context: Context) -> None:
    for trial_id in held(context):
        release(context, trial_id)


def stored_since(context: Context, trial_id: str) -> bool:
    """Whether the store holds a row of ``trial_id`` written after this driver planned
    (by another driver: this one trains a trial once)."""
    rows = store.stored_rows(context.results_dir, trial_id, written_after=context.since)
    return any(r.get("finished_at") is not None
               and r["finished_at"].timestamp() >= context.since for r in rows)


def begin(context: Context | None, trial_id: str) -> str | None:
    """Called by a trainable before it trains ``trial_id``: None to train it (claimed, or
    claims are off: no context, or this worker cannot see the driver's store), else why
    another driver has it."""
    if context is None or not context.folder.is_dir():
        return None
    holder = claim(context, trial_id)
    if holder is not None:
        return f"being trained by another driver ({holder})"
    if stored_since(context, trial_id):
        release(context, trial_id)
        return "stored by another driver"
    return None


class Heartbeat:
    """Keeps a driver's claims alive while its sweep runs (a daemon thread); on ``stop``,
    releases every claim still held."""

    def __init__(self, context: Context):
        self.context = context
        context.folder.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="claims-heartbeat",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.context.lease_s / 3):
            with contextlib.suppress(OSError):
                renew(self.context)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            release_all(self.context)
