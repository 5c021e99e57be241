"""The classifier's forward pass written out from its parameters, in float64, with the rules the decompositions
and relevance methods need switched on where they ask (`Rules`), and each layer's input and attention weights
kept (`Trace`). With no rule on it computes what `TransformerClassifier.forward` does, dropout off
(tests/test_explanations.py holds it to the model's logits).

The rules only change gradients, never values:
- `freeze_attention`: the attention weights held at their values (no gradient through the scores or softmax);
- `freeze_norms`: each LayerNorm's standard deviation held (the norm becomes a linear map of its input);
- `secant`: each activation act(u) computed as (act(u) / u) u with the slope held: exact for ReLU and GELU,
  whose act(0) is 0, and linear in u;
- `halve_products`: the two products of two live inputs (Q K^T and alpha V) pass half the gradient to each side
  (AttnLRP's uniform rule: the relevance of a product is shared by its two factors).

With `freeze_attention`, `freeze_norms` and `secant` the whole network is an affine map of its input x0 (the
word vectors, n-gram vectors and positions, summed): DecompX's decomposition is that map applied to each part.

Shapes: B batch, T tokens, D d_model, H heads, Dk head dim, C classes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ...model.attention import MultiHeadAttention
from ...model.classifier import TransformerClassifier
from ...model.embedding import ngram_ids
from ...model.encoder import TransformerEncoderLayer
from ...model.masks import expand_mask
from ...model.positional import LearnedPositionalEncoding


@dataclass(frozen=True)
class Rules:
    freeze_attention: bool = False
    freeze_norms: bool = False
    secant: bool = False
    halve_products: bool = False


@dataclass
class Trace:
    """One forward pass, written out: the input x0 (B, T, D) = `words` + sum of `ngrams` + `positions` (each
    (B, T, D); `ngrams[n - 2]` the n-gram vectors, zero where the model has none), `logits` (B, C), and per layer
    its input (B, T, D) and attention weights (B, H, T, T)."""

    x0: torch.Tensor
    words: torch.Tensor
    ngrams: list[torch.Tensor]
    positions: torch.Tensor
    logits: torch.Tensor
    inputs: list[torch.Tensor] = field(default_factory=list)
    weights: list[torch.Tensor] = field(default_factory=list)


def halved(x: torch.Tensor) -> torch.Tensor:
    """x, with half the gradient flowing back through it (its value unchanged: 0.5 x + 0.5 x is x exactly)."""
    half = 0.5 * x
    return half + half.detach()


def linear(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """`layer(x)` in x's dtype."""
    bias = None if layer.bias is None else layer.bias.to(x.dtype)
    return F.linear(x, layer.weight.to(x.dtype), bias)


def norm(x: torch.Tensor, layer: nn.LayerNorm, rules: Rules) -> torch.Tensor:
    """`layer(x)`, its standard deviation held when the rules say so."""
    centred = x - x.mean(dim=-1, keepdim=True)
    std = (centred.pow(2).mean(dim=-1, keepdim=True) + layer.eps).sqrt()
    if rules.freeze_norms:
        std = std.detach()
    out = centred / std
    if layer.weight is not None:
        out = out * layer.weight.to(x.dtype)
    if layer.bias is not None:
        out = out + layer.bias.to(x.dtype)
    return out


def activation(u: torch.Tensor, name: str, rules: Rules) -> torch.Tensor:
    """relu(u) or gelu(u); with the secant rule, the slope act(u) / u held (ReLU's: 1 where u > 0, else 0)."""
    if not rules.secant:
        return F.relu(u) if name == "relu" else F.gelu(u)
    if name == "relu":
        slope = (u > 0).to(u.dtype)
    else:
        small = u.abs() < 1e-12
        slope = torch.where(small, torch.full_like(u, 0.5), F.gelu(u) / torch.where(small, torch.ones_like(u), u))
    return slope.detach() * u


def attention(
    x: torch.Tensor, mha: MultiHeadAttention, mask: torch.Tensor | None, rules: Rules
) -> tuple[torch.Tensor, torch.Tensor]:
    """Self-attention of `x` (B, T, D) through `mha` (a MultiHeadAttention): its output (B, T, D) and weights."""
    q, k, v = (mha.split_heads(linear(x, getattr(mha, name))) for name in ("w_q", "w_k", "w_v"))  # (B, H, T, Dk)
    scores = (q / math.sqrt(mha.d_k)) @ k.transpose(-2, -1)  # (B, H, T, T)
    if rules.halve_products:
        scores = halved(scores)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1)  # (B, H, T, T)
    if rules.freeze_attention:
        weights = weights.detach()
    mixed = weights @ v  # (B, H, T, Dk)
    if rules.halve_products:
        mixed = halved(mixed)
    B, _, T, _ = mixed.shape
    return linear(mixed.transpose(1, 2).reshape(B, T, mha.d_model), mha.w_o), weights


