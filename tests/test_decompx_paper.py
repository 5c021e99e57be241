"""DecompX as its paper defines it (biases shared by AbsDot, positions counted with their tokens) against an oracle
written here apart: a plain loop over positions and tokens in float64, one vector per (position, token) pair,
following the paper's equations; its parts summing to the logits; and its agreement with the other variant where
the two must agree (no biases, no positions)."""

from __future__ import annotations

import math

import pytest
import torch
from test_explanations import batch as explanations_batch
from test_explanations import trained

from transformer_attention.analysis import decompx
from transformer_attention.analysis.methods import Options, methods
from transformer_attention.analysis.methods import decompx_paper as paper
from transformer_attention.analysis.methods.decompx import word_shares
from transformer_attention.analysis.methods.decompx_paper import decompx_paper
from transformer_attention.model.classifier import TransformerClassifier

SHAPES = {
    "cls, post-norm, relu, 2 layers of 4 heads, no n-grams": dict(
        pooling="cls", norm_first=False, activation="relu", num_layers=2, num_heads=4, d_model=16
    ),
    "mean, pre-norm, gelu, 1 layer of 2 heads, bigrams and trigrams": dict(
        pooling="mean", norm_first=True, activation="gelu", num_layers=1, num_heads=2, d_model=12,
        ngram_buckets=50, ngram_max=3,
    ),
    "cls, pre-norm, gelu, 3 layers of 1 head, learned positions, n-grams to 4": dict(
        pooling="cls", norm_first=True, activation="gelu", num_layers=3, num_heads=1, d_model=8,
        positional="learned", ngram_buckets=30, ngram_max=4,
    ),
    "mean, post-norm, relu, 2 layers of 8 heads, bigrams": dict(
        pooling="mean", norm_first=False, activation="relu", num_layers=2, num_heads=8, d_model=16,
        ngram_buckets=20, ngram_max=2,
    ),
    "cls, post-norm, gelu, 1 layer of 3 heads, n-grams longer than the text": dict(
        pooling="cls", norm_first=False, activation="gelu", num_layers=1, num_heads=3, d_model=12,
        ngram_buckets=40, ngram_max=8,
    ),
}  # fmt: skip


def model(seed: int = 0, **settings) -> TransformerClassifier:
    torch.manual_seed(seed)
    net = TransformerClassifier(vocab_size=40, num_classes=3, dim_feedforward=24, max_len=16, **settings).eval()
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(std=0.3)  # far from the initial identity-like norms: every part matters
    return net.double()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """test_explanations' batch (full and padded rows) with its last row all padding: a row that sees no key."""
    ids, _ = explanations_batch()
    ids[3] = 0
    return ids, ids != 0


def shared(vectors: list[torch.Tensor], bias: torch.Tensor) -> list[torch.Tensor]:
    """AbsDot: token k takes |v_k . b| / sum_k' |v_k' . b| of the bias; the last entry (no token) takes it all when
    every token's weight is zero."""
    weights = [abs(float(v @ bias)) for v in vectors[:-1]]
    total = sum(weights)
    if total == 0:
        return [*vectors[:-1], vectors[-1] + bias]
    return [v + w / total * bias for v, w in zip(vectors[:-1], weights, strict=True)] + [vectors[-1]]


