"""Loggers with this project's defaults where Lightning's read badly in TensorBoard."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightning.pytorch import loggers

from ..plotting.tags import tensorboard_tag


class CurvesFirstTensorBoard(loggers.TensorBoardLogger):
    """Lightning's TensorBoard logger with the curves first (`plotting/tags.py`: `test/acc` is `~test/acc`
    in TensorBoard alone) and without the `epoch` series that Lightning adds to every logged step, in
    TensorBoard a chart of its own and a column of every HPARAMS table (metrics.csv keeps it, where it tells
    which epoch a row belongs to)."""

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        super().log_metrics({tensorboard_tag(k): v for k, v in metrics.items() if k != "epoch"}, step)
