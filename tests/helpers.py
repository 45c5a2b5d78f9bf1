"""Test helpers: load a sweep script as a module and run its ``main`` in-process."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_script(relative: str):
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem + "_script", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses in a script look their module up here
    spec.loader.exec_module(module)
    return module