def oracle(net: TransformerClassifier, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens (B, T, C), unshared (B, C)): one row at a time, X[i][k] the vector of token k in position i."""
    B, T = ids.shape
    D = net.config.d_model
    with torch.no_grad():
        words, grams = net.embedding.parts(ids)  # (B, T, D) and the n-gram vectors ending at each position, by n
        own = words * math.sqrt(D) + net.pos_encoder.positions(T)  # a token's word and position
        grams = [g * math.sqrt(D) for g in grams]
    C, f64 = net.head.out_features, torch.float64
    tokens, unshared = torch.zeros(B, T, C, dtype=f64), torch.zeros(B, C, dtype=f64)

    def norm(X, ln):
        out = []
        for row in X:
            actual = sum(row)
            std = math.sqrt(float(((actual - actual.mean()) ** 2).mean()) + ln.eps)
            out.append(shared([(v - v.mean()) / std * ln.weight for v in row], ln.bias))
        return out

    def attend(X, source, mha, live):  # what attention adds to X (residual included), source: what it reads
        H, Dk = mha.num_heads, mha.d_k
        actual = [sum(row) for row in source]
        q = [mha.w_q.weight @ a + mha.w_q.bias for a in actual]
        k = [mha.w_k.weight @ a + mha.w_k.bias for a in actual]
        out = []
        for i in range(T):
            row = [v.clone() for v in X[i]]
            bias = mha.w_o.bias.clone()
            for h in range(H):
                cut = slice(h * Dk, (h + 1) * Dk)
                keys = [j for j in range(T) if live[j]]
                scores = torch.tensor([float(q[i][cut] @ k[j][cut]) / math.sqrt(Dk) for j in keys], dtype=f64)
                alpha = torch.softmax(scores, dim=0) if keys else scores
                for a, j in zip(alpha, keys, strict=True):
                    for kk in range(T + 1):
                        row[kk] = row[kk] + a * (mha.w_o.weight[:, cut] @ (mha.w_v.weight[cut] @ source[j][kk]))
                    bias = bias + a * (mha.w_o.weight[:, cut] @ mha.w_v.bias[cut])
            out.append(shared(row, bias))
        return out

    def feed_forward(X, layer):
        out = []
        for row in X:
            u = shared([layer.linear1.weight @ v for v in row], layer.linear1.bias)
            actual = sum(u)
            assert (actual != 0).all()
            slope = layer.activation(actual) / actual
            out.append(shared([layer.linear2.weight @ (slope * v) for v in u], layer.linear2.bias))
        return out

    def add(X, Y):
        return [[x + y for x, y in zip(a, b, strict=True)] for a, b in zip(X, Y, strict=True)]

    with torch.no_grad():
        for b in range(B):
            X = [[own[b, i] if k == i else torch.zeros(D, dtype=torch.float64) for k in range(T + 1)] for i in range(T)]
            for n, vectors in enumerate(grams, start=2):  # each n-gram's vector shared by its real words, where it ends
                for i in range(T):
                    members = [k for k in range(i - n + 1, i + 1) if k >= 0]
                    for k in members:
                        X[i][k] = X[i][k] + vectors[b, i] / len(members)
            for layer in net.encoder.layers:
                if layer.norm_first:
                    X = attend(X, norm(X, layer.norm1), layer.self_attn, mask[b])
                    X = add(X, feed_forward(norm(X, layer.norm2), layer))
                else:
                    X = norm(attend(X, X, layer.self_attn, mask[b]), layer.norm1)
                    X = norm(add(X, feed_forward(X, layer)), layer.norm2)
            if net.encoder.norm is not None:
                X = norm(X, net.encoder.norm)
            real = [i for i in range(T) if mask[b, i]]
            if net.config.pooling == "cls":
                pooled = X[0]
            else:
                pooled = [sum((X[i][k] for i in real), torch.zeros(D, dtype=torch.float64)) / max(1, len(real))
                          for k in range(T + 1)]  # fmt: skip
            read = shared([net.head.weight @ v for v in pooled], net.head.bias)
            tokens[b] = torch.stack(read[:T])
            unshared[b] = read[T]
    return tokens, unshared


@pytest.mark.parametrize("shape", SHAPES)
def test_the_papers_decompx_is_the_per_token_loop_and_adds_up_to_the_logits(shape: str):
    net = model(**SHAPES[shape])
    ids, mask = batch()
    found = decompx_paper(net, ids, mask)
    tokens, unshared = oracle(net, ids, mask)
    torch.testing.assert_close(found.tokens, tokens, rtol=0, atol=1e-10)
    torch.testing.assert_close(found.unshared, unshared, rtol=0, atol=1e-10)
    with torch.no_grad():
        logits = net(ids, mask).logits
    torch.testing.assert_close(found.logits, logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(found.tokens.sum(dim=1) + found.unshared, logits, rtol=0, atol=1e-6)
    assert found.tokens[:3][~mask[:3]].abs().max() == 0  # padding takes nothing in a row with a real token
    assert found.unshared[:3].abs().max() == 0  # every bias found a token to take it


def test_without_biases_and_positions_both_variants_are_one():
    """With every bias and position zero, AbsDot has nothing to share: each token's share is the other variant's
    word plus its equal share of each n-gram it is part of (decompx's ranking of words)."""
    net = model(pooling="mean", positional="learned", ngram_buckets=50, ngram_max=3)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if name.endswith("bias") or "pos_encoder" in name:
                p.zero_()
    ids, mask = batch()
    paper, apart = decompx_paper(net, ids, mask), decompx(net, ids, mask)
    torch.testing.assert_close(paper.tokens, word_shares(apart), rtol=0, atol=1e-10)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_the_papers_decompx_adds_up_on_trained_models_and_ranks_rows_alone(pooling: str, norm_first: bool):
    """Explained a row at a time, cut after its last real token: the same numbers as the whole batch at once."""
    net = trained(int(norm_first), pooling=pooling, norm_first=norm_first, num_layers=2)
    ids, mask = batch()
    ids = ids.clamp(max=19)
    found = decompx_paper(net, ids, mask)
    with torch.no_grad():
        logits = net.double()(ids, mask).logits
    torch.testing.assert_close(found.tokens.sum(dim=1) + found.unshared, logits, rtol=0, atol=1e-6)
    target = logits.argmax(dim=1)
    scores = methods()["decompx_paper"].explain(net, ids, mask, target, Options()).scores
    expected = found.tokens.gather(2, target.view(-1, 1, 1).expand(-1, ids.shape[1], 1)).squeeze(2)
    torch.testing.assert_close(scores[:3], expected[:3], rtol=0, atol=1e-10)


def test_the_papers_decompx_makes_the_passes_it_says(monkeypatch: pytest.MonkeyPatch):
    """The written-out forward pass once per row, and the propagation of T + 1 vectors per token of a row of T
    tokens (counted as T forward passes of the row): what `passes(length)` tells the cost estimates."""
    made = {"forward": 0}
    run, propagate = paper.run, paper.propagate

    def counted_run(net, ids, mask, *args, **kwargs):
        made["forward"] += ids.shape[0]
        return run(net, ids, mask, *args, **kwargs)

    def counted_propagate(net, trace, mask):
        made["forward"] += trace.x0.shape[0] * trace.x0.shape[1]
        return propagate(net, trace, mask)

    monkeypatch.setattr(paper, "run", counted_run)
    monkeypatch.setattr(paper, "propagate", counted_propagate)
    ids, mask = batch()
    ids, mask = ids[:3], mask[:3]  # rows of 9, 6 and 3 tokens
    methods()["decompx_paper"].explain(model(), ids, mask, torch.zeros(3, dtype=torch.long), Options())
    said = sum(paper.passes(int(n), 3, Options()).forward for n in mask.sum(dim=1))
    assert made["forward"] == said == 9 + 6 + 3 + 3
