"""The console a person reads, as conf/hydra/default.yaml sets it up: short log lines (`ShortFormat`), written to
stdout as it is at each line (`ConsoleHandler`), without the lines only the run's log file needs (`FileOnly`); in a
terminal, lines broken between words to fit its width (`fit`), never inside a word or a path."""

from __future__ import annotations

import logging
import re
import shutil
import sys
import textwrap
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
    """`12:03:41 console: epoch 3/10`: the time, the source (this project's module, else the library), a level;
    no source where the line starts by naming it (`12:03:41 skip-gram: epoch 1/10`, not `skipgram: skip-gram:`)."""

    default_time_format, default_msec_format = "%H:%M:%S", None

    def format(self, record: logging.LogRecord) -> str:
        parts, said = record.name.split("."), record.getMessage()
        source = parts[-1] if parts[0] == PROJECT else parts[0]
        named = re.sub(r"\W", "", said.split(":", 1)[0]).lower() == source.replace("_", "").lower()
        level = "" if record.levelno == logging.INFO else f" {record.levelname}"
        head = f"{level.strip()} " if named and level else "" if named else f"{source}{level}: "
        text = f"{self.formatTime(record)} {head}{said}"
        return text + ("\n" + self.formatException(record.exc_info) if record.exc_info else "")


def terminal_width() -> int | None:
    """The columns of the terminal that stdout is; None where it is none (a file, a pipe: lines stay whole)."""
    isatty = getattr(sys.stdout, "isatty", None)
    return shutil.get_terminal_size().columns if isatty is not None and isatty() else None


def fit(text: str, width: int | None) -> str:
    """`text` with each line over `width` characters broken between words, the rest indented two spaces more than
    the line: a word or a path is never cut (one longer than the line goes whole on a line of its own)."""
    if width is None:
        return text
    lines = []
    for line in text.split("\n"):
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        wrap = textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
        lines += wrap if len(line) > width and wrap else [line]
    return "\n".join(lines)


def say(text: str) -> None:
    """Print `text` to stdout, fitted to the terminal's width (`fit`)."""
    print(fit(text, terminal_width()))


class ConsoleHandler(logging.StreamHandler):
    """Log lines to `sys.stdout` as it is at each line, fitted to the terminal's width (`fit`): while the
    terminal's progress display runs, its stand-in stdout prints them above the display, which would otherwise
    redraw over them."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self.warned: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        """The handler's filters, and a warning said already (two readers of the same data) not said again: the
        run's log file keeps both."""
        if not super().filter(record):
            return False
        if record.levelno >= logging.WARNING:
            said = record.getMessage()
            if said in self.warned:
                return False
            self.warned.add(said)
        return True

    def format(self, record: logging.LogRecord) -> str:
        return fit(super().format(record), terminal_width())

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
