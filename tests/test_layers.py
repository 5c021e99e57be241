"""The package's shape holds: its layers (import-linter's contracts in pyproject.toml), tasks that never import
each other, one pretraining for both entry points, no function below the tasks that takes the run's config, small
files, one atomic writer and one lock (no plain write of a run file), an entry shell that imports no torch, and the
attention page shipped as package data."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

from transformer_attention.plotting.html import MODULES

PACKAGE = ROOT / "src" / "transformer_attention"
TASKS = PACKAGE / "tasks"
# Hydra's plugin interface hands a Sweeper the whole config (`Sweeper.setup(config=...)`): the only exception
HYDRA_INTERFACE = {
    "sweeps/sweeper.py:StudySweeper.setup",
    "hydra_plugins/transformer_attention_sweeper:OptunaSweeper.setup",
}


def imported_modules(path: Path, package: str) -> set[str]:
    """The absolute names of every module `path` (a module of `package`) imports, relative imports resolved."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found |= {module} | {f"{module}.{a.name}" for a in node.names}
    return found


def test_the_layer_contracts_are_kept():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "lint-imports is not installed: pip install -e '.[dev]'"
    proc = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 kept, 0 broken" in proc.stdout


def test_no_task_imports_another():
    tasks = {p.stem for p in TASKS.glob("*.py") if p.stem != "__init__"}
    assert tasks == {"train", "evaluate", "predict", "pretrain"}
    for task in tasks:
        others = {f"transformer_attention.tasks.{t}" for t in tasks - {task}}
        assert not imported_modules(TASKS / f"{task}.py", "transformer_attention.tasks") & others, task


