"""The package's shape holds: its layers (import-linter's contracts in pyproject.toml), tasks that never import
each other, small files, one atomic writer and one lock, an entry shell that imports no torch, and the
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

PACKAGE = ROOT / "src" / "transformer_attention"
TASKS = PACKAGE / "tasks"


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


def test_files_are_small_and_the_top_is_a_few_modules():
    long = {
        str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 250
    }
    assert not long, f"files over 250 lines: {long}"
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, top


def test_one_atomic_writer_and_one_lock():
    """`os.replace` (the rename that makes a write atomic) and the locks (`flock`, filelock's `FileLock`) appear
    in files.py only; everything else calls `atomic_write` and `hold_lock`."""
    pattern = re.compile(r"\bos\.replace\b|\bflock\b|\bFileLock\(|\bfcntl\b")
    users = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if pattern.search(p.read_text()) and p.name != "files.py"
    )
    assert not users, f"write or lock files through files.py: {users}"


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
def test_the_attention_page_is_package_data_of_a_regular_install(tmp_path: Path):
    """A wheel built from the project holds page.html, page.css and page.js; installed from it (not editable),
    the view renders a page with the style and script inlined."""
    build = tmp_path / "project"
    shutil.copytree(ROOT / "src", build / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, build / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(build)],
                   check=True, timeout=300)  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("transformer_attention-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {f"transformer_attention/plotting/page.{kind}" for kind in ("html", "css", "js")} <= set(names)
    target = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True, timeout=300)
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
