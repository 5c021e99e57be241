"""A real `tensorboard` server on a free loopback port, for the tests that read what it serves."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from conftest import entry_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url: str, body: dict | None = None, timeout: float = 10) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


@contextlib.contextmanager
def tensorboard(log_dir: Path, log: Path, ready: Callable[[str], bool], patience: float = 90) -> Iterator[str]:
    """`tensorboard --logdir log_dir` at its defaults, its output to `log`: its base URL once `ready(base)` is
    true (the logs are read in the background), then stopped."""
    port = free_port()
    with log.open("w") as out:
        cmd = [sys.executable, "-m", "tensorboard.main", f"--logdir={log_dir}", "--host=127.0.0.1"]
        cmd.append(f"--port={port}")
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=entry_env())
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + patience
            while True:
                assert proc.poll() is None, f"tensorboard exited with {proc.returncode}: {log.read_text()}"
                try:
                    if ready(base):
                        break
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    pass
                assert time.monotonic() < deadline, f"not ready within {patience} s: {log.read_text()}"
                time.sleep(0.5)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
