"""Scaled dot-product and multi-head attention, from scratch, as in the tutorials.

Shapes: B batch, H heads, Tq query tokens, Tk key tokens, D d_model, Dk head dim (D // H).
Masks are boolean and True means "take part in attention" (masks.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import check_encoder
from .fast_attention import chunked_attention, sdpa_attention
from .masks import causal_mask, dead_rows_if_any, expand_mask, padding_mask

__all__ = ["MultiHeadAttention", "causal_mask", "expand_mask", "padding_mask", "scaled_dot_product_attention"]

# the faster paths for calls that do not need the weights: the same call, tested equal to the math
FAST_PATHS = {"chunked": chunked_attention, "sdpa": sdpa_attention}


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(Dk)) V with a True-means-attend mask.

    q (B, H, Tq, Dk), k and v (B, H, Tk, Dk); returns out (B, H, Tq, Dk) and the weights
    (B, H, Tq, Tk) before dropout. A query whose keys are all masked gets zero weights and output.
    """
    d_k = q.size(-1)
    scores = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)  # (B, H, Tq, Tk): Q K^T / sqrt(Dk), scaling the smaller side
    if mask is not None:
        mask = expand_mask(mask, q.size(0), q.size(-2), k.size(-2))  # (B|1, H|1, Tq|1, Tk)
        # the dtype's lowest number, not -inf: a row with no key then gives no NaN
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1)  # (B, H, Tq, Tk)
    if mask is not None and (dead := dead_rows_if_any(mask)) is not None:
        weights = weights.masked_fill(dead, 0.0)  # a query with no key came out uniform: zero it
    dropped = weights if dropout is None else dropout(weights)
    return dropped @ v, weights  # (B, H, Tq, Dk)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with projections `w_q`, `w_k`, `w_v`, `w_o` as in the tutorials.

    `attention_impl` picks how calls that do not need the weights are computed: "math" (from
    scratch), "chunked" (from scratch, blockwise) or "sdpa" (torch's fused kernel). Calls that need
    the weights always take the math path. Every path uses the same parameters.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.1,
        bias: bool = True,
        attention_impl: str = "math",
    ) -> None:
        super().__init__()
        # the settings' own rules: d_model divisible by num_heads, a known attention_impl
        check_encoder({"d_model": d_model, "num_heads": num_heads, "attention_impl": attention_impl})
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.attention_impl = attention_impl
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)  # on the attention weights; the fast paths read its p

    def _project(self, query: torch.Tensor, key: torch.Tensor | None, value: torch.Tensor | None):
        """The Q, K, V projections; one GEMM for those that read the same input (key / value None)."""
        if key is None and value is not None:
            raise ValueError("value given without key: pass key too (key=None means self-attention)")
        if key is None:  # self-attention: Q, K and V of one input
            return _fused_linear(query, (self.w_q, self.w_k, self.w_v))  # 3 x (B, T, D)
        if value is None:  # cross-attention, or a layer's first query rows: K and V of one input
            return (self.w_q(query), *_fused_linear(key, (self.w_k, self.w_v)))  # (B, Tq, D), 2 x (B, Tk, D)
        return self.w_q(query), self.w_k(key), self.w_v(value)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T, Dk)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
        head_mask: torch.Tensor | None = None,
        need_norms: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query (B, Tq, D), key and value (B, Tk, D): key None means self-attention (key = value =
        query), value None means value = key. mask: broadcastable to (B, H, Tq, Tk).
        head_mask: (H,) or (B, H), True / 1 = the head takes part; each head's output is multiplied by
        its entry before the heads are merged (0 masks it out; a float gate can carry a gradient).

        Returns out (B, Tq, D) and, when `need_weights`, the weights (B, H, Tq, Tk) before dropout (as
        computed, also for a masked head). `need_norms`: in the weights' place, the norm-weighted map
        (`weighted_norms`), what each key moves into each query through each head.
        """
        q, k, v = (self._split_heads(t) for t in self._project(query, key, value))  # (B, H, T, Dk)
        B, _, Tq, _ = q.shape
        mask = expand_mask(mask, B, Tq, k.shape[-2])  # (B|1, H|1, Tq|1, Tk)
        weights = None
        if need_weights or need_norms or self.attention_impl == "math":
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout=self.dropout)
        else:
            p = self.dropout.p if self.training else 0.0
            out = FAST_PATHS[self.attention_impl](q, k, v, mask, dropout_p=p)
        if head_mask is not None:
            out = out * head_gates(head_mask, B, self.num_heads).to(out.dtype)  # (B, H, Tq, Dk)
        out = out.transpose(1, 2).reshape(B, Tq, self.d_model)  # (B, Tq, D): the heads side by side
        if need_norms:
            return self.w_o(out), weighted_norms(weights, v, self.w_o.weight)
        return self.w_o(out), (weights if need_weights else None)


def weighted_norms(weights: torch.Tensor, v: torch.Tensor, w_o: torch.Tensor) -> torch.Tensor:
    """||alpha_ij f_h(x_j)|| (Kobayashi et al. 2020, "Attention is Not Only a Weight"): the length of what key j
    moves into query i through head h, f_h(x) = (x W_V + b_V) W_O restricted to head h's slice of W_O (the
    output bias is added once, not per key). weights (B, H, Tq, Tk), v (B, H, Tk, Dk), w_o an nn.Linear
    weight (D, H * Dk); returns (B, H, Tq, Tk)."""
    H, Dk = v.shape[1], v.shape[-1]
    per_head = w_o.view(w_o.shape[0], H, Dk).permute(1, 2, 0)  # (H, Dk, D): head h's columns of W_O
    moved = torch.einsum("bhtk,hkd->bhtd", v, per_head)  # (B, H, Tk, D): f_h(x_j)
    return weights * moved.norm(dim=-1).unsqueeze(-2)  # (B, H, Tq, Tk): alpha_ij >= 0, so ||alpha f|| = alpha ||f||


def head_gates(head_mask: torch.Tensor, B: int, H: int) -> torch.Tensor:
    """A (H,) or (B, H) head mask as (B|1, H, 1, 1), to multiply the heads' outputs (B, H, Tq, Dk) with."""
    shape = tuple(head_mask.shape)
    if shape == (H,):
        return head_mask[None, :, None, None]  # (1, H, 1, 1)
    if len(shape) == 2 and shape[1] == H and shape[0] in (1, B):
        return head_mask[:, :, None, None]  # (B|1, H, 1, 1)
    raise ValueError(
        f"head_mask of shape {shape} does not fit {H} heads and a batch of {B}: expected (H,)={(H,)} or (B, H)={(B, H)}"
    )


def _fused_linear(x: torch.Tensor, linears: tuple[nn.Linear, ...]) -> tuple[torch.Tensor, ...]:
    """Several projections of one input as a single GEMM over their stacked weights, split back.
    Stacking k D x D weights costs far less than the k - 1 extra passes over (B, T, D) it saves."""
    w = torch.cat([lin.weight for lin in linears])  # (k D, D)
    b = None if linears[0].bias is None else torch.cat([lin.bias for lin in linears])  # (k D,)
    return F.linear(x, w, b).chunk(len(linears), dim=-1)  # k x (B, T, D)
