"""SIGTERM after the fit, or in evaluate.py: in train.py's end-of-fit analysis, in its test, in evaluate.py's
analyses. Each stop keeps what was measured (metrics.json), says what stopped and a command that, pasted, does what
is left, exits with the shell's status, prints no traceback and lets go of its locks."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

import pytest
from conftest import ROOT, TINY, popen_warm, run_dirs
from test_pasted_commands import paste, printed_command

# an entry point with one function made slow, so a signal surely lands in it: it prints MARKER when it starts
SLOWED = """
import runpy, sys, time
from {module} import {owner} as owner
real = owner.{name}
def slowed(*args, **kwargs):
    print({marker!r}, flush=True)
    time.sleep({pause})
    return real(*args, **kwargs)
owner.{name} = slowed
sys.argv = [{entry!r}, *sys.argv[1:]]
runpy.run_path({entry!r}, run_name="__main__")
"""
MARKER = "slowed part started"


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


def stopped_in(
    slowed: str, entry: str, args: list[str], cwd: Path, pause: float = 600, signum: int = signal.SIGTERM
) -> tuple[int, str, str]:
    """Run `entry` with `slowed` (`module:owner.name`) pausing `pause` seconds each call, send `signum` once it has
    started, and return the exit status, stdout and stderr."""
    module, _, rest = slowed.partition(":")
    owner, name = rest.split(".")
    script = cwd / "slowed.py"
    where = {"module": module, "owner": owner, "name": name, "entry": str(ROOT / entry)}
    script.write_text(SLOWED.format(**where, marker=MARKER, pause=pause))
    proc = popen_warm(script, *args, cwd=cwd)  # a forked process: signalled as one a shell started
    (out, out_reader), (err, err_reader) = read_lines(proc.stdout), read_lines(proc.stderr)
    try:
        reached = wait_for(out, MARKER, proc, timeout_s=300)
        said = "".join(out)[-3000:] + "".join(err)[-3000:]
        assert reached and proc.poll() is None, f"{slowed} was not reached while {entry} ran:\n{said}"
        proc.send_signal(signum)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    for reader in (out_reader, err_reader):
        reader.join(timeout=30)  # the child has exited: its pipes end
    return proc.returncode, "".join(out), "".join(err)


def check_stopped(rc: int, stdout: str, stderr: str, log_dir: Path, said: str, signum: int = 15) -> None:
    """The shell's status for `signum` (15: SIGTERM), no traceback, the line `said`, no live lock left."""
    assert rc == 128 + signum, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert said in stdout + stderr, (stdout + stderr)[-3000:]
    assert not list(log_dir.rglob("*.pid")), list(log_dir.rglob("*"))  # every lock let go: none stale


@pytest.mark.slow
def test_a_sigterm_in_the_end_of_fit_analysis_keeps_the_fit_and_says_how_to_run_it(tmp_path: Path):
    log_dir = tmp_path / "outputs"
    analysis = ["callbacks.model_analysis.max_cost=null", "callbacks.model_analysis.analyses=[heads]"]
    args = [*TINY, *analysis, "callbacks.attention_maps=null", f"paths.log_dir={log_dir}"]
    slowed = "transformer_attention.callbacks:analysis.run_analyses"
    rc, stdout, stderr = stopped_in(slowed, "train.py", args, tmp_path)
    check_stopped(rc, stdout, stderr, log_dir, "SIGTERM: stopped the end-of-fit analysis, before the test")
    assert "resume with" not in stdout + stderr  # nothing is left to train
    (run,) = run_dirs(log_dir)
    assert "val/acc" in json.loads((run / "metrics.json").read_text())  # the fit's metrics kept
    command = printed_command(stdout + stderr, "start it again with:")
    assert command.startswith("python evaluate.py ckpt_path=") and "'analyses=[heads]'" in command
    pasted = paste(command, tmp_path)  # the analysis and the test the stop left undone
    assert pasted.returncode == 0, pasted.stderr[-3000:]
    assert "head importance" in pasted.stdout and "test metrics of" in pasted.stdout


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_stop_in_the_test_of_train_keeps_the_fit_and_says_how_to_test_it(tmp_path: Path, signum: int):
    log_dir = tmp_path / "outputs"
    quick = ["data.batch_size=8", "callbacks.model_analysis=null", "callbacks.attention_maps=null"]
    args = [*TINY, *quick, f"paths.log_dir={log_dir}"]
    test_step = "transformer_attention.module:ClassifierModule.test_step"
    rc, stdout, stderr = stopped_in(test_step, "train.py", args, tmp_path, signum=signum)
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    said = f"{name}: stopped the test (the fit's metrics are kept in metrics.json)"
    check_stopped(rc, stdout, stderr, log_dir, said, signum=signum)
    (run,) = run_dirs(log_dir)
    kept = json.loads((run / "metrics.json").read_text())
    assert "val/acc" in kept and "test/acc" not in kept  # what was measured, nothing half measured
    command = printed_command(stdout + stderr, "start it again with:")
    assert command.startswith("python evaluate.py ckpt_path=") and "epoch_" in command  # the best checkpoint
    pasted = paste(command, tmp_path)
    assert pasted.returncode == 0, pasted.stderr[-3000:]
    assert "test metrics of" in pasted.stdout and "was trained on" not in pasted.stdout + pasted.stderr


@pytest.mark.slow
def test_a_sigterm_in_evaluates_analyses_keeps_the_test_metrics(tiny_run, tmp_path: Path):
    run, _ = tiny_run
    ckpt = next((run / "checkpoints").glob("epoch_*.ckpt"))
    log_dir = tmp_path / "outputs"
    args = [f"ckpt_path={ckpt}", "analyses=[heads]", f"paths.log_dir={log_dir}"]
    slowed = "transformer_attention.tasks:evaluate.run_analyses"
    rc, stdout, stderr = stopped_in(slowed, "evaluate.py", args, tmp_path)
    check_stopped(rc, stdout, stderr, log_dir, "SIGTERM: stopped the analyses of")
    (evaluated,) = run_dirs(log_dir, task="evaluate")
    assert "test/acc" in json.loads((evaluated / "metrics.json").read_text())  # measured before the analyses
    command = printed_command(stdout + stderr, "start it again with:")
    pasted = paste(command, tmp_path)
    assert pasted.returncode == 0, pasted.stderr[-3000:]
    assert "head importance" in pasted.stdout


@pytest.mark.slow
def test_a_sigterm_while_evaluate_reads_its_data_says_so_and_how_to_start_again(tiny_run, tmp_path: Path):
    run, _ = tiny_run
    ckpt = next((run / "checkpoints").glob("epoch_*.ckpt"))
    log_dir = tmp_path / "outputs"
    slowed = "transformer_attention.data.datamodule:ReviewDataModule.setup"
    args = [f"ckpt_path={ckpt}", f"paths.log_dir={log_dir}"]
    rc, stdout, stderr = stopped_in(slowed, "evaluate.py", args, tmp_path)
    check_stopped(rc, stdout, stderr, log_dir, "SIGTERM: stopped reading the data to test")
    (evaluated,) = run_dirs(log_dir, task="evaluate")
    assert not (evaluated / "metrics.json").exists()  # nothing was measured
    pasted = paste(printed_command(stdout + stderr, "start it again with:"), tmp_path)
    assert pasted.returncode == 0, pasted.stderr[-3000:]
    assert "test metrics of" in pasted.stdout
