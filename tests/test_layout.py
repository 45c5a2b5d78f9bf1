"""The package's architecture, checked: no import cycle, each layer imports only the layers
below it, every module says what it owns, and tests mirror the package without importing
one another."""

from __future__ import annotations

import ast
from pathlib import Path

import reinit_tune
from tests.helpers import REPO

PACKAGE = Path(reinit_tune.__file__).parent

# Lowest first. A module may import modules of its own layer and of the layers below.
LAYERS = [
    ("foundations", ["errors", "wording", "env", "seeding", "tasks", "hardware", "inference",
                     "inference.*"]),
    ("trial description", ["config", "train_size", "model.shape", "model.files",
                           "model.fingerprint", "metrics",
                           "qa", "outcome"]),
    ("data, results store, model surgery", ["data", "data.*", "store.*", "sanity", "model.stacks",
                                            "model.surgery",
                                            "model.build"]),
    ("training and similarity", ["training.*", "similarity.*"]),
    ("running sweeps", ["sweep.*"]),
    ("figures and claim verdicts", ["analysis.*", "verdicts", "verdicts.*"]),
    ("experiment families", ["families.*"]),
    ("report", ["analysis.report"]),
    ("command line", ["cli", "cli.*"]),
]


def modules() -> list[str]:
    """Every module of the package, dotted below ``reinit_tune`` (packages by name)."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        found.append(".".join(parts[:-1]) if parts[-1] == "__init__" and len(parts) > 1
                     else ".".join(parts))
    return sorted(found)


def packages() -> set[str]:
    return {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}


def source(module: str) -> Path:
    path = PACKAGE / (module.replace(".", "/") + ".py")
    return path if path.is_file() else PACKAGE / module.replace(".", "/") / "__init__.py"


def imports(module: str) -> set[str]:
    """Package modules ``module`` imports, at import time or inside functions, leaving out
    ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(source(module).read_text())
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
               and getattr(node.test, "id", "") == "TYPE_CHECKING"
               for n in ast.walk(node)}
    known = set(modules())
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name == "reinit_tune":
                found.add("__init__")
            elif name.startswith("reinit_tune."):
                short = name.removeprefix("reinit_tune.")
                if short in known:
                    found.add(short)
    found.discard(module)
    return found


def layer_of(module: str) -> int:
    """The layer of a module: an exact entry of ``LAYERS`` wins over a ``package.*`` one."""
    exact = [i for i, (_, names) in enumerate(LAYERS) if module in names]
    wild = [i for i, (_, names) in enumerate(LAYERS)
            if any(n.endswith(".*") and module.startswith(n[:-1]) for n in names)]
    assert exact or wild, f"reinit_tune.{module} is in no layer of LAYERS; add it"
    return (exact or wild)[0]


def test_every_module_says_what_it_owns():
    for module in modules():
        docstring = ast.get_docstring(ast.parse(source(module).read_text()))
        assert docstring and len(docstring) > 40, f"reinit_tune.{module} has no docstring"


def test_there_is_no_import_cycle():
    # A package's __init__ may import its modules (the registry does): not part of a cycle.
    graph = {m: imports(m) - {"__init__"} - packages() for m in modules()
             if m != "__init__" and m not in packages()}
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                raise AssertionError("import cycle: " + " -> ".join(
                    [*path[path.index(target):], target]))
            if target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_each_layer_imports_only_the_layers_below_it():
    wrong = []
    for module in modules():
        if module == "__init__" or module in packages():
            continue
        mine = layer_of(module)
        for target in imports(module) - {"__init__"} - packages():
            if layer_of(target) > mine:
                wrong.append(f"{module} ({LAYERS[mine][0]}) imports {target} "
                             f"({LAYERS[layer_of(target)][0]})")
    assert not wrong, "\n".join(wrong)


def test_tests_mirror_the_package_and_import_no_other_test_module():
    tests = REPO / "tests"
    for path in tests.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module == "tests.helpers" or not node.module.startswith("tests"), (
                    f"{path.relative_to(REPO)} imports {node.module}")
    for package in packages():
        assert list((tests / package).glob("test_*.py")), f"no tests/{package}/ for {package}/"
