"""Value zeroing (Mohebbi et al., EACL 2023, "Quantifying Context Mixing in Transformers"): in each layer, zero
token j's value vector in every head, keep the attention weights, and measure how far each token i's output of
the layer moves: 1 - cos(y_i, y_i without j). Rows scaled to sum 1, rolled out through the layers as ALTI's,
and the pooled row ranks the words. Unsigned. Zeroing v_j takes alpha_ij W_O v_j out of query i's attention
output and leaves the rest, so every (i, j) comes from one pass of the layer's residual, norms and feed-forward
block over T x T rows, `CHUNK` numbers at a time."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ...model.classifier import TransformerClassifier
from ...model.encoder import TransformerEncoderLayer
from ...model.probes import head_moves
from ...plotting.rollout import shares
from ..passes import Passes
from . import Explanation, Method, Options, register
from ._forward import LayerTrace, after_attention
from ._maps import rolled_out

CHUNK = 2**23  # rows x d_model (or feed-forward width) held at once


def layer_map(traced: LayerTrace, layer: TransformerEncoderLayer, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, T): how far token i's output moves when token j's values are zeroed, rows summing to 1."""
    x, weights, attended = traced.x, traced.weights, traced.attended
    B, T, D = x.shape
    moves = head_moves(traced.values, layer.self_attn)  # (B, H, T, D): W_O^h v_j
    y = after_attention(x, attended, layer)  # (B, T, D): the layer's actual output
    width = max(D, layer.linear1.out_features)
    step = max(1, CHUNK // max(1, B * T * width))
    out = torch.zeros(B, T, T, dtype=x.dtype, device=x.device)
    for start in range(0, T, step):
        rows = slice(start, min(T, start + step))
        removed = torch.einsum("bhij,bhjd->bijd", weights[:, :, rows], moves)  # (B, n, T, D)
        zeroed = after_attention(x[:, rows, None], attended[:, rows, None] - removed, layer)  # (B, n, T, D)
        distance = 1 - F.cosine_similarity(zeroed, y[:, rows, None], dim=-1)  # (B, n, T)
        out[:, rows] = distance.clamp(min=0) * mask[:, None, :].to(x.dtype)
    return shares(out)


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    return rolled_out(net, ids, mask, layer_map)


def passes(length: int, classes: int, options: Options) -> Passes:
    """A forward pass, and each layer's residual, norms and feed-forward block once per token: about a forward
    pass per token (the attention is not recomputed)."""
    return Passes(forward=1 + length)


register(Method("value_zeroing", "value zeroing", signed=False, explain=explain, passes=passes))
