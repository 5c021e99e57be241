"""The code in src/ uses its dependencies' public APIs only: a scan of every module's syntax tree for
private names of other packages (`obj._name`, `from pkg._impl import ...`, `getattr(obj, "_name")`)."""

from __future__ import annotations

import ast

from conftest import ROOT

SRC = ROOT / "src"
OWN = ("transformer_attention", "hydra_plugins.transformer_attention_sweeper")
# typeshed's own helpers (`from _typeshed import DataclassInstance` under TYPE_CHECKING): they exist for type
# checkers only, documented as the place for such types, and never run
TYPE_ONLY = ("_typeshed",)
NOT_SCANNED = OWN + TYPE_ONLY
COMPAT = "transformer_attention/compat.py"  # the one module allowed to, each use explained there
# what the scan finds in compat.py: its workarounds (Lightning's console handlers, its CSV writer's header,
# TensorBoard's checksum) go through public attributes, so nothing; a private name added there is named here
COMPAT_USES: set[str] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_path(dotted: str) -> bool:
    return any(_private(part) for part in dotted.split("."))


def private_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each private name of another package that `source` reaches for."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _private_path(a.name) and not a.name.startswith(OWN)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and not (node.module or "").startswith(NOT_SCANNED):
            if _private_path(node.module or ""):
                found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue  # a class's own attributes
            is_super = isinstance(base, ast.Call) and getattr(base.func, "id", "") == "super"
            found.append((node.lineno, f"super().{node.attr}" if is_super else f".{node.attr}"))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("getattr", "setattr", "hasattr"):
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and _private(str(node.args[1].value)):
                found.append((node.lineno, f"{node.func.id}(..., {node.args[1].value!r})"))
    return sorted(found)


def test_the_scan_finds_each_kind_of_private_use():
    source = (
        "from hydra._internal.utils import _locate\nimport torch._dynamo\nfrom omegaconf import _utils\n"
        "w = logger.experiment._get_file_writer()\nc = getattr(trainer, '_signal_connector')\n"
        "class A(B):\n    def f(self):\n        return self._own, super()._theirs(), self.__dict__\n"
        "from transformer_attention.model import _fine\nfrom .model import _also_fine\n"
        "from _typeshed import DataclassInstance\n"
    )
    uses = [what for _, what in private_uses(source)]
    assert uses == [
        "hydra._internal.utils",
        "hydra._internal.utils._locate",
        "torch._dynamo",
        "omegaconf._utils",
        "._get_file_writer",
        "getattr(..., '_signal_connector')",
        "super()._theirs",
    ], uses


def test_src_uses_public_apis_only():
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name != COMPAT:
            problems += [f"{name}:{line}: {what}" for line, what in private_uses(path.read_text())]
    assert not problems, "private APIs of dependencies (use a public one, or explain it in compat.py):\n" + "\n".join(
        problems
    )


def test_compat_holds_what_it_declares():
    """A new private use goes into COMPAT_USES with its reason; one no longer used leaves it."""
    path = SRC / COMPAT
    found = {what for _, what in private_uses(path.read_text())} if path.exists() else set()
    assert found == COMPAT_USES
