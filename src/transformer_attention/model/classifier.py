"""TransformerClassifier: embedding -> positions -> encoder -> pooling -> linear head.

Shapes: B batch, T tokens, D d_model, H heads, C classes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import torch
from torch import nn

from ..checks import closest
from .config import EncoderConfig, encoder_fields
from .embedding import TokenEmbedding
from .encoder import TransformerEncoder, TransformerEncoderLayer
from .evidence import NgramEvidence
from .masks import padding_mask
from .positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding

Positional = SinusoidalPositionalEncoding | LearnedPositionalEncoding
POSITIONAL_ENCODINGS: dict[str, type[Positional]] = {
    "sinusoidal": SinusoidalPositionalEncoding,
    "learned": LearnedPositionalEncoding,
}


class ClassifierOutput(NamedTuple):
    logits: torch.Tensor  # (B, C)
    attentions: list[torch.Tensor] | None  # one (B, H, T, T) per layer, or None


class TransformerClassifier(nn.Module):
    """Encoder classifier built from an `EncoderConfig`, whose fields `settings` override
    (`TransformerClassifier(vocab_size=1000, num_classes=2, d_model=64)` works too).
    `pooling="cls"` reads the first token, which must be the tokenizer's [CLS]; `"mean"` averages
    the non-pad positions. Padding never changes the logits."""

    predicts_labels = True  # False: its head was never trained on labels (a masked language model's encoder)

    def __init__(
        self,
        config: EncoderConfig | None = None,
        *,
        vocab_size: int,
        num_classes: int,
        pad_id: int = 0,
        **settings: Any,
    ) -> None:
        super().__init__()
        self.config = c = _with_settings(config or EncoderConfig(), settings)
        self.pad_id = pad_id
        self.embedding = TokenEmbedding(
            vocab_size, c.d_model, padding_idx=pad_id, ngram_buckets=c.ngram_buckets, ngram_max=c.ngram_max
        )
        nn.init.normal_(self.embedding.weight, std=c.d_model**-0.5)  # x * sqrt(D) then has unit scale
        with torch.no_grad():
            self.embedding.weight[pad_id].zero_()
        self.pos_encoder: Positional = POSITIONAL_ENCODINGS[c.positional](c.d_model, c.max_len, c.dropout)
        layer = TransformerEncoderLayer(
            d_model=c.d_model,
            num_heads=c.num_heads,
            dim_feedforward=c.dim_feedforward,
            dropout=c.dropout,
            activation=c.activation,
            norm_first=c.norm_first,
            attention_dropout=c.attention_p,
            attention_impl=c.attention_impl,
        )
        # pre-norm stacks end un-normalised: a last LayerNorm as in GPT-2 / ViT
        final_norm = nn.LayerNorm(c.d_model) if c.norm_first else None
        self.encoder = TransformerEncoder(layer, num_layers=c.num_layers, norm=final_norm)
        self.head = nn.Linear(c.d_model, num_classes)
        self.evidence = (
            NgramEvidence(vocab_size, num_classes, c.nb_buckets, c.nb_ngram_max, pad_id) if c.nb_ngram_max else None
        )

    def forward(
        self, tokens: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> ClassifierOutput:
        """tokens (B, T) long; mask (B, T) bool, True = real token (built from pad_id if None).
        Returns the logits (B, C) and, when `need_weights`, every layer's attention weights (B, H, T, T)."""
        encoder, evidence, attentions = self.logit_parts(tokens, mask, need_weights)
        return ClassifierOutput(encoder if evidence is None else encoder + evidence, attentions)

    def logit_parts(
        self, tokens: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None, list[torch.Tensor] | None]:
        """The two terms of the logits apart: the encoder's (B, C) and the naive-Bayes n-gram evidence (B, C; None
        without it), and the attention weights as `forward` gives them."""
        if mask is None:
            mask = padding_mask(tokens, self.pad_id)  # (B, T)
        cls = self.config.pooling == "cls"
        # [CLS] pooling reads one row of the last layer: compute that row alone there (the maps want every row)
        x, attentions = self.encode(tokens, mask, need_weights, last_queries=1 if cls and not need_weights else None)
        evidence = None if self.evidence is None else self.evidence(tokens, mask)
        return self.head(pool(x, mask, self.config.pooling)), evidence, attentions

    def encode(
        self,
        tokens: torch.Tensor,
        mask: torch.Tensor,
        need_weights: bool = False,
        last_queries: int | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        """Every token's vector from the last layer, (B, T, D) (the first `last_queries` rows only, if given):
        what the head pools, and what masked-language-model pretraining predicts words from."""
        x = self.embedding(tokens) * math.sqrt(self.config.d_model)  # (B, T, D)
        x = self.pos_encoder(x)
        out: tuple[torch.Tensor, list[torch.Tensor] | None] = self.encoder(
            x, mask=mask, need_weights=need_weights, last_queries=last_queries
        )
        return out


def pool(x: torch.Tensor, mask: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """What the head reads of x (B, T, ...): position 0's entry ("cls") or the mean over the real positions ("mean";
    mask (B, T), None: every position), (B, ...). Of the token vectors (B, T, D) that is the pooled vector; of
    attention maps (B, T, T), the pooled row: how much each token counts in it."""
    if pooling == "cls":
        return x[:, 0]
    m = torch.ones(x.shape[:2], device=x.device) if mask is None else mask
    m = m.to(x.dtype).view(*m.shape, *[1] * (x.dim() - 2))  # (B, T, 1, ...)
    return (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)


def _with_settings(config: EncoderConfig, settings: dict[str, Any]) -> EncoderConfig:
    """`config` with `settings` in place of its fields (checked again); an unknown name is a TypeError."""
    valid = encoder_fields()
    for name in settings:
        if name not in valid:
            near = closest(name, valid)
            hint = f"did you mean {near}? " if near else ""
            raise TypeError(f"TransformerClassifier got an unknown setting {name!r}: {hint}valid: {', '.join(valid)}")
    return dataclasses.replace(config, **settings)
