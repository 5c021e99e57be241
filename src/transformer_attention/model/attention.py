"""Scaled dot-product and multi-head attention, from scratch, as in the tutorials.

Shapes: B batch, H heads, Tq query tokens, Tk key tokens, D d_model, Dk head dim (D // H).
Masks are boolean and True means "take part in attention" (masks.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import DEFAULT_ATTENTION_IMPL, check_encoder
from .masks import causal_mask, dead_rows, expand_mask, padding_mask

__all__ = [
    "MultiHeadAttention",
    "causal_mask",
    "expand_mask",
    "padding_mask",
    "scaled_dot_product_attention",
    "sdpa_attention",
]


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
    if mask is not None:
        weights = weights.masked_fill(dead_rows(mask), 0.0)  # a query with no key came out uniform: zero it
    dropped: torch.Tensor = weights if dropout is None else dropout(weights)
    return dropped @ v, weights  # (B, H, Tq, Dk)


def sdpa_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, dropout_p: float = 0.0
) -> torch.Tensor:
    """torch's fused kernel with this project's convention: q (B, H, Tq, Dk), k and v (B, H, Tk, Dk)
    -> out (B, H, Tq, Dk), zeros (and zero gradients) on a row with no key."""
    mask = expand_mask(mask, q.shape[0], q.shape[-2], k.shape[-2])  # (B|1, H|1, Tq|1, Tk)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    # the kernel gives NaN or an average of V on a row with no visible key: open such rows for it, then zero
    # their output (and so their gradients)
    dead = dead_rows(mask)  # (B|1, H|1, Tq|1, 1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | dead, dropout_p=dropout_p)
    return out.masked_fill(dead, 0.0)  # (B, H, Tq, Dk)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with projections `w_q`, `w_k`, `w_v`, `w_o` as in the tutorials.

    `attention_impl` is the kernel of the calls that do not need the weights, chosen here once: "math" (the
    formula above) or "sdpa" (torch's fused kernel, tested equal to it). The weights exist only in the math, so a
    call with `need_weights` computes it that way. Heads switched off and what each head moves (the analyses'
    needs) are reached through hooks: probes.py.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.1,
        bias: bool = True,
        attention_impl: str = DEFAULT_ATTENTION_IMPL,
    ) -> None:
        super().__init__()
        # the settings' own rules: d_model divisible by num_heads, a known attention_impl
        check_encoder({"d_model": d_model, "num_heads": num_heads, "attention_impl": attention_impl})
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.attention_impl = attention_impl
        self.fused = attention_impl == "sdpa"
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)  # on the attention weights

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, H, T, Dk): each head's slice of the features."""
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T, Dk)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query (B, Tq, D), key and value (B, Tk, D): key None means self-attention (key = value = query),
        value None means value = key. mask: broadcastable to (B, H, Tq, Tk).

        Returns out (B, Tq, D) and, when `need_weights`, the weights (B, H, Tq, Tk) before dropout.
        """
        if key is None and value is not None:
            raise ValueError("value given without key: pass key too (key=None means self-attention)")
        key = query if key is None else key
        value = key if value is None else value
        q = self.split_heads(self.w_q(query))  # (B, H, Tq, Dk)
        k = self.split_heads(self.w_k(key))  # (B, H, Tk, Dk)
        v = self.split_heads(self.w_v(value))  # (B, H, Tk, Dk)
        B, _, Tq, _ = q.shape
        mask = expand_mask(mask, B, Tq, k.shape[-2])  # (B|1, H|1, Tq|1, Tk)
        if self.fused and not need_weights:
            p = self.dropout.p if self.training else 0.0
            out, weights = sdpa_attention(q, k, v, mask, dropout_p=p), None
        else:
            out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)
            weights = weights if need_weights else None
        out = out.transpose(1, 2).reshape(B, Tq, self.d_model)  # (B, Tq, D): the heads side by side
        return self.w_o(out), weights

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, attention_impl={self.attention_impl!r}"
