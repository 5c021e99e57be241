"""Shared fixtures: the repo root, a tiny-run override list, and a subprocess runner for the entry points."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import transformer_attention.cli  # noqa: F401 - registers the resolvers and the model schema conf/ uses

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `pytest -n 2` on two cores: one thread per worker, inherited by every process a test starts
    # (torch's OpenMP threads spin while they wait, so oversubscribed cores slow every test down)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

# a model and run small enough to train in seconds on 2 cores
TINY = [
    "model.d_model=16",
    "model.num_heads=2",
    "model.num_layers=1",
    "model.dim_feedforward=32",
    "data.toy_size=400",
    "trainer.max_epochs=1",
    "trainer.enable_progress_bar=false",
]

# TINY's trainer settings for a pretraining (pretrain.py's and train.py model.init_from=pretrain's: pretrain.trainer)
TINY_PRETRAINING = [o.replace("trainer.", "pretrain.trainer.", 1) for o in TINY if o.startswith("trainer.")]


def entry_env() -> dict[str, str]:
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("PROJECT_ROOT", None)
    return env


def run_entry(
    script: str,
    *overrides: str,
    cwd: Path | None = None,
    timeout: int = 300,
    check: bool = True,
    env: dict[str, str] | None = None,
):
    """Run `python <repo>/<script> overrides...` in a fresh process (`env`: its environment, entry_env() by default);
    returns the CompletedProcess."""
    cmd = [sys.executable, str(ROOT / script), *overrides]
    env = env or entry_env()
    proc = subprocess.run(cmd, cwd=cwd or ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        output = f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output}")
    return proc


def installed_wheel(tmp_path: Path) -> tuple[Path, Path]:
    """A wheel built from a copy of the project (src/, pyproject.toml, README.md, LICENSE), and the folder it is
    installed into from that wheel, not editable (`tmp_path/site`, for PYTHONPATH): (wheel, folder)."""
    build = tmp_path / "project"
    shutil.copytree(ROOT / "src", build / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, build / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheels, site = tmp_path / "dist", tmp_path / "site"
    wheel_args = ["wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(build)]
    subprocess.run([*pip, *wheel_args], check=True, timeout=300)
    (wheel,) = wheels.glob("transformer_attention-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, timeout=300)
    return wheel, site


def run_dirs(log_dir: Path, task: str = "train") -> list[Path]:
    """The run folders a `paths.log_dir=log_dir` run wrote, oldest first."""
    return sorted((log_dir / task / "runs").iterdir())


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> tuple[Path, str]:
    """One finished TINY training run (no attention maps), shared by the tests that read a trained run or point
    other runs at it: its run folder and what it printed. A test may append to its log, never change its files."""
    log_dir = tmp_path_factory.mktemp("tiny_run") / "outputs"
    proc = run_entry("train.py", *TINY, "callbacks.attention_maps=null", f"paths.log_dir={log_dir}")
    (run,) = run_dirs(log_dir)
    return run, proc.stdout


@pytest.fixture
def tiny_overrides(tmp_path: Path) -> list[str]:
    return [*TINY, f"paths.log_dir={tmp_path / 'outputs'}"]


def count_forwards(monkeypatch: pytest.MonkeyPatch, net) -> tuple[dict[str, int], object]:
    """From now on, count the calls of `inference.forward` and of `net`'s own forward: ({"forward": n, "model": m},
    the hook's handle, to remove it)."""
    from transformer_attention import inference

    calls = {"forward": 0, "model": 0}
    real = inference.forward

    def counted(*args, **kwargs):
        calls["forward"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(inference, "forward", counted)
    handle = net.register_forward_hook(lambda *_: calls.__setitem__("model", calls["model"] + 1))
    return calls, handle
