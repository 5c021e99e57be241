"""Attention rollout (Abnar & Zuidema 2020): what each position at the top of the encoder draws from each input
token through all layers, and the share of each token in the vector the classifier pools. NumPy only."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .style import as_numpy
from .words import pooled_row


def attention_rollout(attentions: Sequence[np.ndarray | torch.Tensor], residual: float = 0.5) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): what each position at the top draws from each input token
    through all layers. Per layer the head mean A, mixed with the residual path as
    `residual * I + (1 - residual) * A`, rows renormalised, multiplied from the first layer up:
    `R = A_L' @ ... @ A_1'`. `attentions` is one (H, T, T) or (T, T) map per layer (padding cut off);
    returns R, (T, T), every row summing to 1: R[q, k] = the share of input token k in position q's output."""
    if not attentions:
        raise ValueError("attention rollout needs at least one layer's attention")
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual={residual}: the weight of the residual path must lie in [0, 1]")
    rollout = None
    for layer, weights in enumerate(attentions):
        w = as_numpy(weights).astype(np.float64)
        a = w.mean(axis=0) if w.ndim == 3 else w  # (T, T), the head mean
        if a.ndim != 2 or a.shape[0] != a.shape[1] or (rollout is not None and a.shape != rollout.shape):
            raise ValueError(f"layer {layer}: attention of shape {tuple(w.shape)}; every layer must be (H, T, T)")
        mixed = residual * np.eye(a.shape[0]) + (1.0 - residual) * a
        mixed /= np.clip(mixed.sum(axis=-1, keepdims=True), 1e-12, None)  # rows sum to 1
        rollout = mixed if rollout is None else mixed @ rollout  # (T, T)
    assert rollout is not None  # `attentions` is not empty: refused above
    return rollout.astype(np.float32)


def pooled_rollout(rollout: np.ndarray, pooling: str = "cls") -> np.ndarray:
    """The (T,) share of each input token in the pooled vector the classifier reads: the `[CLS]` row of the
    rollout (pooling="cls", position 0) or the mean of its rows (pooling="mean", every real token)."""
    return pooled_row(rollout, pooling).astype(rollout.dtype)
