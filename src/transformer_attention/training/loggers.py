"""Loggers with this project's defaults where Lightning's read badly in TensorBoard."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightning.pytorch import loggers

from ..plotting.tags import tensorboard_tag


class CurvesFirstTensorBoard(loggers.TensorBoardLogger):
    """Lightning's TensorBoard logger with the curves first (plotting/tags.py) and without the `epoch` series that
    Lightning adds to every step (a chart and an HPARAMS column of its own; metrics.csv keeps it)."""

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        super().log_metrics({tensorboard_tag(k): v for k, v in metrics.items() if k != "epoch"}, step)
