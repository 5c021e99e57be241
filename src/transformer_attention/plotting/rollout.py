"""Attention rollout (Abnar & Zuidema 2020): what each position at the top of the encoder draws from each input
token through all layers, and the share of each token in the vector the classifier pools. The one rollout of the
project: the views draw it for a text, the analyses rank words by it for a batch."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .style import as_numpy
from .words import pooled_row


def shares(maps: torch.Tensor) -> torch.Tensor:
    """(..., T, T) maps with each row scaled to sum 1 (a row of zeros stays zero)."""
    return maps / maps.sum(dim=-1, keepdim=True).clamp(min=1e-12)


def rollout(maps: Sequence[torch.Tensor], residual: float = 0.5) -> torch.Tensor:
    """Each layer's (..., T, T) map A, first layer first, mixed with the residual path as `residual * I + (1 -
    residual) * A`, rows scaled to sum 1 (a row of zeros stays zero), multiplied from the first layer up:
    R = A_L' @ ... @ A_1', (..., T, T); R[q, k] is the share of input token k in position q's output."""
    if not maps:
        raise ValueError("attention rollout needs at least one layer's attention")
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual={residual}: the weight of the residual path must lie in [0, 1]")
    out = None
    for layer, a in enumerate(maps):
        if a.shape[-1] != a.shape[-2] or (out is not None and a.shape != out.shape):
            raise ValueError(f"layer {layer}: a map of shape {tuple(a.shape)}; every layer must be (..., T, T) alike")
        mixed = shares(residual * torch.eye(a.shape[-1], dtype=a.dtype, device=a.device) + (1.0 - residual) * a)
        out = mixed if out is None else mixed @ out
    assert out is not None  # `maps` is not empty: refused above
    return out


def attention_rollout(attentions: Sequence[np.ndarray | torch.Tensor], residual: float = 0.5) -> np.ndarray:
    """`rollout` of one text: `attentions` is one (H, T, T) or (T, T) map per layer (padding cut off), its heads
    averaged; returns R (T, T), float32, every row summing to 1."""
    means = []
    for layer, weights in enumerate(attentions):
        w = torch.from_numpy(as_numpy(weights).astype(np.float64))
        if w.dim() not in (2, 3):
            raise ValueError(f"layer {layer}: attention of shape {tuple(w.shape)}; every layer must be (H, T, T)")
        means.append(w.mean(dim=0) if w.dim() == 3 else w)  # (T, T): the head mean
    return rollout(means, residual).numpy().astype(np.float32)


def pooled_rollout(rollout: np.ndarray, pooling: str = "cls") -> np.ndarray:
    """The (T,) share of each input token in the pooled vector the classifier reads: the `[CLS]` row of the
    rollout (pooling="cls", position 0) or the mean of its rows (pooling="mean", every real token)."""
    return pooled_row(rollout, pooling).astype(rollout.dtype)
