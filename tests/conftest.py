"""Shared fixtures: the repo root, a tiny-run override list, and a subprocess runner for the entry points."""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import transformer_attention.cli  # noqa: F401 - registers the resolvers and the model schema conf/ uses

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `pytest -n 2` on two cores: one thread per worker, inherited by every process a test starts
    # (torch's OpenMP threads spin while they wait, so oversubscribed cores slow every test down)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`pytest -n 2` (the README's command) steals work: a worker left without tests takes half of what the other
    has queued, where xdist's default keeps two or more queued on one worker while the other idles at the end."""
    if config.getoption("dist") == "load":  # -n without --dist
        from xdist.scheduler import WorkStealingScheduling

        return WorkStealingScheduling(config, log)
    return None


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


class WarmEntries:
    """tests/warm_entries.py, started once per test process and environment: entries forked from a process that
    imported their libraries already (see there), answered as subprocess.run answers."""

    def __init__(self) -> None:
        server = [sys.executable, str(ROOT / "tests" / "warm_entries.py")]
        self.proc = subprocess.Popen(server, env=entry_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.buffer = b""
        self.running: WarmProcess | None = None

    def answer(self, timeout: float | None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.proc.stdout], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"tests/warm_entries.py ended ({self.proc.wait()})")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def start(self, cmd: list[str], cwd: Path, env: dict[str, str], out: Path, err: Path) -> int:
        """Fork `cmd` (`python <script> args...`), its output to `out` and `err`: its pid."""
        if self.running is not None:  # a process a failed test left: its exit status answers first
            self.running.kill()
            self.running.wait()
        request = {"script": cmd[1], "args": cmd[2:], "cwd": str(cwd), "env": env, "stdout": str(out)}
        self.proc.stdin.write((json.dumps(request | {"stderr": str(err)}) + "\n").encode())
        self.proc.stdin.flush()
        return self.answer(60)["pid"]

    def run(self, cmd: list[str], cwd: Path, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory() as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            pid = self.start(cmd, cwd, env, out, err)
            try:
                rc = self.answer(timeout)["rc"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self.answer(60)
                raise subprocess.TimeoutExpired(cmd, timeout, out.read_text(), err.read_text()) from None
            return subprocess.CompletedProcess(cmd, rc, out.read_text(), err.read_text())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


class WarmProcess:
    """A warm `python <script> args...` as subprocess.Popen(cmd, stdout=PIPE, stderr=PIPE, text=True) gives it,
    for a test that signals it: pid, stdout and stderr (FIFOs), poll, wait, send_signal, kill, communicate."""

    def __init__(self, server: WarmEntries, cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.server, self.args, self.returncode = server, cmd, None
        fifos = [Path(tempfile.mkdtemp(prefix="warm-")) / name for name in ("stdout", "stderr")]
        for fifo in fifos:
            os.mkfifo(fifo)
        self.pid = server.start(cmd, cwd, env, *fifos)
        server.running = self
        self.stdout, self.stderr = (fifo.open() for fifo in fifos)  # in the order the child opens them
        shutil.rmtree(fifos[0].parent)  # both ends are open: the names are no longer needed

    def poll(self) -> int | None:
        return self.wait(timeout=0) if self.returncode is None and self.ended(0) else self.returncode

    def ended(self, timeout: float) -> bool:
        return b"\n" in self.server.buffer or bool(select.select([self.server.proc.stdout], [], [], timeout)[0])

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = self.server.answer(timeout)["rc"]
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            self.server.running = None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """The rest of its output and its exit (the streams read on threads of their own, as Popen reads them)."""
        read: dict[str, str] = {}
        readers = [
            threading.Thread(target=lambda n=name, f=stream: read.__setitem__(n, f.read()), daemon=True)
            for name, stream in (("out", self.stdout), ("err", self.stderr))
        ]
        for reader in readers:
            reader.start()
        self.wait(timeout)
        for reader in readers:
            reader.join(timeout=30)
        return read.get("out", ""), read.get("err", "")


WARM: dict[str, WarmEntries] = {}  # this test process's servers, one per environment, started by run_warm


def warm_server() -> tuple[WarmEntries, dict[str, str]]:
    """This test process's server for entry_env() (started now if none is), and that environment."""
    env = entry_env()
    # one server whatever the test: pytest names the test running in PYTEST_CURRENT_TEST
    key = json.dumps({k: v for k, v in env.items() if k != "PYTEST_CURRENT_TEST"}, sort_keys=True)
    if key not in WARM:
        WARM[key] = WarmEntries()
        atexit.register(WARM[key].close)
    return WARM[key], env


def popen_warm(script: Path, *args: str, cwd: Path) -> WarmProcess:
    """`python <script> args...` started warm, its stdout and stderr to read as it runs, for a test that signals it
    (a forked process takes a signal as one the shell started does)."""
    server, env = warm_server()
    return WarmProcess(server, [sys.executable, str(script), *args], cwd, env)


def run_warm(script: str, *overrides: str, cwd: Path | None = None, timeout: int = 300, check: bool = True):
    """run_entry's run, forked from tests/warm_entries.py (the libraries imported already: seconds less a run),
    for a run the test needs, not the start of a process it examines; the same CompletedProcess."""
    server, env = warm_server()
    cmd = [sys.executable, str(ROOT / script), *overrides]
    proc = server.run(cmd, cwd or ROOT, env, timeout)
    if check and proc.returncode != 0:
        output = f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}), warm:\n{output}")
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


@pytest.fixture(scope="session")
def regular_install(tmp_path_factory) -> tuple[Path, Path]:
    """installed_wheel's (wheel, folder), built once for the tests that read them (and never change them)."""
    return installed_wheel(tmp_path_factory.mktemp("regular_install"))


def run_dirs(log_dir: Path, task: str = "train") -> list[Path]:
    """The run folders a `paths.log_dir=log_dir` run wrote, oldest first."""
    return sorted((log_dir / task / "runs").iterdir())


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> tuple[Path, str]:
    """One finished TINY training run (no attention maps), shared by the tests that read a trained run or point
    other runs at it: its run folder and what it printed. A test may append to its log, never change its files."""
    log_dir = tmp_path_factory.mktemp("tiny_run") / "outputs"
    proc = run_warm("train.py", *TINY, "callbacks.attention_maps=null", f"paths.log_dir={log_dir}")
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
