"""Which code a driver runs: the git commit of the reinit-tune checkout and whether it has
uncommitted changes, stored with every trial row so a result can be traced to its code."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any


def source_version() -> dict[str, Any]:
    """``git_commit`` and ``git_dirty`` of the reinit-tune source this process runs (None
    where it is not a git checkout, e.g. an installed wheel)."""
    root = Path(__file__).resolve().parents[2]
    try:
        # This package's own files must be tracked there: a wheel installed inside some
        # other checkout would otherwise report that checkout's commit.
        subprocess.run(["git", "-C", str(root), "ls-files", "--error-unmatch",
                        "reinit_tune/__init__.py"], capture_output=True, timeout=10, check=True)
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                                capture_output=True, text=True, timeout=10, check=True)
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                 "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": commit.stdout.strip(), "git_dirty": bool(status.stdout.strip())}
