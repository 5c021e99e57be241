"""Package faces that import nothing heavy (PEP 562). torch takes seconds to import and Lightning more: a package
whose names need them (model, data, analysis, pretraining) imports the module that holds a name on its first use,
so that a config is checked, and refused, in about a second by the torch-free modules beside them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import Any


def lazy_face(package: str, names_by_module: Mapping[str, Sequence[str]]) -> tuple[Callable[[str], Any], list[str]]:
    """A package's `__getattr__` that imports a name's module (`names_by_module`: module -> names) the first time the
    name is used, and the names it serves (for `__all__`)."""
    where = {name: module for module, names in names_by_module.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f".{where[name]}", package), name)

    return __getattr__, sorted(where)