def embedded(
    net: TransformerClassifier, ids: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, list, torch.Tensor]:
    """The input's three parts, each (B, T, D) in `dtype`, scaled as the model scales them: the word vectors,
    the n-gram vectors by n (n = 2 .. ngram_max; none without an n-gram table), the positions."""
    emb, scale = net.embedding, math.sqrt(net.config.d_model)
    words = nn.Embedding.forward(emb, ids).to(dtype) * scale  # the word table alone, without the n-grams
    grams = []
    if emb.ngrams is not None:
        pad = emb.padding_idx if emb.padding_idx is not None else 0
        real = (ids != pad).unsqueeze(-1).to(dtype)  # (B, T, 1): a padding position gets no n-gram vector
        for n in range(2, emb.ngram_max + 1):
            picked = emb.ngrams(ngram_ids(ids, n, emb.num_embeddings, emb.ngrams.num_embeddings, pad))
            grams.append(picked.to(dtype) * real * scale)
    encoder = net.pos_encoder  # sinusoidal: its fixed table `pe`; learned: its embedding's rows
    if isinstance(encoder, LearnedPositionalEncoding):
        table = encoder.embedding.weight
    else:
        table = cast(torch.Tensor, encoder.pe)
    positions = table[: ids.shape[1]].to(dtype).expand_as(words)  # read directly: no dropout, whatever the mode
    return words, grams, positions


def run(
    net: TransformerClassifier, ids: torch.Tensor, mask: torch.Tensor, rules: Rules = Rules(), dtype=torch.float64
) -> Trace:
    """`net` (a TransformerClassifier in eval mode) on ids, mask (B, T), written out under `rules`; x0 requires
    grad, so that d logits / d x0 is one `torch.autograd.grad` away."""
    with torch.no_grad():  # the parts are inputs here: no gradient to the tables
        words, grams, positions = embedded(net, ids, dtype)
    x0 = (words + sum(grams, torch.zeros_like(words)) + positions).detach().requires_grad_(True)
    B, T = ids.shape
    keys = expand_mask(mask, B, T, T)  # (B, 1, 1, T)
    trace = Trace(x0=x0, words=words, ngrams=grams, positions=positions, logits=x0)
    x = x0
    for layer in encoder_layers(net):
        trace.inputs.append(x)
        name = "relu" if layer.activation is F.relu else "gelu"
        if layer.norm_first:
            sa, w = attention(norm(x, layer.norm1, rules), layer.self_attn, keys, rules)
            x = x + sa
            x = x + feed_forward(norm(x, layer.norm2, rules), layer, name, rules)
        else:
            sa, w = attention(x, layer.self_attn, keys, rules)
            x = norm(x + sa, layer.norm1, rules)
            x = norm(x + feed_forward(x, layer, name, rules), layer.norm2, rules)
        trace.weights.append(w)
    if isinstance(net.encoder.norm, nn.LayerNorm):
        x = norm(x, net.encoder.norm, rules)
    trace.logits = linear(pooled(x, mask, net.config.pooling), net.head)  # (B, C)
    return trace


def encoder_layers(net: TransformerClassifier) -> list[TransformerEncoderLayer]:
    """The encoder's layers, first first."""
    return [cast(TransformerEncoderLayer, layer) for layer in net.encoder.layers]


def feed_forward(x: torch.Tensor, layer: TransformerEncoderLayer, name: str, rules: Rules) -> torch.Tensor:
    """The layer's feed-forward block on x (B, T, D)."""
    return linear(activation(linear(x, layer.linear1), name, rules), layer.linear2)


def pooled(x: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """What the head reads of x (B, T, D): the [CLS] output, or the mean over the real tokens (B, D)."""
    if pooling == "cls":
        return x[:, 0]
    m = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    return (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)


def pool_weights(mask: torch.Tensor, pooling: str, dtype=torch.float64) -> torch.Tensor:
    """(B, T): how much each position's output counts in what the head reads (one-hot on [CLS], or 1/n)."""
    if pooling == "cls":
        w = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        w[:, 0] = 1.0
        return w
    m = mask.to(dtype)
    return m / m.sum(dim=1, keepdim=True).clamp(min=1.0)
