"""The console a person reads: short log lines (`ShortFormat`: time and source, the level only where it is not INFO),
Lightning's lines that only the run's log file needs kept out of the console (`FileOnly`), written to stdout as it is
at each line (`ConsoleHandler`: above a live progress display, not under its redraw), and a command line
read before Hydra reads it (`check_command_line`), so that a text Hydra cannot parse ends in one line that names
the quoting that works, instead of Hydra's own lexer error. conf/hydra/default.yaml installs the first three."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import TextIO

PROJECT = "transformer_attention"
# Lightning's lines that say nothing a run's console needs (the file keeps them): the seed, accelerators this
# machine has none of, the checkpoint the test restores (the project's own test line names it), and its note each
# time a module asks for `trainer.estimated_stepping_batches` (the warmup/cosine schedule does)
FILE_ONLY = (
    "Seed set to",  # the config has it
    "TPU available",
    "HPU available",
    "Restoring states from the checkpoint path",
    "Loaded model weights from the checkpoint",
    "Loading `train_dataloader` to estimate number of stepping batches",
)
GRAMMAR = "https://hydra.cc/docs/advanced/override_grammar/basic/"
TEXT_KEYS = ("text", "texts", "notes")  # keys whose values are free text: the quoting hint names them
FLAGS_WITH_VALUES = (  # Hydra's flags that take a word after them
    *("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir", "-c", "--cfg", "-p", "--package"),
    *("-i", "--info", "--experimental-rerun"),
)


class ShortFormat(logging.Formatter):
    """`12:03:41 console: epoch 3/10 ...`: the time, where the line comes from (this project's module, else the
    library), the level where it is not INFO, the message."""

    def __init__(self) -> None:
        super().__init__(datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        parts = record.name.split(".")
        source = parts[-1] if parts[0] == PROJECT else parts[0]
        level = "" if record.levelno == logging.INFO else f" {record.levelname}"
        text = f"{self.formatTime(record, self.datefmt)} {source}{level}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class ConsoleHandler(logging.StreamHandler):
    """Log lines to `sys.stdout` as it is when each line is written, not when logging was set up: while a live
    display runs (the terminal's progress bars) its stand-in stdout prints them above the display, which would
    otherwise redraw over them."""

    @property
    def stream(self) -> TextIO:
        return sys.stdout

    @stream.setter
    def stream(self, value: TextIO) -> None:  # StreamHandler sets the stream it was given: always stdout here
        pass


# this project's loggers whose lines only the file keeps: the thread count and OpenMP's wait (threads.py)
FILE_ONLY_LOGGERS = (f"{PROJECT}.threads",)


class FileOnly(logging.Filter):
    """Keeps the lines in `FILE_ONLY`, and those of `FILE_ONLY_LOGGERS`, off the console (set on its handler; the
    file handler keeps them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name not in FILE_ONLY_LOGGERS and not str(record.msg).startswith(FILE_ONLY)


def check_command_line(argv: Sequence[str] | None = None) -> None:
    """Read each override of `argv` (default: this command's) as Hydra will, before Hydra does: a value it cannot
    parse, or a comma that makes a single run a sweep, ends the command with one line that names the quoting that
    works. Hydra's own message spans four to six lines and never says how to quote a text."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from .overrides import catch_composition_errors

    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None:  # this process's own command: a key or value Hydra refuses while composing is one line too
        catch_composition_errors(args)
    multirun = any(a in ("-m", "--multirun") for a in args)
    parser = OverridesParser.create()
    for i, arg in enumerate(args):
        if arg.startswith("-") or (i and args[i - 1] in FLAGS_WITH_VALUES):
            continue
        try:
            override = parser.parse_override(arg)
        except HydraException:  # with the words the shell split off its value: text=it's not bad
            owners = [j for j in range(i + 1) if "=" in args[j] and not args[j].startswith("-")]
            start, end = (owners[-1] if owners else i), next_override(args, i + 1)
            why = "the shell split it into words" if end > start + 1 else "Hydra cannot read it unquoted"
            raise SystemExit(unreadable(" ".join(args[start:end]), why)) from None
        # a sweep of other keys is left to Hydra: a config may set hydra.mode=MULTIRUN (hparams_search=optuna)
        if override.is_sweep_override() and not multirun and is_text(override.key_or_group):
            raise SystemExit(unreadable(arg, "a comma makes it a sweep (-m)"))


def is_text(key: str) -> bool:
    """Whether an override's key takes free text (`text`, `callbacks.attention_maps.texts`, `notes`)."""
    return key.lstrip("+~").split("@")[0].split(".")[-1] in TEXT_KEYS


def next_override(args: Sequence[str], start: int) -> int:
    """The index of the first argument from `start` that is an override or a flag (len(args) if none)."""
    return next((j for j in range(start, len(args)) if "=" in args[j] or args[j].startswith("-")), len(args))


def unreadable(arg: str, why: str) -> str:
    """One line: the override, why Hydra cannot take it, and the same override quoted as the shell and Hydra need."""
    key, _, value = arg.partition("=")
    value = value.strip().strip("'\"") if key.lstrip("+~").split(".")[-1] != "texts" else value.strip()
    is_list = value.startswith("[")
    if "'" in value:  # the shell's single quotes cannot hold an apostrophe: its double quotes, Hydra's escaped
        quoted, how = f'"{key}=\\"{value}\\""', "in double quotes, escaped for the shell"
    else:
        quoted, how = f"'{key}=\"{value}\"'", "in double quotes, inside single quotes for the shell"
    if is_list:
        fix = f'quote each text inside the list: \'{key}=["first text", "second, text"]\''
    elif is_text(key):
        fix = f"put the text {how}: {quoted}"
    else:
        fix = f"put the value {how}: {quoted} (the override grammar: {GRAMMAR})"
    return f"override error: {arg!r}: {why}; {fix}"
