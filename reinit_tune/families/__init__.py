"""The experiment families, one module each, and the registry that finds them.

Every module of this package except ``base`` declares ``FAMILY``, a ``base.Family`` (or, for
a paper's presets, ``FAMILIES``, one per experiment of that paper); other packages add
families through the ``reinit_tune.families`` entry-point group (each entry point names a
``Family`` object). The command line, the report, the dry run and the tests
read families only through ``all_families`` and ``get``, so adding a family is adding one
module.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from functools import cache

from reinit_tune.errors import InputError
from reinit_tune.families.base import Family, FigureSpec, Flag, Grid

__all__ = ["ENTRY_POINT_GROUP", "Family", "FigureSpec", "Flag", "Grid", "all_families", "get"]

ENTRY_POINT_GROUP = "reinit_tune.families"


@cache
def _registry() -> dict[str, Family]:
    found: list[Family] = []
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            module = importlib.import_module(f"{__name__}.{info.name}")
            found += getattr(module, "FAMILIES", None) or [module.FAMILY]
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        family = entry.load()
        if not isinstance(family, Family):
            raise TypeError(f"entry point {entry.name} ({entry.value}) of group "
                            f"{ENTRY_POINT_GROUP} is not a Family")
        found.append(family)
    registry: dict[str, Family] = {}
    for family in sorted(found, key=lambda f: (f.order, f.name)):
        if family.name in registry:
            raise TypeError(f"two experiment families are named {family.name!r}")
        registry[family.name] = family
    return registry


def all_families() -> list[Family]:
    """Every family, in the papers' order."""
    return list(_registry().values())


def get(name: str) -> Family:
    """The family called ``name``."""
    try:
        return _registry()[name]
    except KeyError:
        raise InputError(f"unknown experiment family {name!r}; known: "
                         f"{', '.join(_registry())} (reinit-tune families lists them)") from None


def refresh() -> None:
    """Look for families again (after installing a package that adds some)."""
    _registry.cache_clear()
