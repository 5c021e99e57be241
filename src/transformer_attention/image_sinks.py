"""Images and text to whichever of a run's loggers can take them, each through its public API:
TensorBoard (`SummaryWriter.add_image` / `add_text`), MLflow (`MlflowClient.log_image` with a key and a
step, `log_text` as an artifact), W&B (`WandbLogger.log_image` / `log_text`). Other loggers (CSV) are
skipped. Callbacks call these instead of talking to TensorBoard alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from lightning.pytorch.loggers import Logger, MLFlowLogger, TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only


def image_loggers(loggers: Sequence[Logger]) -> list[Logger]:
    """The loggers that `log_image` writes to."""
    return [lg for lg in loggers if isinstance(lg, TensorBoardLogger | MLFlowLogger | WandbLogger)]


@rank_zero_only
def log_image(loggers: Sequence[Logger], tag: str, image: np.ndarray, step: int) -> None:
    """Log an `(H, W, 3)` uint8 image as `tag` at `step` to each logger that takes images."""
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"log_image takes an (H, W, 3) uint8 array, got {image.shape} {image.dtype}")
    for lg in loggers:
        if isinstance(lg, TensorBoardLogger):
            lg.experiment.add_image(tag, image, global_step=step, dataformats="HWC")
        elif isinstance(lg, MLFlowLogger):  # shown per step in the run's Artifacts > images (MLflow >= 2.12)
            lg.experiment.log_image(lg.run_id, image, key=tag, step=step)
        elif isinstance(lg, WandbLogger):
            lg.log_image(key=tag, images=[image], step=step)


@rank_zero_only
def log_text(loggers: Sequence[Logger], tag: str, text: str, step: int) -> None:
    """Log `text` (markdown for TensorBoard) as `tag` at `step` to each logger that takes text."""
    for lg in loggers:
        if isinstance(lg, TensorBoardLogger):
            lg.experiment.add_text(tag, text, global_step=step)
        elif isinstance(lg, MLFlowLogger):  # an artifact per step: text/<tag>/step_<step>.txt
            lg.experiment.log_text(lg.run_id, text, artifact_file=f"text/{tag}/step_{step}.txt")
        elif isinstance(lg, WandbLogger):
            lg.log_text(key=tag, columns=["text"], data=[[text]], step=step)
