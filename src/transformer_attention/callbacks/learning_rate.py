"""`LearningRateLogger`: the learning rate as one curve, `train/lr`."""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import Callback


class LearningRateLogger(Callback):
    """`train/lr` every `log_every_n_steps` steps: one curve where LearningRateMonitor draws one per parameter
    group (ours has two, with and without decay); groups whose rates differ get `train/lr/<name or index>` each."""

    def __init__(self) -> None:
        self._last_step = -1

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: object, idx: int) -> None:
        step = trainer.global_step
        every = trainer.log_every_n_steps  # type: ignore[attr-defined]  # Lightning sets it, undeclared
        if step == self._last_step or step % max(1, every):
            return  # logged for this step already (gradient accumulation), or not a logging step
        self._last_step = step
        rates: dict[str, float] = {}
        for optimizer in trainer.optimizers:
            groups = optimizer.param_groups
            if len({g["lr"] for g in groups}) == 1:
                rates.setdefault("train/lr", float(groups[0]["lr"]))
            else:
                rates.update({f"train/lr/{g.get('name', i)}": float(g["lr"]) for i, g in enumerate(groups)})
        for logger in trainer.loggers:
            logger.log_metrics(rates, step=step)
