"""What the entry points do to start sooner: the collector skips the start-up's imports, and is back on whatever
way a run ends."""

from __future__ import annotations

import subprocess
import sys

from conftest import entry_env


def test_the_collector_is_back_on_when_a_run_fails_before_its_task():
    code = (
        "import gc; from omegaconf import OmegaConf; from transformer_attention.cli.run import run\n"
        "try:\n    run('train', OmegaConf.create({'model': {'num_heads': 5}}))\n"
        "except BaseException as err:\n    print(type(err).__name__, gc.isenabled())"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=entry_env(), capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().endswith(" True"), proc.stdout + proc.stderr[-3000:]
