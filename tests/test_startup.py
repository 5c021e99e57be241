"""What the entry points do to start and end sooner: Lightning is imported without scipy.signal (torchmetrics would
load it for an audio package's alias), which a later import still gets whole; the collector skips the start-up's
imports; a command that ended well skips the interpreter's teardown, not its atexit handlers."""

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


# an atexit handler, output still in stdout's buffer (a pipe: block-buffered) and an object whose finalizer the
# interpreter's teardown would run; `threaded` keeps a non-daemon thread running past the call
AT_EXIT = """
import atexit, sys, threading, time
from pathlib import Path
from transformer_attention.compat import exit_at_once
atexit.register(lambda: Path(sys.argv[1]).write_text("handler ran"))
class Finalized:
    def __del__(self):
        print("torn down")
kept = Finalized()
if sys.argv[2] == "threaded":
    threading.Thread(target=time.sleep, args=(0.5,)).start()
print("buffered", end="")
exit_at_once(3)
print(" and returned")
"""


def test_exit_at_once_runs_the_atexit_handlers_flushes_and_skips_the_teardown(tmp_path):
    def run(mode: str) -> tuple[subprocess.CompletedProcess, str]:
        mark = tmp_path / f"{mode}.txt"
        proc = subprocess.run(
            [sys.executable, "-c", AT_EXIT, str(mark), mode], env=entry_env(), capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        return proc, mark.read_text() if mark.is_file() else ""

    proc, mark = run("alone")
    assert (proc.returncode, proc.stdout, mark) == (3, "buffered", "handler ran"), proc.stderr[-3000:]
    proc, mark = run("threaded")  # a thread still running: the normal exit, which waits for it
    assert (proc.returncode, proc.stdout, mark) == (0, "buffered and returned\ntorn down\n", "handler ran")


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


def test_a_logged_result_on_its_device_is_not_moved_and_logs_the_same_values(monkeypatch):
    """compat.skip_needless_log_moves: Lightning's per-log move of a result already on the value's device is skipped
    (its walk never runs), any other move still runs, and a Metric logged as an object or a tensor gives the same
    step and epoch values as the plain computation."""
    import torch
    from lightning.pytorch.trainer.connectors.logger_connector import result
    from torchmetrics import MeanMetric

    from transformer_attention.compat import skip_needless_log_moves

    skip_needless_log_moves()
    skip_needless_log_moves()  # idempotent: wrapped once
    assert result._ResultMetric.to.skips_needless_moves
    logged = result._ResultCollection(training=True)
    mean, values, sizes = MeanMetric(), [1.0, 2.0, 6.0], [1, 3, 4]
    for value, size in zip(values, sizes, strict=True):
        mean(torch.tensor(value))
        logged.log("training_step", "metric", mean, on_step=True, on_epoch=True)
        logged.log("training_step", "tensor", torch.tensor(value), on_step=True, on_epoch=True, batch_size=size)
    step, epoch = logged.metrics(on_step=True)["callback"], logged.metrics(on_step=False)["callback"]
    assert float(step["metric_step"]) == 6.0 and float(step["tensor_step"]) == 6.0
    assert float(epoch["metric_epoch"]) == 3.0  # MeanMetric: the mean of the values
    assert float(epoch["tensor_epoch"]) == sum(v * n for v, n in zip(values, sizes, strict=True)) / sum(sizes)

    kept = logged["training_step.tensor"]
    monkeypatch.setattr(result, "apply_to_collection", lambda *a, **k: (_ for _ in ()).throw(AssertionError("moved")))
    assert kept.to("cpu") is kept and kept.to(torch.device("cpu")) is kept  # on its device: no walk
    monkeypatch.undo()
    kept.to(torch.float64)  # anything else: Lightning's own move
    assert kept.value.dtype == torch.float64
