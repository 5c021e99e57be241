"""ALTI (Ferrando et al., EMNLP 2022, "Measuring the Mixing of Contextual Information in the Transformer"): the
attention block taken apart per input token, then rolled out. In layer l, what reaches token i from token j is
T_i(x_j): x_j's value through every head with the weights as they were, plus x_j itself on the residual when j = i,
through the LayerNorm with its scale held at the actual input (biases left out; in a pre-norm layer the norm
comes first, on x_j). Token j's share in i is max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), y_i = sum_j T_i(x_j),
each row scaled to sum 1; the layers' maps are multiplied from the first up (no residual mixing: the residual is
in them) and the pooled row of the product ranks the words. Unsigned. Each layer holds B x T x T x D numbers at
once at most `CHUNK` of them (queries in chunks)."""

from __future__ import annotations

import torch
from torch import Tensor

from ...model.classifier import TransformerClassifier
from ...model.encoder import TransformerEncoderLayer
from ...model.probes import head_moves
from ...plotting.rollout import shares
from . import Explanation, Method, Options, register
from ._forward import LayerTrace, linear, norm
from ._maps import rolled_out

CHUNK = 2**24  # numbers held at once per chunk of queries: 128 MiB of float64


def layer_map(traced: LayerTrace, layer: TransformerEncoderLayer, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, T): token j's share in token i after layer `layer`'s attention block, rows summing to 1."""
    x, weights = traced.x, traced.weights
    B, T, D = x.shape
    source = norm(x, layer.norm1, bias=False) if layer.norm_first else x  # the norm's linear part, at x_j
    moves = head_moves(linear(source, layer.self_attn.w_v, bias=False), layer.self_attn)  # (B, H, T, D), no bias
    actual = None if layer.norm_first else x + traced.attended  # post-norm: the norm held at the block's output
    out = torch.zeros(B, T, T, dtype=x.dtype, device=x.device)
    step = max(1, CHUNK // max(1, B * T * D))
    eye = torch.eye(T, dtype=x.dtype, device=x.device)
    for start in range(0, T, step):
        rows = slice(start, min(T, start + step))
        parts = torch.einsum("bhij,bhjd->bijd", weights[:, :, rows], moves)  # (B, n, T, D)
        parts = parts + eye[rows, :, None] * x[:, None]  # the residual: x_j itself when j = i
        if actual is not None:
            parts = norm(parts, layer.norm1, held_at=actual[:, rows, None], bias=False)
        y = parts.sum(dim=2, keepdim=True)  # (B, n, 1, D)
        share = (y.abs().sum(-1) - (y - parts).abs().sum(-1)).clamp(min=0)  # (B, n, T)
        out[:, rows] = share * mask[:, None, :].to(x.dtype)
    return shares(out)


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    return rolled_out(net, ids, mask, layer_map)


register(Method("alti", "ALTI", signed=False, explain=explain))
