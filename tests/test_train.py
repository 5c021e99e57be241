"""The `python train.py` entry point, run as a user runs it, in a fresh process."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest
from conftest import TINY, run_dirs, run_entry, run_warm


def final_metrics(stdout: str) -> dict[str, float]:
    block = stdout.split("final metrics", 1)[1]
    return {k: float(v) for k, v in re.findall(r"^\s+(\S+)\s+([-\d.eE+]+)$", block, flags=re.M)}


def test_fast_dev_run_prints_the_metrics_it_keeps(tiny_overrides, tmp_path: Path):
    """The final table holds the test and training metrics, each the value metrics.json keeps (to the four
    significant digits printed); after one step the two classes are still about even, a test loss near ln 2."""
    proc = run_entry("train.py", *tiny_overrides, "trainer.fast_dev_run=true")
    out = proc.stdout + proc.stderr
    # the hints hold for what a fast_dev_run wrote (no checkpoint), times and counts read right
    assert "last.ckpt" not in out and "fit's 0 s" not in out and "1 batches" not in out, out
    assert "a fast_dev_run saves none" in out
    printed = final_metrics(proc.stdout)
    (run,) = run_dirs(tmp_path / "outputs")
    kept = json.loads((run / "metrics.json").read_text())
    assert {"test/acc", "test/f1", "test/loss", "train/loss"} <= set(printed), printed
    for name, value in printed.items():
        assert value == pytest.approx(kept[name], rel=1e-3, abs=1e-4), name
    assert printed["test/loss"] == pytest.approx(math.log(2), abs=0.15), printed


@pytest.mark.slow
def test_fast_dev_run_from_another_directory(tmp_path: Path):
    log_dir = tmp_path / "logs"
    proc = run_warm("train.py", *TINY, f"paths.log_dir={log_dir}", "trainer.fast_dev_run=true", cwd=tmp_path)
    (run,) = run_dirs(log_dir)  # under the log folder given, not the working directory's outputs/
    assert final_metrics(proc.stdout)["test/acc"] == pytest.approx(
        json.loads((run / "metrics.json").read_text())["test/acc"], abs=1e-4
    )
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_default_toy_run_is_accurate_and_writes_its_files(tmp_path: Path):
    """The README's default run: >= 95% toy test accuracy, checkpoints best and last, TensorBoard logs; its captured
    console a page a person reads: at most 60 lines, none over 160 characters or with trailing spaces, epoch lines
    under 120, the config as what the run changes (only where its logs go) and where the whole tree is."""
    log_dir = tmp_path / "outputs"
    proc = run_warm("train.py", "paths.log_dir=outputs", cwd=tmp_path, timeout=600)  # as typed, beside its outputs
    metrics = final_metrics(proc.stdout)
    assert metrics["test/acc"] >= 0.95, metrics
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) <= 60, "\n".join(lines)
    assert not [line for line in lines if len(line) > 160 or line != line.rstrip()]
    epochs = [line for line in lines if " console: epoch " in line]
    assert len(epochs) == 10 and max(len(line) for line in epochs) < 120, epochs
    (run,) = run_dirs(log_dir)
    assert lines[:3] == [
        "config: what this run changes from the defaults (console.tree=full prints all of it)",
        "  paths.log_dir: outputs",
        f"config: all of it in {(run / 'config_tree.log').relative_to(tmp_path)}",
    ]
    assert "\npretrain:\n" in (run / "config_tree.log").read_text()
    ckpts = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert "last.ckpt" in ckpts and any(c.startswith("epoch_") for c in ckpts)
    assert list(run.glob("events.out.tfevents.*"))
    assert (run / "tokenizer.json").is_file() and (run / ".hydra" / "config.yaml").is_file()


@pytest.mark.slow
def test_bigger_model_override_works(tiny_overrides):
    overrides = [o for o in tiny_overrides if not o.startswith("model.")]
    proc = run_warm(
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


@pytest.mark.slow
def test_two_runs_never_share_a_folder(tiny_overrides, tmp_path: Path):
    for _ in range(2):
        run_warm("train.py", *tiny_overrides, "trainer.fast_dev_run=true")
    runs = run_dirs(tmp_path / "outputs")
    assert len(runs) == 2 and runs[0] != runs[1]


def test_data_error_is_one_clear_line(tiny_overrides, tmp_path: Path):
    overrides = [o for o in tiny_overrides if not o.startswith("data.")]
    proc = run_entry("train.py", *overrides, "data=rotten_tomatoes", f"data.path={tmp_path / 'nope'}", check=False)
    assert proc.returncode != 0
    assert "data error" in proc.stderr and "nope" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_one_csv_file_trains_validates_and_tests_on_carved_splits(tmp_path: Path):
    """Your own reviews in one file: validation and test are carved from it (seeded), and train keeps no text
    either holds; the run reports test metrics and says how many rows it carved."""
    from test_data import reviews

    from transformer_attention.data import ReviewDataModule
    from transformer_attention.data.splits import rows_sharing_text

    path = tmp_path / "reviews.csv"
    reviews(n_train=300, n_test=0)["train"].to_csv(path, index=False)
    tiny = [o for o in TINY if not o.startswith("data.toy_size")]
    proc = run_warm("train.py", *tiny, "data=local", f"data.path={path}", f"paths.log_dir={tmp_path / 'out'}")
    metrics = final_metrics(proc.stdout)
    assert "val/acc_best" in metrics, metrics
    assert re.search(r"no test split: \d+ rows carved from train \(data.test_fraction=0.1\)", proc.stdout + proc.stderr)
    assert "Generating train split" not in proc.stdout + proc.stderr  # no `datasets` progress bar in the log
    dm = ReviewDataModule(name="local", path=str(path), vocab_size=500, min_frequency=1)  # the run's split settings
    raw = dm.load()
    n_val, n_test = len(raw["validation"]["text"]), len(raw["test"]["text"])
    assert n_val == 30 and 20 <= n_test <= 27  # 10% of 300, then of what train kept (less rows sharing text)
    (run,) = run_dirs(tmp_path / "out")
    right = json.loads((run / "metrics.json").read_text())["test/acc"] * n_test  # the run tested these rows
    assert right == pytest.approx(round(right), abs=1e-3), (right, n_test)
    for split in ("validation", "test"):
        assert not rows_sharing_text(raw["train"]["text"], raw[split]["text"]), split


def test_a_run_prints_one_table_and_nothing_its_own_set_up_causes(tiny_overrides):
    """The console of a run (stdout not a terminal): a line per epoch instead of a redrawn bar, the model's layers
    without an empty FLOPs column, one final table (aligned, no learning rates, no duplicated loss), and none of
    the messages Lightning prints when the project's set-up trips it."""
    overrides = [o for o in tiny_overrides if "enable_progress_bar" not in o]
    proc = run_entry("train.py", *overrides, "trainer.max_epochs=2")
    out = proc.stdout + proc.stderr
    for message in (
        "Trainer already configured with model summary",  # Lightning's ModelSummary callback and the trainer's own
        "to estimate number of stepping batches",  # the warmup schedule asks for the step count
        "smaller than the logging interval",  # fewer batches than log_every_n_steps
        "Total Flops",
        "Test metric",  # Lightning's own test table beside the run's
        "lr-AdamW",
    ):
        assert message not in out, message
    assert re.search(r"epoch 1/2, step \d+, [\d.]+ s \| train acc", out) and re.search(r"epoch 2/2, step", out)
    assert out.count("final metrics") == 1
    table = final_metrics(proc.stdout)
    assert not [k for k in table if k.endswith(("_step", "_epoch")) or "lr" in k.split("/")[-1]]
    rows = proc.stdout.split("final metrics", 1)[1].splitlines()[1:]
    starts = {len(r) - len(r.lstrip(" ").split(" ", 1)[1].lstrip()) for r in rows if r.strip()}
    assert len(starts) == 1  # the values stand in one column
    tree = proc.stdout.split("config: all of it in ", 1)[0]  # what comes before the path of the whole tree
    assert "  model.d_model: 16" in tree and "pretrain" not in tree  # what this run changes; it does not pretrain
    (run,) = run_dirs(Path(overrides[-1].split("=", 1)[1]))
    assert "\npretrain:\n" in (run / "config_tree.log").read_text()  # the whole tree is kept
