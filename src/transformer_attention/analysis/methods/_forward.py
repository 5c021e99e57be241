"""The classifier's forward pass written out from its own parts, in float64, with the rules the decompositions
and relevance methods need switched on where they ask (`Rules`), and what each layer computed kept (`Trace`).
With no rule on it computes what `TransformerClassifier.forward` does, dropout off (tests/test_explanations.py
holds it to the model's logits for every choice of the model's settings). Each layer is two blocks that value
zeroing and ALTI call too: `attention_block` (the self-attention, after the first norm in a pre-norm layer) and
`after_attention` (the residual, the norms and the feed-forward block).

The rules only change gradients, never values:
- `freeze_attention`: the attention weights held at their values (no gradient through the scores or softmax);
- `freeze_norms`: each LayerNorm's standard deviation held (the norm becomes a linear map of its input);
- `secant`: each activation act(u) computed as (act(u) / u) u with the slope held: linear in u, and exact for
  any activation with act(0) = 0 (ReLU, GELU);
- `halve_products`: the two products of two live inputs (Q K^T and alpha V) pass half the gradient to each side
  (AttnLRP's uniform rule: the relevance of a product is shared by its two factors).

With `freeze_attention`, `freeze_norms` and `secant` the whole network is an affine map of its input x0 (the
word vectors, n-gram vectors and positions, summed): DecompX's decomposition is that map applied to each part.

Shapes: B batch, T tokens, D d_model, H heads, Dk head dim, C classes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ...model.classifier import TransformerClassifier, pool
from ...model.encoder import TransformerEncoderLayer
from ...model.masks import dead_rows, expand_mask


@dataclass(frozen=True)
class Rules:
    freeze_attention: bool = False
    freeze_norms: bool = False
    secant: bool = False
    halve_products: bool = False


@dataclass
class LayerTrace:
    """What one layer computed: its input `x` (B, T, D), its attention `weights` (B, H, T, T), the `values`
    (B, T, D) its w_v gave (bias included) and its attention block's output `attended` (B, T, D), before the
    residual."""

    x: torch.Tensor
    weights: torch.Tensor
    values: torch.Tensor
    attended: torch.Tensor


@dataclass
class Trace:
    """One forward pass, written out: the input x0 (B, T, D) = `words` + sum of `ngrams` + `positions` (each
    (B, T, D); `ngrams[n - 2]` the n-gram vectors), the `logits` (B, C), each layer's LayerTrace, and the logits'
    naive-Bayes term (model/evidence.py), `evidence[n - 1]` (B, T, C) that of the n-grams ending at each position."""

    x0: torch.Tensor
    words: torch.Tensor
    ngrams: list[torch.Tensor]
    positions: torch.Tensor
    logits: torch.Tensor
    layers: list[LayerTrace] = field(default_factory=list)
    evidence: list[torch.Tensor] = field(default_factory=list)


def halved(x: torch.Tensor) -> torch.Tensor:
    """x, with half the gradient flowing back through it (its value unchanged: 0.5 x + 0.5 x is x exactly)."""
    half = 0.5 * x
    return half + half.detach()


def linear(x: torch.Tensor, layer: nn.Linear, bias: bool = True) -> torch.Tensor:
    """`layer(x)` in x's dtype (`bias=False`: its weight alone)."""
    b = layer.bias.to(x.dtype) if bias and layer.bias is not None else None
    return F.linear(x, layer.weight.to(x.dtype), b)


def norm(
    x: torch.Tensor, layer: nn.LayerNorm, rules: Rules = Rules(), held_at: torch.Tensor | None = None, bias: bool = True
) -> torch.Tensor:
    """`layer(x)`, its standard deviation held when the rules say so; `held_at`: the norm's linear map at that input
    (its deviation, held), applied to x, which may have more leading dims; `bias=False`: without its bias."""
    at = x if held_at is None else held_at
    std = ((at - at.mean(dim=-1, keepdim=True)).pow(2).mean(dim=-1, keepdim=True) + layer.eps).sqrt()
    if rules.freeze_norms or held_at is not None:
        std = std.detach()
    out = (x - x.mean(dim=-1, keepdim=True)) / std
    if layer.weight is not None:
        out = out * layer.weight.to(x.dtype)
    if bias and layer.bias is not None:
        out = out + layer.bias.to(x.dtype)
    return out


def activation(u: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor], rules: Rules) -> torch.Tensor:
    """fn(u); with the secant rule, the slope fn(u) / u held (at u = 0, its limit, the slope of fn through 0)."""
    if not rules.secant:
        return fn(u)
    return secant_slope(u, fn).detach() * u


