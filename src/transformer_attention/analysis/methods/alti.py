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
from torch import Tensor, nn

from ...model.classifier import TransformerClassifier
from ...model.encoder import TransformerEncoderLayer
from ...model.probes import head_moves
from . import Explanation, Method, Options, register
from ._maps import rolled_out, shares

CHUNK = 2**24  # numbers held at once per chunk of queries: 128 MiB of float64


def held_norm(z: torch.Tensor, actual: torch.Tensor, layer: nn.LayerNorm) -> torch.Tensor:
    """The linear part of `layer` on z (..., D) with the scale of `actual` (broadcast over z's leading dims)."""
    centred = actual - actual.mean(dim=-1, keepdim=True)
    std = (centred.pow(2).mean(dim=-1, keepdim=True) + layer.eps).sqrt()
    gamma = layer.weight.to(z.dtype) if layer.weight is not None else 1.0
    return (z - z.mean(dim=-1, keepdim=True)) / std * gamma


def layer_map(
    x: torch.Tensor, weights: torch.Tensor, layer: TransformerEncoderLayer, mask: torch.Tensor
) -> torch.Tensor:
    """(B, T, T): token j's share in token i after layer `layer`'s attention block, rows summing to 1."""
    B, T, D = x.shape
    source = held_norm(x, x, layer.norm1) if layer.norm_first else x
    moves = head_moves(source @ layer.self_attn.w_v.weight.to(x.dtype).T, layer.self_attn)  # (B, H, T, D), no bias
    actual = None
    if not layer.norm_first:  # the norm's scale: that of the block's actual output, x + attention(x), with biases
        sa = layer.self_attn
        v = sa.split_heads(x @ sa.w_v.weight.to(x.dtype).T + sa.w_v.bias.to(x.dtype))
        mixed = (weights @ v).transpose(1, 2).reshape(B, T, D)
        actual = x + mixed @ sa.w_o.weight.to(x.dtype).T + sa.w_o.bias.to(x.dtype)
    out = torch.zeros(B, T, T, dtype=x.dtype, device=x.device)
    step = max(1, CHUNK // max(1, B * T * D))
    eye = torch.eye(T, dtype=x.dtype, device=x.device)
    for start in range(0, T, step):
        rows = slice(start, min(T, start + step))
        parts = torch.einsum("bhij,bhjd->bijd", weights[:, :, rows], moves)  # (B, n, T, D)
        parts = parts + eye[rows, :, None] * x[:, None]  # the residual: x_j itself when j = i
        if actual is not None:
            parts = held_norm(parts, actual[:, rows, None], layer.norm1)
        y = parts.sum(dim=2, keepdim=True)  # (B, n, 1, D)
        share = (y.abs().sum(-1) - (y - parts).abs().sum(-1)).clamp(min=0)  # (B, n, T)
        out[:, rows] = share * mask[:, None, :].to(x.dtype)
    return shares(out)


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    return rolled_out(net, ids, mask, layer_map)


register(Method("alti", "ALTI", signed=False, family="attention", explain=explain))
