"""Each workaround in compat.py stays only while upstream has the bug. A strict xfail asserts the fixed behaviour
of the installed release: today it fails (xfail); the release that fixes the bug makes it pass, which strict turns
into a failure that says to remove the workaround. The guards' bounds are the releases the tests were run on."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import warnings
from importlib.metadata import version

import pytest
from conftest import entry_env

from transformer_attention import compat

FIXED = "still there; a pass (XPASS) means upstream fixed it: remove the workaround, its guard and this test"


def run_python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], env=entry_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


@pytest.mark.parametrize(("package", "bound"), [("lightning", compat.LIGHTNING_CHECKED)])
def test_the_installed_releases_are_the_ones_the_workarounds_were_checked_on(package: str, bound: str):
    """A newer release turns its workarounds off: run this file on it, then remove each workaround whose test
    passes (XPASS) and raise the bound for the others."""
    assert compat.affected(package, bound), f"{package} {version(package)} is newer than {bound}: check it here"
    assert not compat.affected(package, "0.1")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"Lightning-AI/pytorch-lightning#4621; {FIXED}")
def test_lightning_leaves_its_records_to_the_root_handlers_it_finds():
    """Imported after logging is set up, Lightning adds no console handler of its own (lightning/__init__.py does:
    every record printed twice)."""
    code = (
        "import logging; logging.basicConfig(); import lightning\n"
        "print([type(h).__name__ for h in logging.getLogger('lightning').handlers])"
    )
    assert run_python(code) == "[]"


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"Lightning-AI/pytorch-lightning#21294; {FIXED}")
def test_lightning_prints_no_product_tips(caplog: pytest.LogCaptureFixture):
    import lightning as L

    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    ours = [f for f in rank_zero.filters if isinstance(f, compat.DropTips)]  # quiet_console's, if a test ran it
    for f in ours:
        rank_zero.removeFilter(f)
    try:
        with caplog.at_level(logging.INFO, logger="lightning.pytorch.utilities.rank_zero"):
            L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
    finally:
        for f in ours:
            rank_zero.addFilter(f)
    assert "GPU available" in caplog.text  # the records were caught
    assert compat.TIP_PREFIX not in caplog.text


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"Lightning-AI/pytorch-lightning#21326; {FIXED}")
def test_lightning_raises_no_leafspec_deprecation_of_its_own():
    from lightning.pytorch.utilities import CombinedLoader

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CombinedLoader([[1, 2], [3]], mode="max_size_cycle")
    assert not [w for w in caught if "LeafSpec" in str(w.message)]


@pytest.mark.xfail(strict=True, raises=ValueError, reason=f"Lightning-AI/pytorch-lightning#19432; {FIXED}")
def test_a_csv_writer_appends_to_a_file_another_writer_started(tmp_path):
    """A ddp_spawn run's shape: the fit and the test stage each unpickle the parent's logger, the test's writes
    after the fit's. Fixed, the file has every column and both rows."""
    from lightning.pytorch.loggers import CSVLogger

    parent = CSVLogger(tmp_path, name="", version="")
    parent.experiment  # noqa: B018  (the writer exists before the stages are spawned)
    pickled = pickle.dumps(parent)
    fit, test = pickle.loads(pickled), pickle.loads(pickled)
    fit.log_metrics({"train/loss": 0.5, "val/acc": 0.75}, step=0)
    fit.save()
    test.log_metrics({"test/acc": 0.5}, step=1)
    test.save()  # today: ValueError, dict contains fields not in fieldnames
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert lines[0] == "step,test/acc,train/loss,val/acc" and len(lines) == 3


def test_continue_csv_header_lets_the_second_writer_append(tmp_path):
    """The workaround: the parent's logger, told the header before the test stage is spawned, appends."""
    from lightning.pytorch.loggers import CSVLogger

    parent = CSVLogger(tmp_path, name="", version="")
    parent.experiment  # noqa: B018
    fit = pickle.loads(pickle.dumps(parent))
    fit.log_metrics({"train/loss": 0.5, "val/acc": 0.75}, step=0)
    fit.save()
    compat.continue_csv_header(parent)
    test = pickle.loads(pickle.dumps(parent))
    test.log_metrics({"test/acc": 0.5}, step=1)
    test.save()
    assert (tmp_path / "metrics.csv").read_text().splitlines() == [
        "step,test/acc,train/loss,val/acc",
        "0,,0.5,0.75",
        "1,0.5,,",
    ]
