"""The `python train.py` entry point, run as a user runs it, in a fresh process."""

from __future__ import annotations

import re
import time
from pathlib import Path

from conftest import TINY, run_dirs, run_entry


def final_metrics(stdout: str) -> dict[str, float]:
    block = stdout.split("final metrics", 1)[1]
    return {k: float(v) for k, v in re.findall(r"^\s+(\S+)\s+([-\d.eE+]+)$", block, flags=re.M)}


def test_fast_dev_run_from_repo_root(tiny_overrides):
    proc = run_entry("train.py", *tiny_overrides, "trainer.fast_dev_run=true")
    assert "final metrics" in proc.stdout


def test_fast_dev_run_from_another_directory(tmp_path: Path):
    log_dir = tmp_path / "logs"
    proc = run_entry("train.py", *TINY, f"paths.log_dir={log_dir}", "trainer.fast_dev_run=true", cwd=tmp_path)
    assert "final metrics" in proc.stdout
    assert len(run_dirs(log_dir)) == 1


def test_default_toy_run_is_accurate_and_writes_its_files(tmp_path: Path):
    """The README's default run: >= 95% toy test accuracy, checkpoints best and last, TensorBoard logs."""
    log_dir = tmp_path / "outputs"
    proc = run_entry("train.py", f"paths.log_dir={log_dir}", "trainer.enable_progress_bar=false", timeout=600)
    metrics = final_metrics(proc.stdout)
    assert metrics["test/acc"] >= 0.95, metrics
    (run,) = run_dirs(log_dir)
    ckpts = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert "last.ckpt" in ckpts and any(c.startswith("epoch_") for c in ckpts)
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert (run / "tokenizer.json").is_file() and (run / ".hydra" / "config.yaml").is_file()


def test_bigger_model_override_works(tiny_overrides):
    overrides = [o for o in tiny_overrides if not o.startswith("model.")]
    proc = run_entry(
        "train.py",
        *overrides,
        "model.num_heads=8",
        "model.d_model=64",
        "model.num_layers=3",
        "trainer.max_epochs=2",
        "trainer.limit_train_batches=3",
        "trainer.limit_val_batches=2",
    )
    assert "val/acc_best" in final_metrics(proc.stdout)


def test_heads_not_dividing_d_model_fails_at_once(tiny_overrides):
    start = time.monotonic()
    proc = run_entry("train.py", *tiny_overrides, "model.d_model=30", "model.num_heads=4", check=False)
    assert proc.returncode != 0
    assert "model.d_model=30" in proc.stderr and "model.num_heads=4" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - start < 60  # before any data or model work (the process start is most of it)


def test_two_runs_never_share_a_folder(tiny_overrides, tmp_path: Path):
    for _ in range(2):
        run_entry("train.py", *tiny_overrides, "trainer.fast_dev_run=true")
    runs = run_dirs(tmp_path / "outputs")
    assert len(runs) == 2 and runs[0] != runs[1]


def test_data_error_is_one_clear_line(tiny_overrides, tmp_path: Path):
    overrides = [o for o in tiny_overrides if not o.startswith("data.")]
    proc = run_entry("train.py", *overrides, "data=rotten_tomatoes", f"data.path={tmp_path / 'nope'}", check=False)
    assert proc.returncode != 0
    assert "data error" in proc.stderr and "nope" in proc.stderr
    assert "Traceback" not in proc.stderr
