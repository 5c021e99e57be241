"""The console a person reads, as conf/hydra/default.yaml sets it up: short log lines (`ShortFormat`), written to
stdout as it is at each line (`ConsoleHandler`), without the lines only the run's log file needs (`FileOnly`)."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

PROJECT = "transformer_attention"
# Lightning's lines the console needs not (the file keeps them): the seed (in the config), accelerators there are
# none of, the checkpoint a test restores (the test's line names it), a note at each `estimated_stepping_batches`
FILE_ONLY = (
    "Seed set to",
    "TPU available",
    "HPU available",
    "Restoring states from the checkpoint path",
    "Loaded model weights from the checkpoint",
    "Loading `train_dataloader` to estimate number of stepping batches",
)


class ShortFormat(logging.Formatter):
    """`12:03:41 console: epoch 3/10`: the time, the source (this project's module, else the library), a level."""

    default_time_format, default_msec_format = "%H:%M:%S", None

    def format(self, record: logging.LogRecord) -> str:
        parts = record.name.split(".")
        source = parts[-1] if parts[0] == PROJECT else parts[0]
        level = "" if record.levelno == logging.INFO else f" {record.levelname}"
        text = f"{self.formatTime(record)} {source}{level}: {record.getMessage()}"
        return text + ("\n" + self.formatException(record.exc_info) if record.exc_info else "")


class ConsoleHandler(logging.StreamHandler):
    """Log lines to `sys.stdout` as it is at each line: while the terminal's progress display runs, its stand-in
    stdout prints them above the display, which would otherwise redraw over them."""

    @property
    def stream(self) -> TextIO:
        return sys.stdout

    @stream.setter
    def stream(self, value: TextIO) -> None:  # StreamHandler sets the stream it was given: always stdout here
        pass


class FileOnly(logging.Filter):
    """Keeps the lines of `FILE_ONLY`, and the thread count's, off the console (set on its handler only)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name != f"{PROJECT}.threads" and not str(record.msg).startswith(FILE_ONLY)
