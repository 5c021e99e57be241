"""`SaveOnInterrupt`: Ctrl-C or SIGTERM during fit saves `last.ckpt` at a consistent step and prints the command
that resumes the run. `stop_on_signals`: the same stop for work outside a Lightning fit (gensim's skip-gram), which
has nothing to save: it says what stopped and the command that starts it again."""

from __future__ import annotations

import logging
import shlex
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning as L
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities.exceptions import SIGTERMException

from .console import pasteable

log = logging.getLogger(__name__)


# what makes a command a sweep: a sweep's job is resumed, or started again, as one run
SWEEP_KEYS = ("hparams_search", "hydra/sweeper", "hydra/launcher", "hydra.sweeper.", "hydra.launcher.", "hydra.mode")


def resume_command(ckpt_path: str | Path | None = None) -> str:
    """The command that resumes this Hydra run from `ckpt_path` (None: runs it again): its entry and overrides, a
    sweep's job's as one run."""
    overrides: list[str] = []
    entry = "train"
    if HydraConfig.initialized():
        given = HydraConfig.get().overrides.task
        overrides = [o for o in given if not o.lstrip("+~").startswith(SWEEP_KEYS)]
        overrides = [o for o in overrides if ckpt_path is None or not o.startswith("ckpt_path=")]
        entry = HydraConfig.get().job.name
    args = [
        *(shlex.quote(o) for o in overrides),
        *([pasteable("ckpt_path", ckpt_path)] if ckpt_path is not None else []),
    ]
    return " ".join(["python", f"{entry}.py", *args])  # a sweep job's folder holds = and ,: quoted for Hydra too


def evaluate_command(ckpt_path: str | Path, *overrides: str, width: int | None = None) -> str:
    """The evaluate.py command that tests `ckpt_path` on the data it was trained on (the checkpoint records it),
    with `overrides` (each quoted for the shell here); with `width`, in lines of about that many characters
    (`shell_lines`)."""
    words = ["python evaluate.py " + pasteable("ckpt_path", ckpt_path), *(shlex.quote(o) for o in overrides)]
    return " ".join(words) if width is None else shell_lines(words, width)


def shell_lines(words: list[str], width: int, indent: str = "      ") -> str:
    """`words` (each one shell word, already quoted) as one command over several lines: a word that would take a
    line past `width` characters starts the next, `indent`ed, and each line but the last ends with a backslash, so
    that pasted into a shell it is still one command. A word longer than `width` gets a line of its own."""
    lines = [words[0]]
    for word in words[1:]:
        if len(lines[-1]) + 1 + len(word) > width:
            lines[-1] += " \\"
            lines.append(indent + word)
        else:
            lines[-1] += " " + word
    return "\n".join(lines)


class Stopped(SIGTERMException):
    """SIGTERM or Ctrl-C stopped a piece of work, and the log has said what stopped and how to start it again."""


class _Signal(BaseException):
    """A signal that stops the work (a BaseException: no `except Exception` of a library swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def stop_on_signals(what: Callable[[], str], again: Callable[[], str] = resume_command) -> Iterator[None]:
    """SIGTERM and Ctrl-C stop the body at once: log `<signal>: stopped <what()>` and the command that starts it
    again (`again()`), then raise SIGTERMException with the shell's status, which the entry points exit with."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise _Signal(signum)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    except _Signal as sig:
        name = "Ctrl-C" if sig.signum == signal.SIGINT else "SIGTERM"
        log.warning("%s: stopped %s; nothing of it was saved\nstart it again with:\n  %s", name, what(), again())
        stopped = Stopped()
        stopped.code = 128 + sig.signum
        raise stopped from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class SaveOnInterrupt(Callback):
    """On Ctrl-C or SIGTERM during fit, save `last.ckpt` beside the other checkpoints and say how to resume. Both
    stop where Lightning stops for SIGTERM, after a batch (a first Ctrl-C asks for that stop, a second stops at
    once), so the checkpoint holds one consistent step. Unlike OnExceptionCheckpoint, other errors save nothing."""

    def __init__(self) -> None:
        self._ctrl_c = False
        self._trained = False  # the fit's epochs are done: a stop after them has nothing to resume
        self._previous_handler: Any = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._ctrl_c, self._trained = False, False
        if threading.current_thread() is threading.main_thread():  # signal handlers live in the main thread
            self._previous_handler = signal.signal(signal.SIGINT, self._request_stop)

    def _request_stop(self, signum: int, frame: Any) -> None:
        lightning_stops = callable(signal.getsignal(signal.SIGTERM))  # Lightning's SIGTERM handler is installed
        if self._ctrl_c or not lightning_stops:
            raise KeyboardInterrupt
        self._ctrl_c = True
        signal.raise_signal(signal.SIGTERM)  # Lightning's own graceful stop, at the end of this step
        log.warning("Ctrl-C: stopping after this training batch (press Ctrl-C again to stop at once)")

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._trained = True  # what stops later (the end-of-fit analysis) says so itself
        self._restore_handler()

    def _restore_handler(self) -> None:
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)
            self._previous_handler = None

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._restore_handler()
        interrupted = isinstance(exception, (KeyboardInterrupt, SIGTERMException))
        fast_dev_run = trainer.fast_dev_run  # type: ignore[attr-defined]  # Lightning sets it, undeclared
        after_fit = self._trained  # the end-of-fit analysis: it says what stopped
        if not interrupted or trainer.state.fn != "fit" or trainer.sanity_checking or fast_dev_run or after_fit:
            return
        callback = trainer.checkpoint_callback
        dirpath = getattr(callback, "dirpath", None) or str(Path(trainer.default_root_dir) / "checkpoints")
        path = Path(dirpath) / "last.ckpt"
        trainer.save_checkpoint(path, weights_only=False)  # the full state; Lightning writes it atomically
        ctrl_c = self._ctrl_c or isinstance(exception, KeyboardInterrupt)
        if isinstance(exception, SIGTERMException):
            exception.code = 128 + (signal.SIGINT if ctrl_c else signal.SIGTERM)  # the shell's exit status
        name = "Ctrl-C" if ctrl_c else "SIGTERM"
        step = f"epoch {trainer.current_epoch}, global step {trainer.global_step}"
        epochs, done = trainer.max_epochs, getattr(trainer.fit_loop.epoch_progress.total, "processed", 0)
        if epochs is not None and 0 <= epochs <= done:  # stopped as its last epoch ended: nothing left to resume
            command = evaluate_command(getattr(callback, "best_model_path", "") or path)
            done_line = "%s: stopped at %s, every epoch trained; saved %s\ntest it with:\n  %s"
            log.warning(done_line, name, step, path, command)
            return
        log.warning("%s: stopped at %s; saved %s\nresume with:\n  %s", name, step, path, resume_command(path))
