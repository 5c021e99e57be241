"""notebooks/attention_from_scratch.ipynb runs top to bottom from a clean kernel (its own checks are asserts in
its cells), with the short training its TA_NOTEBOOK_FAST=1 switch gives, and its committed copy has outputs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import ROOT

nbformat = pytest.importorskip("nbformat", reason="the dev extra installs nbformat: pip install -e '.[dev]'")
nbclient = pytest.importorskip("nbclient", reason="the dev extra installs nbclient: pip install -e '.[dev]'")
pytest.importorskip("ipykernel", reason="the dev extra installs ipykernel: pip install -e '.[dev]'")

NOTEBOOK = ROOT / "notebooks" / "attention_from_scratch.ipynb"
KERNEL = "transformer-attention-test"


@pytest.fixture
def this_python_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernel spec that runs this interpreter (the venv's), found first: a user's own `python3` kernel
    elsewhere on the machine cannot take its place."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return KERNEL


@pytest.mark.slow
def test_the_notebook_runs_from_a_clean_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, this_python_kernel):
    monkeypatch.setenv("TA_NOTEBOOK_FAST", "1")  # one short epoch: the checks, not the accuracy
    monkeypatch.setenv("TA_NOTEBOOK_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    check = nbformat.v4.new_code_cell("import sys; print(sys.executable)")  # which interpreter ran it
    nb.cells.append(check)
    client = nbclient.NotebookClient(
        nb,
        kernel_name=this_python_kernel,
        timeout=600,  # per cell
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},  # run where a reader runs it
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on any error
    errors = [
        out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs if out.output_type == "error"
    ]
    assert not errors
    assert Path(check.outputs[0]["text"].strip()).resolve() == Path(sys.executable).resolve()
    assert (tmp_path / "out" / "attention_view.html").is_file()


def test_the_committed_notebook_has_its_outputs():
    """It reads on GitHub: every code cell was run, in order, figures included, and no cell failed."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    outputs = [out for cell in code for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    assert sum("image/png" in out.get("data", {}) for out in outputs) >= 6
    assert NOTEBOOK.stat().st_size < 1_000_000  # modest figures
