"""The documentation: the site builds in strict mode (broken links and references fail), the
command reference lists every command and flag the parsers define, and every example marked
runnable in the README and the site runs as printed."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import missing

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
RUNNABLE = re.compile(r"<!-- runnable(?: exit=(\d+))? -->\s*\n```bash\n(.*?)\n```", re.S)


def _hook():
    spec = importlib.util.spec_from_file_location("generated", REPO / "docs/hooks/generated.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def runnable_examples() -> list[tuple[str, str, int]]:
    """(where, command, expected exit status) for every line of every block marked
    ``<!-- runnable -->`` (a backslash continues a command on the next line)."""
    found = []
    for page in pages():
        for match in RUNNABLE.finditer(page.read_text()):
            block = match.group(2).replace("\\\n", " ")
            for line in block.splitlines():
                command = line.split("  #")[0].strip()
                if command and not command.startswith("#"):
                    found.append((page.relative_to(REPO).as_posix(), command,
                                  int(match.group(1) or 0)))
    return found


def test_the_readme_is_short_and_keeps_the_ci_marker():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "<!-- test-command -->" in readme and "<!-- slow-test-command -->" in readme


def test_the_command_reference_lists_every_command_and_flag():
    hook = _hook()
    reference = hook.cli_reference()
    for command, flags in hook.commands_and_flags().items():
        heading = f"`{command}`" if " sweep " not in command else \
            f"`{command}`"
        assert heading in reference, command
        for flag in flags:
            assert f"`{flag}`" in reference, (command, flag)


def test_every_page_is_in_the_navigation_and_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "reinit-tune sweep progressive" in cli and "--pack-size" in cli or "--dry-run" in cli
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "TrialConfig" in api and "One finetuning trial" in api


def test_there_are_runnable_examples():
    where = {page for page, _, _ in runnable_examples()}
    assert "README.md" in where and len(runnable_examples()) >= 8, runnable_examples()


@pytest.mark.parametrize("page,command,status", runnable_examples(),
                         ids=[f"{p}:{c[:60]}" for p, c, _ in runnable_examples()])
def test_a_documented_example_runs_as_printed(page, command, status, tmp_path):
    """Run from the repository root as the docs say (``../shared`` beside it); anything the
    example writes goes to its own results folder under a scratch working copy."""
    if not SHARED_DATA.is_dir() and "../shared" in command:
        missing("the shared data is not beside this checkout")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    env.pop("REINIT_TUNE_DATA", None)  # each example names the data it needs
    done = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == status, (page, command, done.stdout[-2000:],
                                       done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


def test_the_command_reference_shows_defaults_the_help_states():
    reference = _hook().cli_reference()
    for flag, default in (("--model", "bert-base-uncased"), ("--sizes", "500 5000 50000"),
                          ("--seeds", "50 at <=500 examples, else 3"),
                          ("--epochs", "5 at <=500 examples, else 3")):
        assert f"| `{flag}` | {default} |" in reference, flag
