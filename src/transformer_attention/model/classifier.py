"""TransformerClassifier: embedding -> positions -> encoder -> pooling -> linear head.

Shapes: B batch, T tokens, D d_model, H heads, C classes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from .attention import padding_mask
from .encoder import TransformerEncoder, TransformerEncoderLayer
from .positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding

POOLINGS = ("cls", "mean")
POSITIONALS = {"sinusoidal": SinusoidalPositionalEncoding, "learned": LearnedPositionalEncoding}


class ClassifierOutput(NamedTuple):
    logits: torch.Tensor  # (B, C)
    attentions: list[torch.Tensor] | None  # one (B, H, T, T) per layer, or None


class TransformerClassifier(nn.Module):
    """Encoder classifier. `pooling="cls"` reads the first token, which must be the tokenizer's
    [CLS]; `"mean"` averages the non-pad positions. Padding never changes the logits."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        dim_feedforward: int = 128,
        max_len: int = 512,
        dropout: float = 0.1,
        pooling: str = "cls",
        pad_id: int = 0,
        norm_first: bool = False,
        attention_dropout: float | None = None,
        attention_impl: str = "math",
        activation: str = "relu",
        positional: str = "sinusoidal",
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r}: expected one of {POOLINGS}")
        if positional not in POSITIONALS:
            raise ValueError(f"positional={positional!r}: expected one of {sorted(POSITIONALS)}")
        self.d_model, self.pooling, self.pad_id = d_model, pooling, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)  # x * sqrt(D) then has unit scale
        with torch.no_grad():
            self.embedding.weight[pad_id].zero_()
        self.pos_encoder = POSITIONALS[positional](d_model, max_len, dropout)
        layer = TransformerEncoderLayer(
            d_model, num_heads, dim_feedforward, dropout, activation, norm_first,
            attention_dropout=attention_dropout, attention_impl=attention_impl,
        )
        # pre-norm stacks end un-normalised: a last LayerNorm as in GPT-2 / ViT
        self.encoder = TransformerEncoder(layer, num_layers, nn.LayerNorm(d_model) if norm_first else None)
        self.head = nn.Linear(d_model, num_classes)

    def forward(
        self, tokens: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> ClassifierOutput:
        """tokens (B, T) long; mask (B, T) bool, True = real token (built from pad_id if None)."""
        if mask is None:
            mask = padding_mask(tokens, self.pad_id)  # (B, T)
        x = self.embedding(tokens) * math.sqrt(self.d_model)  # (B, T, D)
        x = self.pos_encoder(x)
        # [CLS] pooling reads one row of the last layer: compute that row alone there (the maps
        # for need_weights want every row)
        last_rows = 1 if self.pooling == "cls" and not need_weights else None
        x, attentions = self.encoder(x, mask=mask, need_weights=need_weights, last_rows=last_rows)  # (B, T|1, D)
        if self.pooling == "cls":
            pooled = x[:, 0]  # (B, D): the [CLS] token
        else:
            m = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
            pooled = (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)  # (B, D)
        return ClassifierOutput(self.head(pooled), attentions)
