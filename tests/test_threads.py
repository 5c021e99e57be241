"""The entry points let torch's OpenMP threads sleep while they wait (OMP_WAIT_POLICY=PASSIVE), set before torch is
imported, unless the user chose threads or a policy; benchmarks/busy_cores.py measures what it buys."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, entry_env

# the entry point as it is, but its task replaced by one that reports what torch started with
REPORTING_TASK = """
import importlib, os, runpy, sys
run = importlib.import_module("transformer_attention.cli.run")  # the module (the package exports its function)

calm_threads = run.calm_threads

def calm():
    print("torch loaded when the policy was chosen:", "torch" in sys.modules)
    return calm_threads()

def report(cfg):
    print("OMP_WAIT_POLICY=" + repr(os.environ.get("OMP_WAIT_POLICY")))

run.calm_threads = calm
run.TASKS[{task!r}] = lambda: report
sys.argv = [{script!r}, *sys.argv[1:]]
runpy.run_path({script!r}, run_name="__main__")
"""


def started_with(script: str, task: str, tmp_path, **env: str) -> str:
    wrapper = tmp_path / f"report_{task}.py"
    wrapper.write_text(REPORTING_TASK.format(task=task, script=str(ROOT / script)))
    environment = {k: v for k, v in entry_env().items() if not k.startswith("OMP_")} | env
    args = [f"paths.log_dir={tmp_path / 'out'}", "hydra.job_logging.root.level=WARNING"]
    proc = subprocess.run(
        [sys.executable, str(wrapper), *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torch loaded when the policy was chosen: False" in proc.stdout  # OpenMP reads it when torch loads
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("OMP_WAIT_POLICY=")]
    return line


def test_without_a_user_setting_the_threads_sleep_while_they_wait(tmp_path):
    assert started_with("train.py", "train", tmp_path) == "OMP_WAIT_POLICY='PASSIVE'"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "True PASSIVE"),  # what the entry point above shows, here without Hydra
        ({"OMP_NUM_THREADS": "1"}, "False None"),  # the user chose threads: no policy added
        ({"OMP_WAIT_POLICY": "ACTIVE"}, "False ACTIVE"),  # the user's policy stays
        ({"OMP_WAIT_POLICY": ""}, "False "),  # set, even empty: the user's
    ],
)
def test_a_user_setting_is_left_as_it_is(env: dict[str, str], expected: str):
    code = (
        "import os; from transformer_attention.compat import calm_threads; "
        "print(calm_threads(), os.environ.get('OMP_WAIT_POLICY'))"
    )
    environment = {k: v for k, v in entry_env().items() if not k.startswith("OMP_")} | env
    proc = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == expected.strip()


def test_too_late_once_torch_is_loaded():
    code = "import os, torch; from transformer_attention.compat import calm_threads; print(calm_threads())"
    environment = {k: v for k, v in entry_env().items() if not k.startswith("OMP_")}
    proc = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False"  # libgomp read its settings when torch loaded: nothing is set
