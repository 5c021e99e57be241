"""A quiet console: a default run prints each log line once, no vendor tips, no warnings the project
cannot act on; the run's log file keeps every line."""

from __future__ import annotations

import logging
import re
from collections import Counter

import lightning.pytorch  # noqa: F401  (its handlers exist before the test looks)
from conftest import TINY, run_dirs, run_entry

from transformer_attention.compat import DropTips, quiet_console

LOG_LINE = re.compile(r"^\[[\d\- :,]+\]\[([\w.]+)\]\[(\w+)\] - (.*)$")  # Hydra's format


def test_a_run_prints_each_line_once(tmp_path):
    proc = run_entry("train.py", *TINY, f"paths.log_dir={tmp_path / 'outputs'}")
    out = proc.stdout + proc.stderr
    messages = [m.group(3) for line in out.splitlines() if (m := LOG_LINE.match(line))]
    lightning = [m for line in out.splitlines() if (m := LOG_LINE.match(line)) and m.group(1).startswith("lightning")]
    assert lightning, out  # Lightning's lines are there, in Hydra's format
    repeated = {text: n for text, n in Counter(messages).items() if n > 1}
    assert not repeated, repeated
    assert not [
        line for line in out.splitlines() if line.startswith(("INFO: ", "WARNING: "))
    ]  # Lightning's own handler
    assert out.count("] - model: ") == 1 and out.count(" trainable), ") == 1  # the model summary once
    assert "Tip:" not in out and "litlogger" not in out
    assert "deprecated" not in out.lower()
    assert "GPU available" in out and "final metrics" in out  # the useful lines stay
    (run,) = run_dirs(tmp_path / "outputs")
    assert "GPU available" in (run / "train.log").read_text()  # and the log file keeps them


def test_quiet_console_is_idempotent_and_leaves_a_bare_session_alone():
    root = logging.getLogger()
    saved = root.handlers[:]
    try:
        root.handlers = []  # e.g. a notebook: Lightning's own handler is the only one that prints
        before = logging.getLogger("lightning").handlers[:]
        quiet_console()
        assert logging.getLogger("lightning").handlers == before
        root.addHandler(logging.NullHandler())
        quiet_console()
        quiet_console()
        assert not [h for h in logging.getLogger("lightning").handlers if type(h) is logging.StreamHandler]
        rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
        assert sum(isinstance(f, DropTips) for f in rank_zero.filters) == 1
        tip = logging.LogRecord("x", logging.INFO, "f", 1, "\U0001f4a1 Tip: try this product", None, None)
        assert not DropTips().filter(tip)
        assert DropTips().filter(logging.LogRecord("x", logging.INFO, "f", 1, "GPU available: False", None, None))
    finally:
        root.handlers = saved


def test_the_first_epoch_line_after_a_mid_epoch_resume_gives_that_epochs_time(monkeypatch, caplog):
    """A fit resumed in the middle of an epoch starts no epoch (Lightning skips on_train_epoch_start): the first line
    times the epoch from the resumed fit's start, not from whenever the clock began (2,177 s in the issue)."""
    from types import SimpleNamespace

    from transformer_attention.callbacks import console

    times = [1000.0, 1002.5]  # the clock when the resumed fit starts and when its first epoch ends
    monkeypatch.setattr(console.time, "perf_counter", lambda: times.pop(0) if len(times) > 1 else times[0])
    monkeypatch.setattr(console.LineProgress, "_metrics", lambda self, trainer, module: "train/loss 0.5")
    trainer = SimpleNamespace(max_epochs=5, current_epoch=2, global_step=7)
    bar = console.LineProgress()
    with caplog.at_level(logging.INFO, logger=console.__name__):
        bar.on_train_start(trainer, None)  # then straight to the epoch's end, as after a mid-epoch resume
        bar.on_train_epoch_end(trainer, None)
    assert "epoch 3/5, step 7, 2.5 s: train/loss 0.5" in caplog.text
