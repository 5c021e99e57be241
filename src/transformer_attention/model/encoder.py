"""Transformer encoder layer and stack, post-norm (original Transformer) or pre-norm.

Shapes: B batch, T tokens, D d_model, H heads, L layers. Masks: True = attend.
Submodule names follow torch.nn.TransformerEncoderLayer (`self_attn`, `linear1`, `linear2`, `norm1`, `norm2`); its
fused `self_attn.in_proj_weight` is our `w_q`, `w_k` and `w_v` stacked, its `out_proj` our `w_o`.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .config import DEFAULT_ATTENTION_IMPL, check_encoder
from .masks import expand_mask


class TransformerEncoderLayer(nn.Module):
    """Self-attention block then feed-forward block, each with a residual and a LayerNorm."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dim_feedforward: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        attention_dropout: float | None = None,
        attention_impl: str = DEFAULT_ATTENTION_IMPL,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        check_encoder({"activation": activation})
        self.self_attn = MultiHeadAttention(
            d_model=d_model,
            num_heads=num_heads,
            dropout=dropout if attention_dropout is None else attention_dropout,
            attention_impl=attention_impl,
        )
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)  # inside the feed-forward block
        self.dropout1 = nn.Dropout(dropout)  # on the attention block's output
        self.dropout2 = nn.Dropout(dropout)  # on the feed-forward block's output
        self.activation = getattr(F, activation)  # F.relu or F.gelu
        self.norm_first = norm_first

    def _sa_block(
        self, x: torch.Tensor, mask: torch.Tensor | None, need_weights: bool, queries: int | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention of the first `queries` positions (all when None) to every position."""
        if queries is None:
            out, weights = self.self_attn(x, mask=mask, need_weights=need_weights)
        else:
            B, T, _ = x.shape
            mask = expand_mask(mask, B, T, T)  # (B|1, 1|H, T|1, T)
            mask = None if mask is None else mask[..., :queries, :]  # (B|1, 1|H, queries|1, T)
            out, weights = self.self_attn(x[:, :queries], x, mask=mask, need_weights=need_weights)
        return self.dropout1(out), weights

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
        return out

    def forward(
        self,
        src: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        queries: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """src (B, T, D) -> (B, T, D), and the attention weights (B, H, T, T) when asked.

        `queries`: compute only the first `queries` positions' outputs, (B, queries, D), still attending
        to every key; a classifier's last layer needs the [CLS] row alone.
        """
        x = src  # x[:, :queries] below is x itself when queries is None
        if self.norm_first:
            sa, weights = self._sa_block(self.norm1(x), mask, need_weights, queries)
            x = x[:, :queries] + sa  # (B, queries|T, D)
            x = x + self._ff_block(self.norm2(x))
        else:
            sa, weights = self._sa_block(x, mask, need_weights, queries)
            x = self.norm1(x[:, :queries] + sa)  # (B, queries|T, D)
            x = self.norm2(x + self._ff_block(x))
        return x, weights


class TransformerEncoder(nn.Module):
    """A stack of `num_layers` copies of `encoder_layer`, with an optional final norm (pre-norm stacks)."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(encoder_layer) for _ in range(num_layers))
        self.norm = norm

    def forward(
        self,
        src: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        last_queries: int | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        """src (B, T, D) -> (B, T, D), and one (B, H, T, T) weight tensor per layer when asked.

        `last_queries`: the last layer computes only the first `last_queries` positions, (B, last_queries, D).
        """
        B, T, _ = src.shape
        mask = expand_mask(mask, B, T, T)  # once per batch, not once per layer: (B|1, 1|H, T|1, T)
        x, attentions = src, []
        for i, layer in enumerate(self.layers):
            queries = last_queries if i == len(self.layers) - 1 else None
            x, weights = layer(x, mask=mask, need_weights=need_weights, queries=queries)
            if weights is not None:
                attentions.append(weights)
        if self.norm is not None:
            x = self.norm(x)
        return x, (attentions if need_weights else None)
