"""Dropout from half the random numbers, a CPU speed-up (`fast_dropout=True`, README Performance).

`TransformerClassifier` uses torch's nn.Dropout unless asked; training runs ask (conf/model/transformer.yaml).
On a CPU `bernoulli_` (what nn.Dropout draws with) costs about 5 ns an element and the random draw itself
about 2 ns, so splitting one 31-bit draw into two 15-bit numbers makes dropout 2.5x cheaper: a 1.2x faster
training step at the benchmark size. The drop probability is rounded to a multiple of 2^-15 (0.1 ->
0.100006) and the kept elements are scaled by the exact 1 / (1 - p) of that rounded p, so it stays unbiased.
Off the CPU, where dropout is one fused kernel, FastDropout is torch's own dropout. The chunked attention
path always draws its masks this way.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

EXACT_SCALE = (torch.float32, torch.float64)  # dtypes that hold 1 / (1 - p) as the scalar product uses it


def check_dropout_p(p: float) -> None:
    """A ValueError unless 0 <= p < 1: what the attention kernels take as `dropout_p`."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout_p={p} must be in [0, 1)")


def live_p(dropout: nn.Dropout) -> float:
    """The probability `dropout` drops with now: its p in training, 0 in eval (what a kernel's `dropout_p` takes)."""
    return dropout.p if dropout.training else 0.0


def dropout_threshold(p: float) -> tuple[int, float]:
    """p as keep_mask's threshold (p rounded to a multiple of 2^-15) and the matching 1 / (1 - p)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability p={p} must be in [0, 1)")
    threshold = round(p * 2**15)
    return threshold, 1.0 / (1.0 - threshold / 2**15)


def keep_mask(
    shape: torch.Size, threshold: int, generator: torch.Generator | None = None, device: torch.device | None = None
) -> torch.Tensor:
    """A bool tensor of `shape`, True (keep) with probability 1 - threshold / 2^15, drawn from
    `generator` (torch's default one when None): the same generator state gives the same mask."""
    n = shape.numel()
    device = generator.device if generator is not None else device
    bits = torch.empty((n + 1) // 2, dtype=torch.int32, device=device).random_(generator=generator)
    low, high = bits & 0x7FFF, bits[: n - bits.numel()] >> 16  # int32 random_ draws from [0, 2^31)
    return torch.cat((low >= threshold, high >= threshold)).view(shape)


class FastDropout(nn.Dropout):
    """nn.Dropout's behaviour (zero with probability p in training, scale the rest by 1 / (1 - p),
    identity in eval) at half the random numbers."""

    def __init__(self, p: float = 0.1) -> None:
        super().__init__(p)
        self.threshold, self.scale = dropout_threshold(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.threshold == 0:
            return x
        if x.device.type != "cpu":  # a GPU's dropout is one fused kernel: nothing to win there
            return F.dropout(x, self.p, training=True)
        keep = keep_mask(x.shape, self.threshold, device=x.device)
        if x.dtype in EXACT_SCALE:  # the scale folded into a float mask: no bool-to-float copy, forward or back
            return x * keep.to(x.dtype).mul_(self.scale)  # x * (1 * s) = (x * 1) * s, bit for bit
        return (x * keep).mul_(self.scale)  # bf16 / fp16: scaled in float, not by a rounded scale

    def extra_repr(self) -> str:
        return f"p={self.p}"


def use_fast_dropout(model: nn.Module) -> nn.Module:
    """Replace every nn.Dropout inside `model` by a FastDropout with the same p; returns `model`."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Dropout:
                setattr(module, name, FastDropout(child.p))
    return model