def test_the_import_scan_sees_a_task_importing_another(tmp_path: Path):
    """The check above can fail: a task that imports another is seen, relative or absolute."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from .train import main\nimport transformer_attention.tasks.evaluate\nfrom ..training import builders\n"
    )
    found = imported_modules(probe, "transformer_attention.tasks")
    assert {"transformer_attention.tasks.train", "transformer_attention.tasks.evaluate"} <= found
    assert "transformer_attention.training.builders" in found


def config_takers(path: Path, where: str) -> list[str]:
    """`where:Class.function(param)` for every function of `path` with a parameter named `cfg` or typed DictConfig."""
    found = []

    def visit(node: ast.AST, owner: str = "") -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                args = child.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                    typed = (
                        arg is not None and arg.annotation is not None and "DictConfig" in ast.unparse(arg.annotation)
                    )
                    if arg is not None and (arg.arg == "cfg" or typed):
                        found.append(f"{where}:{owner}{child.name}({arg.arg})")
                visit(child, f"{owner}{child.name}.")

    visit(ast.parse(path.read_text()))
    return found


def test_no_function_below_the_tasks_and_the_entry_shell_takes_the_run_config():
    """Settings are built once at a task's start and passed down: outside tasks/ and cli/ no function has a parameter
    named `cfg` or typed `DictConfig` (Hydra's Sweeper interface aside)."""
    src = ROOT / "src"
    found = []
    for path in sorted(src.rglob("*.py")):
        where = str(path.relative_to(PACKAGE if PACKAGE in path.parents else src)).removesuffix("/__init__.py")
        if where.startswith(("tasks/", "cli/")):
            continue
        found += [f for f in config_takers(path, where) if f.split("(")[0] not in HYDRA_INTERFACE]
    assert not found, f"these take the run's config; give them their settings instead: {found}"


def test_the_config_scan_sees_both_forms(tmp_path: Path):
    """The check above can fail: a `cfg` parameter and a DictConfig-typed one, in a function and in a method."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def build(cfg): ...\nclass Maker:\n    def make(self, node: 'DictConfig | None') -> None: ...\n"
        "def fine(settings: dict) -> None: ...\n"
    )
    assert config_takers(probe, "probe.py") == ["probe.py:build(cfg)", "probe.py:Maker.make(node)"]


def test_both_entry_points_pretrain_through_one_function():
    """`python pretrain.py` and `python train.py model.init_from=pretrain` call the one `pretrain()` of
    pretraining/, and no other module defines a pretraining entry of its own."""
    for task in ("train", "pretrain"):
        tree = ast.parse((TASKS / f"{task}.py").read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "pretraining"
                    for a in n.names}  # fmt: skip
        called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "pretrain" in imported & called, task
    defined = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.FunctionDef) and n.name == "pretrain"
    )
    assert defined == ["pretraining/methods.py"]
    assert not (PACKAGE / "training" / "pretrained.py").exists() and not (PACKAGE / "training" / "vectors.py").exists()


def test_files_are_small_and_the_top_is_a_few_modules():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.js")]  # the page's ES modules too (ESLint: max-lines)
        if (n := len(p.read_text().splitlines())) > 300
    }
    assert not long, f"files over 300 lines: {long}"
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")  # the rooms' shared ground
    assert len(top) <= 8, top


def is_table(node: ast.AST) -> bool:
    """A literal of literals: a tuple, list, set or dict whose items are constants or tables themselves."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(is_table(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and is_table(k) and is_table(v) for k, v in zip(node.keys, node.values, strict=True))
    return False


def unformatted(source: str) -> list[int]:
    """The lines that end a statement kept from the formatter (`# fmt: skip`) that is not a table's assignment."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt) and node.end_lineno and "# fmt: skip" in lines[node.end_lineno - 1]:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if not (value is not None and is_table(value)):
                found.append(node.end_lineno)
    return sorted(set(found))


def test_the_formatter_shapes_all_but_tables():
    """`# fmt: skip` keeps a table's columns aligned, never packs code under the line budget."""
    found = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py") if (n := unformatted(p.read_text()))}
    assert not found, f"let ruff format these statements (fmt: skip is for tables): {found}"


def test_the_format_scan_tells_a_table_from_code():
    """The check above can fail: a call kept from the formatter is found, a table of constants is not."""
    source = 'ORDER = (\n    "a", "b",\n)  # fmt: skip\nx = f(\n    1, 2,\n)  # fmt: skip\n'
    assert unformatted(source) == [6]


def plain_writes(path: Path) -> list[str]:
    """`line: call` for every write of a file in `path` that is not files.atomic_write's: open() for writing,
    write_text / write_bytes, OmegaConf.save, and a library's figure, array or image saved to a path (not to a
    buffer; the project's own `save` methods write through atomic_write)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        modes = [a for a in node.args[1:2] if name == "open"] + [k.value for k in node.keywords if k.arg == "mode"]
        writes_mode = any(isinstance(m, ast.Constant) and set(str(m.value)) & set("wax+") for m in modes)
        to_path = any(
            isinstance(a, ast.BinOp | ast.JoinedStr) or (isinstance(a, ast.Constant) and isinstance(a.value, str))
            or (isinstance(a, ast.Name) and "path" in a.id.lower())
            for a in node.args
        )  # fmt: skip
        owner = ast.unparse(node.func.value) if isinstance(node.func, ast.Attribute) else ""
        library_save = name == "save" and owner in ("np", "numpy", "torch", "OmegaConf", "Image")
        if (
            writes_mode
            or name in ("write_text", "write_bytes")
            or (name == "save" and owner == "OmegaConf")
            or ((library_save or name in ("savefig", "savez", "savez_compressed", "to_csv", "dump")) and to_path)
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_one_atomic_writer_and_one_lock():
    """`os.replace` (the rename that makes a write atomic) and the locks (`flock`, filelock's `FileLock`) appear
    in files.py only; everything else calls `atomic_write` and `hold_lock`, and writes no file of its own."""
    pattern = re.compile(r"\bos\.replace\b|\bflock\b|\bFileLock\(|\bfcntl\b")
    users = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if pattern.search(p.read_text()) and p.name != "files.py"
    )
    assert not users, f"write or lock files through files.py: {users}"
    writes = {
        str(p.relative_to(PACKAGE)): w for p in PACKAGE.rglob("*.py") if p.name != "files.py" and (w := plain_writes(p))
    }
    assert not writes, f"write run files with files.atomic_write: {writes}"


def test_the_write_scan_sees_plain_writes(tmp_path: Path):
    """The check above can fail: each kind of plain write is seen; one into a buffer, or into the file that
    atomic_write opened, is not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "open(run / 'p.jsonl', 'w')\npath.write_text('x')\nfig.savefig(path, format='png')\n"
        "OmegaConf.save(config, sweep / 'multirun.yaml')\ntorch.save(state, path)\nopen(path, 'rb')\n"
        "fig.savefig(buffer, format='png')\natomic_write(path, lambda f: np.savez(f, a=a))\nvectors.save(path)\n"
    )
    assert [w.split(":")[0] for w in plain_writes(probe)] == ["1", "2", "3", "4", "5"]


def test_the_entry_shell_imports_no_torch():
    """What runs before a config is checked (the entry scripts import cli, cli.run imports its helpers) imports
    neither torch nor Lightning: a bad value fails in about a second."""
    code = (
        "import sys; import transformer_attention.cli.run, transformer_attention.cli.rundir\n"
        "print(sorted(m for m in ('torch', 'lightning', 'datasets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_the_attention_page_is_package_data_of_a_regular_install(regular_install: tuple[Path, Path]):
    """A wheel built from the project holds page/page.html, page/page.css and the page's ES modules; installed
    from it (not editable),
    the view renders a page with the style and script inlined."""
    wheel, target = regular_install
    names = zipfile.ZipFile(wheel).namelist()
    page = {f"transformer_attention/plotting/page/{name}" for name in ("page.html", "page.css")}
    assert page | {f"transformer_attention/plotting/page/{m}.js" for m in MODULES} <= set(names)
    code = (
        "import numpy as np, transformer_attention.plotting.html as h\n"
        "print(h.__file__)\n"
        "page = h.attention_html(['[CLS]', 'good'], [np.full((2, 2, 2), 0.5)], title='t')\n"
        "print('SVG_NS' in page, 'g.token' in page, '__SCRIPT__' not in page)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(target)}
    ).stdout.split("\n")
    assert out[0].startswith(str(target)), out  # the installed copy, not the source tree
    assert out[1] == "True True True"
