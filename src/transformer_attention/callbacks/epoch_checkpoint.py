"""Checkpoints named by the epoch as the console counts it, from 1: `epoch_004.ckpt` holds the weights at the end
of the epoch that the bar and the log lines call `Epoch 4/10` and `epoch 4/10` (Lightning's `{epoch}` counts
from 0)."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint


class EpochCheckpoint(ModelCheckpoint):
    """Lightning's `ModelCheckpoint`, its `{epoch}` counted from 1; its state saved under ModelCheckpoint's key, so
    that a run resumes from a checkpoint either wrote keeping the best score so far."""

    @property
    def state_key(self) -> str:
        return super().state_key.replace(type(self).__qualname__, ModelCheckpoint.__qualname__, 1)

    def format_checkpoint_name(
        self,
        metrics: dict[str, Any],
        filename: str | None = None,
        ver: int | None = None,
        prefix: str | None = None,
    ) -> str:
        if "epoch" in metrics:
            metrics = {**metrics, "epoch": metrics["epoch"] + 1}
        return super().format_checkpoint_name(metrics, filename=filename, ver=ver, prefix=prefix)
