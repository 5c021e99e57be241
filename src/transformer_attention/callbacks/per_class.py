"""`ClassificationReport`: at test end, what the model got right and wrong, per class."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from torchmetrics import MetricCollection
from torchmetrics.classification import (
    MulticlassConfusionMatrix,
    MulticlassF1Score,
    MulticlassPrecision,
    MulticlassRecall,
)

from ..plotting import figure_to_array, plot_confusion_matrix
from .examples import label_names
from .sinks import image_loggers, log_image, log_text


def _safe_tag(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "label"


class ClassificationReport(Callback):
    """At test end: `test/confusion_matrix` (image), `test/{precision,recall,f1}/{label}` (scalars, also in
    `trainer.callback_metrics`) and `test/report` (a text table), from what `test_step` returns."""

    def __init__(self, prefix: str = "test") -> None:
        self.prefix = prefix
        self.metrics: MetricCollection | None = None

    def on_test_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        C = pl_module.hparams["num_classes"]
        self.metrics = MetricCollection(
            {
                "confusion": MulticlassConfusionMatrix(C),
                "precision": MulticlassPrecision(C, average=None),
                "recall": MulticlassRecall(C, average=None),
                "f1": MulticlassF1Score(C, average=None),
            }
        ).to(pl_module.device)

    def on_test_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if not isinstance(outputs, Mapping) or "preds" not in outputs:
            raise TypeError(f"ClassificationReport needs test_step to return {{'preds', 'labels'}}, got {outputs!r}")
        assert self.metrics is not None  # made by on_test_epoch_start
        self.metrics.update(outputs["preds"], outputs["labels"])

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        assert self.metrics is not None  # made by on_test_epoch_start
        result = {k: v.cpu() for k, v in self.metrics.compute().items()}  # synced across processes
        names = label_names(trainer, pl_module, result["confusion"].shape[0])
        lines = ["| class | precision | recall | f1 | support |", "|---|---|---|---|---|"]
        for c, name in enumerate(names):
            for metric in ("precision", "recall", "f1"):
                pl_module.log(f"{self.prefix}/{metric}/{_safe_tag(name)}", result[metric][c].item())
            scores = " | ".join(f"{result[m][c]:.4f}" for m in ("precision", "recall", "f1"))
            lines.append(f"| {name} | {scores} | {int(result['confusion'][c].sum())} |")
        image = figure_to_array(plot_confusion_matrix(result["confusion"], names, f"{self.prefix}: confusion matrix"))
        loggers = image_loggers(trainer.loggers) if trainer.is_global_zero else []
        log_image(loggers, f"{self.prefix}/confusion_matrix", image, trainer.global_step)
        log_text(loggers, f"{self.prefix}/report", "\n".join(lines), trainer.global_step)
        self.metrics = None
