"""DecompX as its paper defines it (Modarressi et al., ACL 2023, "DecompX: Explaining Transformers Decisions by
Propagating Token Decomposition", with its reference code's defaults, include_biases=True and
bias_decomp_type="absdot"): every bias shared out among the tokens, and each token's position vector counted as
part of that token. decompx.py keeps biases and positions apart instead.

Each position i carries one vector per input token k, x_{i<-k}, that sum over k to the model's own x_i; token k
starts as its word and position vectors at its own position, plus an equal share of each n-gram vector it is part
of at the position where that n-gram ends (`first_parts`; the paper's models have no n-grams: this shares them as
decompx ranks them), zero elsewhere. Through each layer:
- attention: sum_h sum_j alpha^h_ij W_O^h W_V^h x_{j<-k} with the weights as the model computed them, plus the
  residual x_{i<-k}; then the attention's bias, b_i = sum_h (sum_j alpha^h_ij) W_O^h b_V^h + b_O, is shared;
- each LayerNorm: gamma (x_{i<-k} - mean(x_{i<-k})) / s(x_i), s the deviation of the actual input; beta shared;
- the feed-forward block: W_1 x_{i<-k}, b_1 shared; each unit times its secant slope act(u) / u at the actual
  pre-activation u; W_2 of that, b_2 shared; plus the residual;
then the pooling (position 0, or the mean of the real rows) and the head, W x_k, its bias shared.

A bias b added at position i is shared by AbsDot: token k takes |x_{i<-k} . b| / sum_k' |x_{i<-k'} . b| of it,
computed on the vectors it is added to. So the shares depend on the propagated vectors and the propagation is
written out (no Jacobian shortcut as in decompx.py). A bias that no token can take (every share zero: a row that
pools nothing) is kept apart, `unshared`, so that `tokens.sum(1) + unshared == logits` always, to float64
rounding. Unlike the reference code's first layer, which carries the value bias b_V with each key, every layer
here shares W_O b_V with b_O. A naive-Bayes term (model/evidence.py) adds to the logits directly: each n-gram's
evidence is shared equally by its words, as decompx shares it.

Shapes: B batch, T tokens, K = T + 1 parts (the tokens and the unshared slot), D d_model, F feed-forward width,
H heads, Dk head dim, C classes. The cost: K vectors per token through the network, about K forward passes of a
row, and T x K x max(D, F) numbers per row at once (the feed-forward block's queries in chunks of `CHUNK`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ...model.attention import MultiHeadAttention
from ...model.classifier import TransformerClassifier
from ...model.encoder import TransformerEncoderLayer
from ...module import evaluating
from ..passes import Passes
from . import Explanation, Method, Options, register
from ._forward import Trace, encoder_layers, run, secant_slope
from ._inputs import checked
from .decompx import ngram_shares, shared_by_words

CHUNK = 2**24  # numbers of the feed-forward block held at once: 128 MiB of float64


@dataclass
class PaperDecomposition:
    """The logits (B, C) taken apart: `tokens` (B, T, C), each token's share (its word, its n-grams, its position
    and its AbsDot shares of every bias), and `unshared` (B, C), the bias no token could take (zero but for rows
    that pool nothing)."""

    logits: Tensor
    tokens: Tensor
    unshared: Tensor


def absdot(parts: Tensor, bias: Tensor) -> Tensor:
    """parts (..., K, E) plus bias (E,) or (..., E), shared over the K - 1 token slots by AbsDot; the last slot
    takes the bias where no token can (all shares zero). `parts` (contiguous, a fresh result) is added to in place."""
    K, E = parts.shape[-2:]
    dots = parts @ bias if bias.dim() == 1 else (parts @ bias.unsqueeze(-1)).squeeze(-1)  # (..., K): x_k . b
    weight = dots[..., :-1].abs()
    total = weight.sum(dim=-1, keepdim=True)
    share = weight / torch.where(total > 0, total, torch.ones_like(total))
    share = torch.cat([share, (total == 0).to(share.dtype)], dim=-1)  # (..., K)
    flat = parts.reshape(-1, K, E)  # (N, K, E)
    outer = bias.reshape(-1, 1, E).expand(flat.shape[0], 1, E)  # (N, 1, E)
    return flat.baddbmm_(share.reshape(-1, K, 1), outer).view(parts.shape)  # parts + share_k b, in place


def bias_of(layer: nn.Linear | nn.LayerNorm, dtype: torch.dtype) -> Tensor | None:
    return None if layer.bias is None else layer.bias.to(dtype)


def linear(parts: Tensor, layer: nn.Linear) -> Tensor:
    """The layer on each part (..., K, E), its bias shared by AbsDot."""
    out = parts @ layer.weight.to(parts.dtype).T
    bias = bias_of(layer, parts.dtype)
    return out if bias is None else absdot(out, bias)


def layer_norm(parts: Tensor, layer: nn.LayerNorm) -> Tensor:
    """The norm on each part (..., T, K, D), held at the deviation of their sum (the actual input); beta shared."""
    actual = parts.sum(dim=-2)  # (..., T, D)
    std = (actual.var(dim=-1, unbiased=False, keepdim=True) + layer.eps).sqrt().unsqueeze(-2)  # (..., T, 1, 1)
    scale = 1 / std if layer.weight is None else layer.weight.to(parts.dtype) / std  # (..., T, 1, D)
    out = (parts - parts.mean(dim=-1, keepdim=True)).mul_(scale)
    bias = bias_of(layer, parts.dtype)
    return out if bias is None else absdot(out, bias)


def attention(parts: Tensor, weights: Tensor, mha: MultiHeadAttention) -> tuple[Tensor, Tensor]:
    """What the attention moves from each part (B, T, K, D) with the model's weights (B, H, T, T), without bias,
    and the bias each query gets (B, T, D): the value bias through the weights (none where a query sees no key)
    and the output bias."""
    B, T, K, D = parts.shape
    v = (parts @ mha.w_v.weight.to(parts.dtype).T).view(B, T, K, mha.num_heads, mha.d_k)  # (B, T, K, H, Dk)
    mixed = torch.einsum("bhij,bjkhe->bikhe", weights, v).reshape(B, T, K, D)  # (B, T, K, D)
    w_o = mha.w_o.weight.to(parts.dtype)
    b_v = bias_of(mha.w_v, parts.dtype)
    reached = weights.sum(dim=-1)  # (B, H, T): 1, or 0 for a query that sees no key
    if b_v is None:
        b_v = parts.new_zeros(D)
    per_query = torch.einsum("bhi,he->bihe", reached, b_v.view(mha.num_heads, mha.d_k)).reshape(B, T, D) @ w_o.T
    b_o = bias_of(mha.w_o, parts.dtype)
    return mixed @ w_o.T, per_query if b_o is None else per_query + b_o


def feed_forward(parts: Tensor, layer: TransformerEncoderLayer) -> Tensor:
    """The feed-forward block on each part (B, T, K, D), its biases shared, queries in chunks."""
    B, T, K, _ = parts.shape
    step = max(1, CHUNK // max(1, B * K * max(parts.shape[-1], layer.linear1.out_features)))
    out = []
    for start in range(0, T, step):
        u = linear(parts[:, start : start + step], layer.linear1)  # (B, n, K, F)
        slope = secant_slope(u.sum(dim=-2), layer.activation).unsqueeze(-2)  # (B, n, 1, F) at the actual u
        out.append(linear(u.mul_(slope), layer.linear2))
    return torch.cat(out, dim=1)


def decompx_paper(
    net: TransformerClassifier, input_ids: Tensor, attention_mask: Tensor | None = None
) -> PaperDecomposition:
    """`net` (a TransformerClassifier) on input_ids (B, T), attention_mask (B, T) bool (None: from its pad id),
    decomposed by DecompX as its paper defines it, in float64, dropout off (each submodule's mode restored)."""
    mask = checked(net, input_ids, attention_mask)
    with evaluating(net), torch.no_grad():
        trace = run(net, input_ids, mask)  # the model's own weights, layer by layer
        logits = propagate(net, trace, mask)  # (B, K, C)
    T = input_ids.shape[1]
    tokens = shared_by_words(logits[:, :T].clone(), list(enumerate(trace.evidence, start=1)))  # the term's, by word
    return PaperDecomposition(logits=trace.logits.detach(), tokens=tokens, unshared=logits[:, T])


def first_parts(trace: Trace) -> Tensor:
    """(B, T, K, D): what each token is of each position's input x0. Token t has its word and position vectors at
    t, and an equal share of every n-gram vector it is part of, at the position where the n-gram ends (decompx's
    `ngram_shares`, as its word_shares counts them); summed over the tokens, each position's input."""
    B, T, D = trace.x0.shape
    parts = trace.x0.new_zeros(B, T, T + 1, D)
    parts[:, range(T), range(T)] = trace.words + trace.positions
    for n, grams in enumerate(trace.ngrams, start=2):
        share, backs = ngram_shares(grams, n)
        for back in backs:  # the word `back` places before the n-gram's end
            ends = torch.arange(back, T, device=grams.device)
            parts[:, ends, ends - back] += share[:, back:]
    return parts


def propagate(net: TransformerClassifier, trace: Trace, mask: Tensor) -> Tensor:
    """(B, K, C): each token's vector (and the unshared slot's) carried from the input to the logits, with the
    attention weights of `trace`, the written-out forward pass of the same ids and mask."""
    parts = first_parts(trace)
    for layer, traced in zip(encoder_layers(net), trace.layers, strict=True):
        if layer.norm_first:
            moved, bias = attention(layer_norm(parts, layer.norm1), traced.weights, layer.self_attn)
            parts = absdot(parts + moved, bias)
            parts = parts + feed_forward(layer_norm(parts, layer.norm2), layer)
        else:
            moved, bias = attention(parts, traced.weights, layer.self_attn)
            parts = layer_norm(absdot(parts + moved, bias), layer.norm1)
            parts = layer_norm(parts + feed_forward(parts, layer), layer.norm2)
    if isinstance(net.encoder.norm, nn.LayerNorm):
        parts = layer_norm(parts, net.encoder.norm)
    if net.config.pooling == "cls":
        pooled = parts[:, 0]  # (B, K, D)
    else:
        rows = mask.to(parts.dtype) / mask.sum(dim=1, keepdim=True).clamp(min=1)  # (B, T)
        pooled = torch.einsum("bt,btkd->bkd", rows, parts)
    return linear(pooled, net.head)  # (B, K, C)


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    """The explained class's share of each token, a row at a time, cut after its last real token (what follows
    reaches nothing the head reads): T x T parts per row, not per batch."""
    scores = torch.zeros(ids.shape, dtype=torch.float64, device=ids.device)
    for b in range(ids.shape[0]):
        live = mask[b].nonzero()
        n = int(live.max()) + 1 if live.numel() else 1
        found = decompx_paper(net, ids[b : b + 1, :n], mask[b : b + 1, :n])
        scores[b, :n] = found.tokens[0, :, int(target[b])]
    return Explanation(scores)


def passes(length: int, classes: int, options: Options) -> Passes:
    """length + 1 vectors per token through the network: about as many forward passes of the row."""
    return Passes(forward=length + 1)


# only when named: a row of T tokens costs T^3 (its T + 1 vectors per token through attention), a 1,024-token
# review minutes on a CPU
register(
    Method(
        "decompx_paper", "DecompX (paper: biases shared)", signed=True, explain=explain, passes=passes, by_default=False
    )
)
