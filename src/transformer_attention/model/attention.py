"""Scaled dot-product and multi-head attention, from scratch.

Shapes: B batch, H heads, Tq query tokens, Tk key tokens, D d_model, Dk head dim (D // H).
Masks are boolean and True means "take part in attention" everywhere in this project.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

ATTENTION_IMPLS = ("math", "sdpa", "chunked")


def padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(B, T) bool mask, True where `ids` is a real token (not `pad_id`)."""
    return ids != pad_id


def causal_mask(T: int, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) bool mask, lower triangle True: query i sees keys 0..i."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def expand_mask(mask: torch.Tensor | None, B: int, Tq: int, Tk: int) -> torch.Tensor | None:
    """Bring a (B, Tk), (B, Tq, Tk), (Tq, Tk) or (B, H|1, Tq, Tk) mask to a 4-d broadcastable shape."""
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = attend), got dtype {mask.dtype}")
    shape = tuple(mask.shape)
    # a 2-d mask is read as (B, Tk) padding when it fits; when B == Tq pass a shared
    # (Tq, Tk) mask as (1, Tq, Tk) to say which one it is
    if mask.dim() == 2 and shape == (B, Tk):
        return mask[:, None, None, :]  # (B, 1, 1, Tk)
    if mask.dim() == 2 and shape == (Tq, Tk):
        return mask[None, None, :, :]  # (1, 1, Tq, Tk)
    if mask.dim() == 3 and shape[1:] == (Tq, Tk) and shape[0] in (1, B):
        return mask[:, None, :, :]  # (B, 1, Tq, Tk)
    if mask.dim() == 4 and all(m in (1, n) for m, n in zip(shape, (B, shape[1], Tq, Tk), strict=True)):
        return mask  # already broadcastable to (B, H, Tq, Tk)
    raise ValueError(
        f"mask of shape {shape} does not fit attention with B={B}, Tq={Tq}, Tk={Tk}: expected "
        f"(B, Tk)={(B, Tk)}, (B, Tq, Tk)={(B, Tq, Tk)}, (Tq, Tk)={(Tq, Tk)} or (B, H, Tq, Tk)"
    )


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: nn.Module | float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(Dk)) V with a True-means-attend mask.

    q (B, H, Tq, Dk), k and v (B, H, Tk, Dk); returns out (B, H, Tq, Dk) and the weights
    (B, H, Tq, Tk) before dropout. A query whose keys are all masked gets zero weights and output.
    """
    B, _, Tq, Dk = q.shape
    Tk = k.shape[-2]
    mask = expand_mask(mask, B, Tq, Tk)
    scores = q @ k.transpose(-2, -1) / math.sqrt(Dk)  # (B, H, Tq, Tk)
    if mask is not None:
        # finfo.min, not -inf: a row with every key masked stays finite instead of NaN ...
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        # ... and is then uniform over masked keys, so zero it: no key may receive weight.
        weights = weights.masked_fill(~mask, 0.0)
    p = weights
    if isinstance(dropout, nn.Module):
        p = dropout(weights)
    elif dropout:
        p = F.dropout(weights, dropout, training=True)
    return p @ v, weights  # (B, H, Tq, Dk), (B, H, Tq, Tk)


def chunked_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    block_size: int = 128,
) -> torch.Tensor:
    """The same attention computed over key blocks with an online softmax (no Tq x Tk tensor).

    Memory grows linearly with Tk: each step holds only a (B, H, Tq, block) score tile.
    Fully masked query rows give zeros, like the math path. No attention dropout here.
    """
    B, H, Tq, Dk = q.shape
    Tk = k.shape[-2]
    mask = expand_mask(mask, B, Tq, Tk)
    q = q / math.sqrt(Dk)
    neg = torch.finfo(q.dtype).min
    row_max = q.new_full((B, H, Tq, 1), neg)  # running max of the scores seen so far
    row_sum = q.new_zeros((B, H, Tq, 1))  # running sum of exp(score - row_max)
    acc = q.new_zeros((B, H, Tq, v.shape[-1]))  # running sum of exp(score - row_max) * v
    for start in range(0, Tk, block_size):
        stop = min(start + block_size, Tk)
        s = q @ k[:, :, start:stop].transpose(-2, -1)  # (B, H, Tq, blk)
        m = None if mask is None else mask[..., start:stop]
        if m is not None:
            s = s.masked_fill(~m, neg)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - new_max)
        if m is not None:
            p = p.masked_fill(~m, 0.0)  # masked keys contribute nothing, even in all-masked rows
        scale = torch.exp(row_max - new_max)
        row_sum = row_sum * scale + p.sum(dim=-1, keepdim=True)
        acc = acc * scale + p @ v[:, :, start:stop]
        row_max = new_max
    # rows with no visible key have row_sum 0 and acc 0: divide by 1 there to return zeros
    return acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with projections `w_q`, `w_k`, `w_v`, `w_o` as in the tutorials.

    `attention_impl` picks how weights-free calls are computed: "math" (from scratch),
    "chunked" (from scratch, blockwise) or "sdpa" (torch's fused kernel). Calls that need the
    weights always take the math path, so the attention maps are the from-scratch computation.
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
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}: "
                f"choose num_heads among the divisors of d_model"
            )
        if attention_impl not in ATTENTION_IMPLS:
            raise ValueError(f"attention_impl={attention_impl!r}: expected one of {ATTENTION_IMPLS}")
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.dropout_p = dropout
        self.attention_impl = attention_impl
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def _project(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor):
        """Q, K, V projections; one fused matmul when query, key and value are the same tensor."""
        if query is key and key is value:
            # self-attention: a single (D -> 3D) GEMM over the concatenated weights
            w = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])  # (3D, D)
            b = None
            if self.w_q.bias is not None:
                b = torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])  # (3D,)
            return F.linear(query, w, b).chunk(3, dim=-1)  # 3 x (B, T, D)
        return self.w_q(query), self.w_k(key), self.w_v(value)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T, Dk)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query (B, Tq, D), key/value (B, Tk, D), mask broadcastable to (B, H, Tq, Tk).

        Returns out (B, Tq, D) and weights (B, H, Tq, Tk) before dropout, or None.
        """
        B, Tq, _ = query.shape
        Tk = key.shape[1]
        q, k, v = (self._split_heads(t) for t in self._project(query, key, value))  # (B, H, T, Dk)
        mask4 = expand_mask(mask, B, Tq, Tk)  # (B|1, 1|H, Tq|1, Tk)
        weights = None
        p_drop = self.dropout_p if self.training else 0.0
        if need_weights or self.attention_impl == "math" or (
            self.attention_impl == "chunked" and p_drop > 0
        ):
            out, weights = scaled_dot_product_attention(q, k, v, mask4, self.dropout)
        elif self.attention_impl == "chunked":
            out = chunked_attention(q, k, v, mask4)
        else:
            dead = None if mask4 is None else ~mask4.any(dim=-1, keepdim=True)  # rows with no key
            # SDPA gives NaN or an average of V on a row with no visible key: open such rows
            # for the kernel, then zero their output, which is what our convention promises
            attn_mask = None if mask4 is None else mask4 | dead
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p_drop)
            if dead is not None:
                out = out.masked_fill(dead, 0.0)
        out = out.transpose(1, 2).reshape(B, Tq, self.d_model)  # (B, Tq, D)
        return self.w_o(out), (weights if need_weights else None)
