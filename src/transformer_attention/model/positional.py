"""Positional encodings: fixed sinusoids (Vaswani et al. 2017) or a learned table.

Shapes: B batch, T tokens, D d_model.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def check_length(T: int, max_len: int) -> int:
    """T itself, or a clear error when the positional table has no row for it."""
    if T > max_len:
        raise ValueError(
            f"sequence of {T} tokens is longer than the positional encoding's max_len={max_len}: "
            f"raise model.max_len or lower data.max_length"
        )
    return T


class SinusoidalPositionalEncoding(nn.Module):
    """Adds PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...), then dropout."""

    pe: torch.Tensor  # (max_len, D), registered as a buffer

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)[:, : d_model // 2]  # odd D: one cos fewer
        # a buffer, computed once: moves with .to(device), not a parameter, not in the checkpoint
        self.register_buffer("pe", pe.float(), persistent=False)  # (max_len, D)

    def positions(self, T: int) -> torch.Tensor:
        """(T, D): the vectors added at positions 0 .. T - 1 (no dropout)."""
        return self.pe[: check_length(T, self.max_len)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, D) -> (B, T, D)."""
        out: torch.Tensor = self.dropout(x + self.positions(x.shape[1]).to(x.dtype))
        return out


class LearnedPositionalEncoding(nn.Module):
    """A trained (max_len, D) table of position embeddings, then dropout."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)

    def positions(self, T: int) -> torch.Tensor:
        """(T, D): the vectors added at positions 0 .. T - 1 (no dropout)."""
        return self.embedding.weight[: check_length(T, self.max_len)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, D) -> (B, T, D)."""
        out: torch.Tensor = self.dropout(x + self.positions(x.shape[1]))
        return out
