"""What the entry points do to start sooner: Lightning is imported without scipy.signal (torchmetrics would load it
for an audio package's alias), which a later import still gets whole; the collector skips the start-up's imports."""

from __future__ import annotations

import subprocess
import sys

from conftest import entry_env

WITHOUT_SCIPY_SIGNAL = """
import sys
from transformer_attention.compat import without_scipy_signal
with without_scipy_signal():
    import lightning.pytorch, torchmetrics
print("loaded with Lightning:", "scipy.signal" in sys.modules)
import scipy.signal
from scipy.signal import windows
print("later:", scipy.signal.__file__.endswith("__init__.py"), callable(scipy.signal.lfilter), callable(windows.hann))
"""


def test_lightning_loads_without_scipy_signal_and_a_later_import_gets_it_whole():
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_SCIPY_SIGNAL], env=entry_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["loaded with Lightning: False", "later: True True True"]


def test_a_loaded_scipy_signal_is_left_as_it_is():
    code = (
        "import scipy.signal, sys; from transformer_attention.compat import without_scipy_signal\n"
        "before = sys.modules['scipy.signal']\n"
        "with without_scipy_signal(): import lightning.pytorch\n"
        "print(sys.modules['scipy.signal'] is before)"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=entry_env(), capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "True", proc.stderr[-3000:]


def test_the_collector_is_back_on_when_a_run_fails_before_its_task():
    code = (
        "import gc; from omegaconf import OmegaConf; from transformer_attention.cli.run import run\n"
        "try:\n    run('train', OmegaConf.create({'model': {'num_heads': 5}}))\n"
        "except BaseException as err:\n    print(type(err).__name__, gc.isenabled())"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=entry_env(), capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().endswith(" True"), proc.stdout + proc.stderr[-3000:]
