"""What every settings check shares: numbers that are not booleans, a "did you mean" hint, settings dataclasses
built from a config node (`settings_of`), and `lazy_face`, which keeps torch out until a name needs it. Standard
library."""

from __future__ import annotations

import ast
import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from importlib import import_module
from numbers import Integral, Real
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def is_whole(value: Any, low: int | None = None) -> bool:
    """A whole number (not a bool), at least `low` when given."""
    return isinstance(value, Integral) and not isinstance(value, bool) and (low is None or int(value) >= low)


def is_number(value: Any) -> bool:
    """A real number (not a bool)."""
    return isinstance(value, Real) and not isinstance(value, bool)


def is_finite(value: Any) -> bool:
    """Anything `float()` reads as a finite number (not a bool): what a sweep's job may return."""
    try:
        return not isinstance(value, bool) and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


Rule = tuple[Callable[[Any], bool], str, Any]  # (is the value allowed, what it must be, an example)


def whole(low: int, null: bool = False) -> Callable[[Any], bool]:
    """A rule's test: a whole number >= `low` (or None, with `null`)."""
    return lambda v: (null and v is None) or is_whole(v, low)


def check_rules(values: Mapping[str, Any], rules: Mapping[str, Rule], prefix: str) -> None:
    """A ConfigError for the first value of `values` that breaks its rule, naming `prefix + key`, the value, what it
    must be and an example; keys without a rule, and rules whose key is absent, pass."""
    for key, (ok, allowed, example) in rules.items():
        value = values.get(key)
        if key in values and not ok(value):
            shown = "[" + ",".join(map(str, value)) + "]" if isinstance(value, list | tuple) else repr(value)
            given, note = str(example).partition(" (")[::2]  # `value (a note on it)`: the value is what is pasted
            fix = f"{prefix}{key}={given}"
            if not takes(ok, fix):  # an example its own rule refuses is no fix: none printed
                raise ConfigError(f"{prefix}{key}={shown} must be {allowed}")
            fix = f"'{fix}'" if "[" in fix else fix  # a list, quoted for the shell
            fix += f" ({note}" if note else ""
            raise ConfigError(f"{prefix}{key}={shown} must be {allowed}: e.g. {fix}")


def takes(ok: Callable[[Any], bool], override: str) -> bool:
    """Whether a rule's test `ok` passes the value of `override` (`key=value`) as Hydra reads it from a command
    line (or as its text, what a key typed as text gets): a fix printed is checked first."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        value = OverridesParser.create().parse_override(override).value()
    except HydraException:
        return False
    return bool(ok(value) or ok(override.partition("=")[2]))


def as_list_example(given: str, fits: Callable[[list[str]], bool] = lambda items: True) -> str | None:
    """`given`, one word or number typed where a list belongs (`analysis.methods=decompx`), as the one-item list
    meant, `[given]`, when `fits` takes it (the list's element type): the example a refusal prints, where the
    config's own value (often null) would do something else. None when `given` is not one plain item or not fit."""
    plain = given.strip()
    if not plain or any(c in plain for c in "[]{}(),'\" =") or not fits([plain]):
        return None
    return f"[{plain}]"


def closest(name: Any, known: Sequence[str]) -> str | None:
    """The known name nearest a misspelt `name`, for a "did you mean" hint; None when none is near."""
    near = difflib.get_close_matches(str(name), list(known), n=1)
    return near[0] if near else None


def settings_of(kind: type[T], values: Mapping[str, Any], prefix: str, what: str) -> T:
    """`kind(**values)`, a settings dataclass that checks its own fields; a key it has no field for
    (`+model.key=...` gets past Hydra's schema) is a ConfigError naming `prefix + key`, `what` the settings are of,
    the nearest field."""
    known = [f.name for f in fields(kind)]
    for key in values:
        if key not in known:
            near = closest(key, [k for k in known if not k.startswith("_")])
            shown = ", ".join(k for k in known if not k.startswith("_"))
            fix = f"did you mean {prefix}{near}?" if near else f"the settings are: {shown}"
            raise ConfigError(f"{prefix}{key} is not a setting of {what}: {fix}")
    return kind(**values)


def lazy_face(package: str, init_file: str) -> tuple[Callable[[str], Any], list[str]]:
    """A package's `__getattr__` (PEP 562) that imports a name's module on its first use, and the names it serves:
    a config is then checked, and refused, in about a second, before torch is imported. The names are those the
    package's `__init__.py` (`init_file`) imports under `if TYPE_CHECKING:`, for type checkers: written once."""
    where: dict[str, str] = {}
    for node in ast.walk(ast.parse(Path(init_file).read_text())):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imported in node.body:
                assert isinstance(imported, ast.ImportFrom) and imported.level == 1, ast.unparse(imported)
                where |= {alias.asname or alias.name: str(imported.module) for alias in imported.names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f".{where[name]}", package), name)

    return __getattr__, sorted(where)
