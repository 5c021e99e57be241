"""`ThreadFit`: torch's thread count fitted to the free cores at each epoch (threads.py says why)."""

from __future__ import annotations

import logging
import os

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from ..threads import USER_THREADS, CpuSample, busy_elsewhere, cpu_sample, fitting_threads, usable_cores

log = logging.getLogger(__name__)


class ThreadFit(Callback):
    """At each training epoch's start, one torch thread per core that other processes left free during the last
    epoch: a thread that shares a core with another process holds the others back at every barrier. Does nothing
    where the user set OMP_NUM_THREADS."""

    def __init__(self) -> None:
        self.last: CpuSample | None = None  # the sample at the last epoch's start

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if USER_THREADS in os.environ:
            return
        now = cpu_sample()
        if self.last is not None:
            threads = fitting_threads(usable_cores(), busy_elsewhere(self.last, now))
            if threads != torch.get_num_threads():
                log.info("threads: %d -> %d, the cores other processes leave free", torch.get_num_threads(), threads)
                torch.set_num_threads(threads)
        self.last = now
