"""`precision=auto`: the faster of fp32 and bf16 autocast for this model on this machine, timed on a real batch:
bf16 was 1.3x faster than fp32 on one CPU (avx512_bf16) and 10x slower on another (AVX2 only)."""

from __future__ import annotations

import logging
import time
from typing import Protocol, cast

import lightning as L
import torch

log = logging.getLogger(__name__)

CANDIDATES = ("32-true", "bf16-mixed")
MARGIN = 0.9  # bf16 must take at most 90% of fp32's time: a tie keeps fp32's accuracy


class Steps(Protocol):
    """What `pick_precision` times: a module's `model_step(batch)`, whose first value is the loss."""

    def model_step(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]: ...


def auto_precision(module: L.LightningModule, datamodule: L.LightningDataModule, accelerator: str) -> str:
    """`precision=auto` for `module`: bf16-mixed on an accelerator; on the CPU, the faster on a training batch."""
    if accelerator != "cpu":
        return "bf16-mixed"
    return pick_precision(module, next(iter(datamodule.train_dataloader())))


def pick_precision(module: L.LightningModule, batch: dict[str, torch.Tensor], steps: int = 3) -> str:
    """The faster candidate for `steps` forward and backward passes of `module.model_step(batch)` on the CPU;
    the module's weights, gradients and modes are left as they were."""
    state = {k: v.clone() for k, v in module.state_dict().items()}
    modes = {m: m.training for m in module.modules()}
    module.train()
    times = {}
    try:
        for precision in CANDIDATES:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
                samples = []
                for _ in range(steps + 1):
                    start = time.perf_counter()
                    cast(Steps, module).model_step(batch)[0].backward()
                    samples.append(time.perf_counter() - start)
            module.zero_grad(set_to_none=True)
            times[precision] = min(samples[1:])  # the first step warms up
    finally:
        module.load_state_dict(state)
        for m, training in modes.items():
            m.train(training)
    chosen = "bf16-mixed" if times["bf16-mixed"] < MARGIN * times["32-true"] else "32-true"
    log.info(
        "trainer.precision=auto: a training step takes %.0f ms in fp32, %.0f ms in bf16-mixed on this machine: %s",
        *(1000 * times["32-true"], 1000 * times["bf16-mixed"], chosen),
    )
    return chosen
