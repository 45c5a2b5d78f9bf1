"""What a running sweep's terminal shows: the command's own lines only. Everything Ray and
Tune print while a sweep runs goes to one log file instead (``ray_output_to``), named on the
terminal when the sweep starts and again in its summary.

Ray and Tune print from four places, none of which a logging setting alone reaches:

- Python loggers under ``ray`` (Tune's tracebacks when it cannot save its experiment state,
  its "Failed to fetch metrics" list, its restore hint), with Ray's own handler on ``ray``;
- the driver's threads that forward what other processes print ("(raylet) Raylet is
  terminated ... Last 20 lines of the Raylet logs", a worker's output), through whatever
  ``sys.stdout`` / ``sys.stderr`` are when they print;
- the driver's C++ core worker, straight to file descriptor 2;
- Python warnings raised in the driver (``sys.stderr`` when raised).

So, for the duration: file descriptor 2 and ``sys.stdout`` / ``sys.stderr`` point at the log,
and the command's own output (its progress lines, its ``reinit_tune`` log messages, its
summary) is written to the terminal streams saved before. A write the log cannot take (its
disk is full: the fault being reported) is dropped, never raised. With ``--verbose`` nothing
is redirected: Tune's own table is what was asked for.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from reinit_tune.errors import InputError

LOGS = "_logs"  # under the results folder: the store's readers skip it


def log_path(results_dir: Path, name: str) -> Path:
    """A new log file's path for sweep ``name``: one per command, never reused."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(results_dir) / LOGS / f"{name}-{stamp}-{os.getpid()}.log"


@dataclass
class Console:
    """Where the command's own lines go while Ray's output is redirected: ``out`` (progress
    and summary) and ``err`` (its log messages); ``log`` is the file that takes the rest."""

    out: TextIO
    err: TextIO
    log: Path


class _LogStream(io.TextIOBase):
    """A text stream onto the log that drops what it cannot write (a full disk)."""

    def __init__(self, file: TextIO | None):
        self._file = file

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self._file is not None:
            try:
                self._file.write(text)
                self._file.flush()
            except (OSError, ValueError):
                pass
        return len(text)


class _QuietFileHandler(logging.StreamHandler):
    """A handler onto the log whose failures stay silent: logging's default prints a
    "--- Logging error ---" traceback to the terminal, the very thing kept out of it."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass


def _is_fd2(stream: object) -> bool:
    try:
        return stream.fileno() == 2  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


@contextlib.contextmanager
def ray_output_to(log: Path, out: TextIO | None = None) -> Iterator[Console]:
    """Send Ray's and Tune's output to ``log`` until the block ends; the yielded
    ``Console`` says where the command's own lines go (``out``: default standard output).
    """
    # the folders this makes: bad input found once Ray is up must leave nothing behind
    made = [p for p in (log.parent, *log.parent.parents) if not p.exists()]
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        file: TextIO | None = open(log, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
    except OSError:
        file = None  # a full or read-only disk: Ray's output is dropped, the command's kept
    saved_stdout, saved_stderr = sys.stdout, sys.stderr
    terminal_out = out or saved_stdout
    sys.stderr.flush()
    saved_fd2 = os.dup(2)
    # our messages keep reaching the terminal: through a copy of descriptor 2 where the
    # stream writes to it, else the stream itself (a test's captured stream, say)
    terminal_err: TextIO = (os.fdopen(os.dup(saved_fd2), "w", buffering=1, encoding="utf-8",
                                      errors="replace")
                            if _is_fd2(saved_stderr) else saved_stderr)
    if terminal_out is saved_stderr:
        terminal_out = terminal_err
    moved: list[tuple[logging.StreamHandler, object]] = []
    for logger in (logging.getLogger(), logging.getLogger("reinit_tune")):
        for handler in logger.handlers:
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and _is_fd2(stream):
                moved.append((handler, handler.setStream(terminal_err)))
    ray_logger = logging.getLogger("ray")
    ray_handlers, ray_propagate = ray_logger.handlers[:], ray_logger.propagate
    handler = _QuietFileHandler(_LogStream(file))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    ray_logger.handlers, ray_logger.propagate = [handler], False
    log_fd = file.fileno() if file is not None else os.open(os.devnull, os.O_WRONLY)
    os.dup2(log_fd, 2)
    sys.stdout = sys.stderr = _LogStream(file)
    try:
        yield Console(out=terminal_out, err=terminal_err, log=log)
    except InputError:
        with contextlib.suppress(OSError):
            log.unlink()
            for folder in made:
                folder.rmdir()
        raise
    finally:
        sys.stdout, sys.stderr = saved_stdout, saved_stderr
        os.dup2(saved_fd2, 2)
        os.close(saved_fd2)
        if file is None:
            os.close(log_fd)
        ray_logger.handlers, ray_logger.propagate = ray_handlers, ray_propagate
        for moved_handler, stream in moved:
            moved_handler.setStream(stream)
        if terminal_err is not saved_stderr:
            terminal_err.close()
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()
