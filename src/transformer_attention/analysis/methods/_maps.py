"""What the attention-derived methods share: a batch's per-layer maps reduced to one score per token, the row the
classifier pools (the [CLS] row, or the mean of the real rows), of the last layer or of the rollout through every
layer. Shapes: B batch, L layers, H heads, T tokens."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ...model.classifier import TransformerClassifier
from ...model.encoder import TransformerEncoderLayer
from . import Explanation
from ._forward import encoder_layers, pool_weights, run

LayerMap = Callable[[torch.Tensor, torch.Tensor, TransformerEncoderLayer, torch.Tensor], torch.Tensor]


def pooled(rows: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, T): the pooled row of (B, T, T) `rows`: row 0, or the mean of the real rows."""
    weights = pool_weights(mask, pooling, rows.dtype)  # (B, T)
    return torch.einsum("bi,bij->bj", weights, rows)


def shares(maps: torch.Tensor) -> torch.Tensor:
    """(B, T, T) with each row scaled to sum 1 (a row of zeros stays zero)."""
    return maps / maps.sum(dim=-1, keepdim=True).clamp(min=1e-12)


def rollout(layers: Sequence[torch.Tensor], residual: float = 0.5) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020) of (B, T, T) maps, first layer first, each mixed with the
    residual path as `residual * I + (1 - residual) * A`, rows renormalised: (B, T, T), as
    plotting.rollout.attention_rollout computes it for one text (a padding column is zero in every real row, so
    the real rows are those of the text alone)."""
    out = None
    for a in layers:
        eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        mixed = shares(residual * eye + (1.0 - residual) * a)
        out = mixed if out is None else mixed @ out
    assert out is not None, "rollout needs at least one layer"
    return out


def head_means(maps: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Each layer's (B, H, T, T) map as the mean of its heads, (B, T, T), in float64."""
    return [m.double().mean(dim=1) for m in maps]


def rolled_out(net: TransformerClassifier, ids: torch.Tensor, mask: torch.Tensor, layer_map: LayerMap) -> Explanation:
    """A method whose `layer_map(x, weights, layer, mask)` gives each layer's (B, T, T) token-to-token shares from
    the layer's input and attention weights: the maps of every layer, and the pooled row of their product (no
    residual mixing: the maps hold the residual)."""
    with torch.no_grad():
        trace = run(net, ids, mask)
        maps = [
            layer_map(x, w, layer, mask)
            for x, w, layer in zip(trace.inputs, trace.weights, encoder_layers(net), strict=True)
        ]
    return Explanation(pooled(rollout(maps, residual=0.0), mask, net.config.pooling), maps=torch.stack(maps, dim=1))
