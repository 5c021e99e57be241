"""SIGTERM during the end-of-fit analysis: the fit is done and saved, so the run says what stopped and gives the
evaluate.py command that runs the analysis on the saved checkpoint, exits with the shell's status, prints no
traceback and lets go of its locks."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest
from conftest import ROOT, TINY, entry_env

MARKER = "faithfulness: 250 texts"  # the console log says where the faithfulness analysis is: 200 texts or more


def read_lines(stream: IO[str]) -> tuple[list[str], threading.Thread]:
    """`stream`'s lines as they come, read on a thread of its own: no read in the test waits without a deadline."""
    lines: list[str] = []

    def read() -> None:
        for line in stream:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, reader


def wait_for(lines: list[str], marker: str, proc: subprocess.Popen, timeout_s: float) -> bool:
    """Whether a line holding `marker` comes within `timeout_s` seconds, while `proc` runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if any(marker in line for line in lines):
            return True
        time.sleep(0.2)
    return any(marker in line for line in lines)


@pytest.mark.slow
def test_a_sigterm_in_the_end_of_fit_analysis_says_how_to_run_it_again(tmp_path: Path):
    log_dir = tmp_path / "outputs"
    tiny = [o for o in TINY if not o.startswith("data.toy_size")]  # a validation split of 250 texts: the analysis
    # IG slow enough to be stopped (captum's Gauss-Legendre steps: 100000 would need a 75 GB matrix)
    analysis = ["callbacks.model_analysis.max_cost=null", "analysis.ig_steps=2000", "analysis.samples=250"]
    args = [*tiny, "data.toy_size=2500", *analysis, "callbacks.attention_maps=null", f"paths.log_dir={log_dir}"]
    command = [sys.executable, str(ROOT / "train.py"), *args]
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=entry_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    (out, out_reader), (err, err_reader) = read_lines(proc.stdout), read_lines(proc.stderr)
    try:
        reached = wait_for(out, MARKER, proc, timeout_s=600)
        said = "".join(out)[-3000:] + "".join(err)[-3000:]
        assert reached and proc.poll() is None, f"no {MARKER!r} line while train.py ran (600 s at most):\n{said}"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    for reader in (out_reader, err_reader):
        reader.join(timeout=30)  # the child has exited: its pipes end
    stdout, stderr = "".join(out), "".join(err)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "SIGTERM: stopped the end-of-fit analysis (the fit's checkpoints are saved)" in stdout + stderr
    assert "start it again with:\n  python evaluate.py ckpt_path=" in stdout + stderr
    assert not list(log_dir.rglob("*.pid")), list(log_dir.rglob("*"))  # every lock let go: none stale
