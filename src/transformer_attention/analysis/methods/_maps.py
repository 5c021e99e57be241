"""What the attention-derived methods share: a batch's per-layer maps reduced to one score per token, the row the
classifier pools (the [CLS] row, or the mean of the real rows), of the last layer or of the rollout through every
layer. Shapes: B batch, L layers, H heads, T tokens."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ...model.classifier import TransformerClassifier, pool
from ...model.encoder import TransformerEncoderLayer
from ...plotting.rollout import rollout
from . import Explanation
from ._forward import LayerTrace, encoder_layers, run

LayerMap = Callable[[LayerTrace, TransformerEncoderLayer, torch.Tensor], torch.Tensor]


def head_means(maps: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Each layer's (B, H, T, T) map as the mean of its heads, (B, T, T), in float64."""
    return [m.double().mean(dim=1) for m in maps]


def pooled_rollout(
    net: TransformerClassifier, maps: Sequence[torch.Tensor], mask: torch.Tensor, residual: float
) -> torch.Tensor:
    """(B, T): the pooled row of the rollout of (B, T, T) maps, first layer first (a padding column is zero in every
    real row, so the real rows are those of the text alone)."""
    return pool(rollout(maps, residual=residual), mask, net.config.pooling)


def rolled_out(net: TransformerClassifier, ids: torch.Tensor, mask: torch.Tensor, layer_map: LayerMap) -> Explanation:
    """A method whose `layer_map(traced, layer, mask)` gives each layer's (B, T, T) token-to-token shares from what
    the layer computed: the pooled row of their product (no residual mixing: the maps hold the residual)."""
    with torch.no_grad():
        trace = run(net, ids, mask)
        maps = [layer_map(t, layer, mask) for t, layer in zip(trace.layers, encoder_layers(net), strict=True)]
    return Explanation(pooled_rollout(net, maps, mask, residual=0.0))
