"""What a run prints as it trains: the model's layers once (`ModelTable`), and, where stdout is not a terminal
(a log file, CI, a sweep's job), one line per epoch instead of a progress bar redrawn in place (`LineProgress`); in
a terminal, Lightning's Rich bars, stopped when training ends (`TerminalProgress`)."""

from __future__ import annotations

import logging
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback, ProgressBar, RichProgressBar
from lightning.pytorch.utilities.model_summary import get_human_readable_count, summarize
from torchmetrics import Metric, MetricCollection

from ..data.progress import EVERY_S

log = logging.getLogger(__name__)

HYDRA_PLAIN = re.compile(r"[\w./:+@%~-]+")  # a value Hydra reads as it is, unquoted


class ModelTable(Callback):
    """At fit start, the model's layers to `max_depth` and its size: Lightning's summary without its FLOPs column
    (all zeros without an example input) and its metric objects."""

    def __init__(self, max_depth: int = 2) -> None:
        self.max_depth = max_depth

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero or self.max_depth == 0:
            return
        summary = summarize(pl_module, max_depth=self.max_depth)
        layers = zip(summary.layer_names, summary.layer_types, summary.param_nums, strict=True)
        rows = [("layer", "type", "parameters")] + [
            (name, kind, get_human_readable_count(n))
            for name, kind, n in layers
            if not isinstance(pl_module.get_submodule(name), Metric | MetricCollection)
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
        total, trainable = summary.total_parameters, summary.trainable_parameters
        size = f"{get_human_readable_count(total)} parameters ({get_human_readable_count(trainable)} trainable)"
        log.info("model: %s, %.2f MB\n%s", size, summary.model_size, "\n".join(lines))


def line_progress(enabled: bool = True) -> ProgressBar | None:
    """`LineProgress` where stdout is not a terminal, else `TerminalProgress`; None when not `enabled`."""
    if not enabled:
        return None
    return TerminalProgress() if sys.stdout.isatty() else LineProgress()


class TerminalProgress(RichProgressBar):
    """Lightning's Rich bars, epochs counted from 1 as the log lines and checkpoints count them (`Epoch 4/10`, not
    Lightning's `Epoch 3/9`), stopped when training ends (not at teardown), so that what the end of fit prints
    goes below the finished bar instead of inside a display that redraws over it."""

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_epoch_start(trainer, pl_module)
        self._count_from_one(trainer)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        fresh = self.train_progress_bar_id is None  # a bar Lightning makes at the first batch (a resumed fit)
        super().on_train_batch_end(trainer, pl_module, *args)
        if fresh:
            self._count_from_one(trainer)

    def _count_from_one(self, trainer: L.Trainer) -> None:
        if self.progress is not None and self.train_progress_bar_id is not None:
            text = epoch_of(trainer).capitalize().ljust(len(self.validation_description))
            self.progress.update(self.train_progress_bar_id, description=text, refresh=True)  # no frame of 0/9

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._stop_progress()


class LineProgress(ProgressBar):
    """One log line per training epoch (steps, time, the `prog_bar` metrics) and per test, for output to a file;
    a loop that runs longer than `every_s` seconds says where it is that often."""

    def __init__(self, every_s: float = EVERY_S) -> None:
        super().__init__()
        self._enabled, self._start, self._said, self.every_s = True, 0.0, 0.0, every_s

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def _restart(self) -> None:
        self._start = self._said = time.perf_counter()

    def _tick(self, what: str, done: int, total: int | float) -> None:
        """`what: 300 of 782 batches, 31 s` when `every_s` has passed since the last line."""
        now = time.perf_counter()
        if self._enabled and now - self._said >= self.every_s:
            self._said = now
            of = f" of {int(total)}" if total != float("inf") else ""
            log.info("%s: %d%s batches, %s", what, done, of, seconds(now - self._start))

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restart()  # a fit resumed mid-epoch starts no epoch: its first line times from here

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restart()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._tick(epoch_of(trainer), int(args[2]) + 1, self.total_train_batches)

    def on_validation_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if not trainer.sanity_checking:
            done, total = int(args[2]) + 1, of_loader(trainer.num_val_batches, args)
            self._tick(f"{epoch_of(trainer)}, validation", done, total)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._enabled:
            head = f"{epoch_of(trainer)}, step {trainer.global_step}"
            log.info("%s, %.1f s | %s", head, time.perf_counter() - self._start, self._metrics(trainer, pl_module))

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restart()
        loaders = trainer.test_dataloaders  # one alone, a list of several, or None
        loaders = [] if loaders is None else loaders if isinstance(loaders, list | tuple) else [loaders]
        counts = [int(n) for n in trainer.num_test_batches]
        texts = sum(len(getattr(loader, "dataset", ())) for loader in loaders)
        tested = sum(texts_in(loader, n) for loader, n in zip(loaders, counts, strict=False))
        if self._enabled and texts:
            batches = plural(sum(counts), "batch")
            if tested < texts:  # trainer.limit_test_batches: the first batches only
                log.info(
                    "testing %s of %s texts, %s (trainer.limit_test_batches)", f"{tested:,}", f"{texts:,}", batches
                )
            else:
                log.info("testing %s texts in %s", f"{texts:,}", batches)

    def on_test_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._tick("test", int(args[2]) + 1, of_loader(trainer.num_test_batches, args))

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._enabled:
            batches = sum(int(n) for n in trainer.num_test_batches)
            of = f" of {Path(trainer.ckpt_path).name}" if trainer.ckpt_path else ""
            log.info("test%s, %s, %.1f s", of, plural(batches, "batch"), time.perf_counter() - self._start)

    def _metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> str:
        """`train loss 0.0874 acc 0.948 | val loss 0.0081 acc 0.998`: the bar's metrics by split, less the version,
        per-step values and bests."""
        shown: dict[str, Any] = self.get_metrics(trainer, pl_module)
        splits: dict[str, list[str]] = {}
        for key, value in sorted(shown.items()):
            if key == "v_num" or key.endswith(("_step", "_best")):
                continue
            split, _, name = key.rpartition("/")
            number = f"{value:.3g}" if isinstance(value, float) else f"{value}"
            splits.setdefault(split, []).append(f"{name.removesuffix('_epoch')} {number}")
        return " | ".join(f"{split} {' '.join(items)}".strip() for split, items in splits.items())


def epoch_of(trainer: L.Trainer) -> str:
    """`epoch 4/10`: the epoch under way counted from 1, as its end's checkpoint is named (`epoch_004.ckpt`)."""
    epochs = trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else "?"
    return f"epoch {trainer.current_epoch + 1}/{epochs}"


def pasteable(key: str, value: str | Path) -> str:
    """`key=value` as one shell argument that Hydra reads back as `value` (a sweep job's folder holds = and ,)."""
    text = str(value)
    if not HYDRA_PLAIN.fullmatch(text):
        text = '"' + text.replace('"', '\\"') + '"'
    return shlex.quote(f"{key}={text}")


def of_loader(batches: list[int | float] | int | float, args: tuple[Any, ...]) -> int | float:
    """The batches of the dataloader that an evaluation batch hook's `args` came from."""
    index = int(args[3]) if len(args) > 3 else 0
    return batches[index] if isinstance(batches, list) else batches


def texts_in(loader: Any, batches: int) -> int:
    """How many texts of `loader` its first `batches` batches hold (a limit_*_batches cuts the loader)."""
    size = len(getattr(loader, "dataset", ()))
    batch_size = loader.batch_size or getattr(loader.batch_sampler, "batch_size", None)
    return size if batch_size is None else min(size, batches * batch_size)


def plural(count: int, noun: str) -> str:
    """`1 batch`, `7 batches`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}{'es' if noun.endswith(('s', 'ch')) else 's'}"


def seconds(value: float) -> str:
    """`0.04 s`, `3.2 s`, `12 s`, `4.5 min`: about two significant digits, never `0 s`."""
    if value >= 120:
        return f"{value / 60:.1f} min"
    if value >= 10:
        return f"{value:.0f} s"
    if value >= 1:
        return f"{value:.1f} s"
    return f"{value:.2f} s" if value >= 0.01 else "<0.01 s"
