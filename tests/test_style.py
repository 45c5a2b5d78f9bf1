"""The code base stays ruff-clean (the style the project asks for)."""

import subprocess
import sys

import pytest

from tests.helpers import REPO


def test_ruff_clean():
    pytest.importorskip("ruff", reason="ruff is in the test extra")
    # ``python -m ruff``: found in this interpreter's environment even when it is not on PATH
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
