"""SIGTERM during the end-of-fit analysis: the fit is done and saved, so the run says what stopped and gives the
evaluate.py command that runs the analysis on the saved checkpoint, exits with the shell's status, prints no
traceback and lets go of its locks."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TINY, entry_env


@pytest.mark.slow
def test_a_sigterm_in_the_end_of_fit_analysis_says_how_to_run_it_again(tmp_path: Path):
    log_dir = tmp_path / "outputs"
    tiny = [o for o in TINY if not o.startswith("data.toy_size")]  # a validation split of 250 texts: the analysis
    args = [*tiny, "data.toy_size=2500", "callbacks.model_analysis.max_cost=null", "analysis.ig_steps=100000",
            "analysis.samples=250",
            "callbacks.attention_maps=null", f"paths.log_dir={log_dir}"]  # fmt: skip
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], cwd=tmp_path, env=entry_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        seen = []
        for line in proc.stdout:  # the console log: wait until the faithfulness analysis runs
            seen.append(line)
            if "faithfulness: 250 texts" in line:  # says where it is: 200 texts or more
                break
        assert proc.poll() is None, "".join(seen)[-3000:] + proc.stderr.read()[-3000:]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(seen) + out
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert "SIGTERM: stopped the end-of-fit analysis (the fit's checkpoints are saved)" in out + err
    assert "start it again with:\n  python evaluate.py ckpt_path=" in out + err
    assert not list(log_dir.rglob("*.pid")), list(log_dir.rglob("*"))  # every lock let go: none stale
