"""Transformer encoder layer and stack, post-norm (original Transformer) or pre-norm.

Shapes: B batch, T tokens, D d_model, H heads. Masks: True = attend.
Submodule names follow torch.nn.TransformerEncoderLayer so weights copy across one to one.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .config import check_encoder
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
        attention_impl: str = "math",
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
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        need_weights: bool,
        rows: int | None,
        head_mask: torch.Tensor | None = None,
        need_norms: bool = False,
    ):
        """Self-attention of the first `rows` positions (all when None) to every position."""
        if rows is None:
            out, weights = self.self_attn(
                x, mask=mask, need_weights=need_weights, head_mask=head_mask, need_norms=need_norms
            )
        else:
            B, T, _ = x.shape
            mask = expand_mask(mask, B, T, T)  # (B|1, 1|H, T|1, T)
            mask = None if mask is None else mask[..., :rows, :]  # (B|1, 1|H, rows|1, T)
            out, weights = self.self_attn(
                x[:, :rows], x, mask=mask, need_weights=need_weights, head_mask=head_mask, need_norms=need_norms
            )
        return self.dropout1(out), weights

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(
        self,
        src: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        rows: int | None = None,
        head_mask: torch.Tensor | None = None,
        need_norms: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """src (B, T, D) -> (B, T, D), and weights (B, H, T, T) when asked (`need_norms`: the norm-weighted map).

        `rows`: compute only the first `rows` positions' outputs, (B, rows, D), still attending
        to every key; a classifier's last layer needs the [CLS] row alone.
        `head_mask`: (H,) or (B, H), 1 = the head takes part, 0 = its output is masked out (MultiHeadAttention).
        """
        x = src  # x[:, :rows] below is x itself when rows is None
        maps = {"need_weights": need_weights, "need_norms": need_norms, "rows": rows, "head_mask": head_mask}
        if self.norm_first:
            sa, weights = self._sa_block(self.norm1(x), mask, **maps)
            x = x[:, :rows] + sa  # (B, rows|T, D)
            x = x + self._ff_block(self.norm2(x))
        else:
            sa, weights = self._sa_block(x, mask, **maps)
            x = self.norm1(x[:, :rows] + sa)  # (B, rows|T, D)
            x = self.norm2(x + self._ff_block(x))
        return x, weights


class TransformerEncoder(nn.Module):
    """A stack of `num_layers` copies of `encoder_layer`, with an optional final norm (pre-norm stacks)."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: nn.Module | None = None):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(encoder_layer) for _ in range(num_layers))
        self.norm = norm

    def forward(
        self,
        src: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        last_rows: int | None = None,
        head_mask: torch.Tensor | None = None,
        need_norms: bool = False,
    ) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        """src (B, T, D) -> (B, T, D), and one (B, H, T, T) weight tensor per layer when asked (`need_norms`:
        the norm-weighted maps, MultiHeadAttention).

        `last_rows`: the last layer computes only the first `last_rows` positions, (B, last_rows, D).
        `head_mask`: (L, H) or (B, L, H) for L layers, 1 = the head takes part, 0 = masked out.
        """
        B, T, _ = src.shape
        mask = expand_mask(mask, B, T, T)  # once per batch, not once per layer: (B|1, 1|H, T|1, T)
        L = len(self.layers)
        if head_mask is not None and (head_mask.dim() not in (2, 3) or head_mask.shape[-2] != L):
            raise ValueError(
                f"head_mask of shape {tuple(head_mask.shape)} does not fit {L} layers: expected (L, H) or (B, L, H) "
                f"with L={L}"
            )
        x, attentions = src, []
        for i, layer in enumerate(self.layers):
            rows = last_rows if i == L - 1 else None
            gates = None if head_mask is None else head_mask[..., i, :]  # (H,) or (B, H)
            x, weights = layer(
                x, mask=mask, need_weights=need_weights, rows=rows, head_mask=gates, need_norms=need_norms
            )
            attentions.append(weights)
        if self.norm is not None:
            x = self.norm(x)
        return x, (attentions if need_weights or need_norms else None)