def secant_slope(u: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """fn(u) / u elementwise (at u = 0, its limit: the slope of fn through 0, as a secant through a small u)."""
    zero, tiny = u == 0, torch.finfo(u.dtype).eps ** 0.5
    at_zero = fn(u.new_tensor(tiny)) / tiny  # one number
    return torch.where(zero, at_zero, fn(u) / torch.where(zero, torch.ones_like(u), u))


def attention_block(
    x: torch.Tensor, layer: TransformerEncoderLayer, mask: torch.Tensor | None, rules: Rules = Rules()
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The layer's self-attention of x (B, T, D) (normed first in a pre-norm layer): its output (B, T, D), the
    weights (B, H, T, T) and the values (B, T, D). A query with no key gets zero weights, as in the model."""
    mha = layer.self_attn
    source = norm(x, layer.norm1, rules) if layer.norm_first else x
    values = linear(source, mha.w_v)
    q, k = mha.split_heads(linear(source, mha.w_q)), mha.split_heads(linear(source, mha.w_k))  # (B, H, T, Dk)
    v = mha.split_heads(values)  # (B, H, T, Dk)
    scores = (q / math.sqrt(mha.d_k)) @ k.transpose(-2, -1)  # (B, H, T, T)
    if rules.halve_products:
        scores = halved(scores)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1)  # (B, H, T, T)
    if mask is not None:
        weights = weights.masked_fill(dead_rows(mask), 0.0)
    if rules.freeze_attention:
        weights = weights.detach()
    mixed = weights @ v  # (B, H, T, Dk)
    if rules.halve_products:
        mixed = halved(mixed)
    B, _, T, _ = mixed.shape
    return linear(mixed.transpose(1, 2).reshape(B, T, mha.d_model), mha.w_o), weights, values  # (B, T, D)


def after_attention(
    x: torch.Tensor, attended: torch.Tensor, layer: TransformerEncoderLayer, rules: Rules = Rules()
) -> torch.Tensor:
    """The rest of the layer: from its input x and its attention block's output (..., T, D) to its output."""
    if layer.norm_first:
        z = x + attended
        return z + feed_forward(norm(z, layer.norm2, rules), layer, rules)
    z = norm(x + attended, layer.norm1, rules)
    return norm(z + feed_forward(z, layer, rules), layer.norm2, rules)


def feed_forward(x: torch.Tensor, layer: TransformerEncoderLayer, rules: Rules) -> torch.Tensor:
    """The layer's feed-forward block on x (..., D)."""
    return linear(activation(linear(x, layer.linear1), layer.activation, rules), layer.linear2)


def run(
    net: TransformerClassifier,
    ids: torch.Tensor,
    mask: torch.Tensor,
    rules: Rules = Rules(),
    dtype: torch.dtype = torch.float64,
) -> Trace:
    """`net` (a TransformerClassifier) on ids, mask (B, T), written out under `rules`, dropout off whatever the mode;
    x0 requires grad, so that d logits / d x0 is one `torch.autograd.grad` away."""
    scale = math.sqrt(net.config.d_model)
    with torch.no_grad():  # the parts are inputs here: no gradient to the tables
        words, grams = net.embedding.parts(ids)  # (B, T, D), n-gram vectors by n
        words, grams = words.to(dtype) * scale, [g.to(dtype) * scale for g in grams]
        positions = net.pos_encoder.positions(ids.shape[1]).to(dtype).expand_as(words)  # (B, T, D)
    x0 = (words + sum(grams, torch.zeros_like(words)) + positions).detach().requires_grad_(True)
    B, T = ids.shape
    keys = expand_mask(mask, B, T, T)  # (B, 1, 1, T)
    trace = Trace(x0=x0, words=words, ngrams=grams, positions=positions, logits=x0)
    x = x0
    for layer in encoder_layers(net):
        attended, weights, values = attention_block(x, layer, keys, rules)
        trace.layers.append(LayerTrace(x=x, weights=weights, values=values, attended=attended))
        x = after_attention(x, attended, layer, rules)
    if isinstance(net.encoder.norm, nn.LayerNorm):
        x = norm(x, net.encoder.norm, rules)
    trace.logits = linear(pool(x, mask, net.config.pooling), net.head)  # (B, C)
    if net.evidence is not None:
        with torch.no_grad():
            trace.evidence = [part.to(dtype) for part in net.evidence.by_n(ids, mask)]
        trace.logits = trace.logits + sum(part.sum(dim=1) for part in trace.evidence)
    return trace


def encoder_layers(net: TransformerClassifier) -> list[TransformerEncoderLayer]:
    """The encoder's layers, first first."""
    return [cast(TransformerEncoderLayer, layer) for layer in net.encoder.layers]
