"""Each example's interactive page as data in the run's event file, for TensorBoard's ATTENTION tab
(tensorboard_plugin/): `log_page` writes plotting's `page_data` at a step through a run's SummaryWriter
(Lightning's `TensorBoardLogger.experiment`), no TensorFlow needed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch.utils.tensorboard import SummaryWriter

from ..tensorboard_plugin.summary import page_summary
from .sinks import write_summary


def log_page(experiment: SummaryWriter, tag: str, page_data: Mapping[str, Any], step: int) -> int:
    """Log one example's `page_data` (the dict `plotting.page_data` builds) as `tag` at `step`, shown in the
    ATTENTION tab; returns the bytes of the compressed page."""
    summary = page_summary(tag, page_data)
    write_summary(experiment, summary, step)
    return len(summary.value[0].tensor.string_val[0])
