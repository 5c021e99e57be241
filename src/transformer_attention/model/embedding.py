"""The token embedding: each token's vector, plus (`ngram_buckets` > 0) vectors of the word pairs, and triples,
that it ends.

A bag of word pairs is what lifts the linear baselines on long reviews ("not good", "well worth"): NBSVM and
TF-IDF gain 1.5-3 points on IMDB from bigrams, a little more from trigrams. A one-layer encoder with absolute
positions can in principle attend from "good" to the "not" before it, but it learns that slowly from 25k
reviews. fastText's answer (Joulin et al. 2017, "Bag of Tricks for Efficient Text Classification") is a second
table whose rows are picked by a hash of each n-gram, summed into the input: the same here, so attention reads
word pairs as well as words.
"""

from __future__ import annotations

import torch
from torch import nn

# An n-gram's id, sum of (n - 2, t1, ..., tn) times powers of the vocabulary size (for a pair, prev * V + token),
# taken modulo the prime p = 2^31 - 1 as it is built (each step stays below 2^62: int64 never overflows); then
# Carter-Wegman hashing, ((a * id + b) mod p) mod buckets: every bit of every token moves the bucket (a plain
# multiple of the id modulo a power of two would read only the id's low bits).
_PRIME = 2**31 - 1
_A, _B = 1_540_483_477, 97


def ngram_ids(tokens: torch.Tensor, n: int, vocab_size: int, buckets: int, pad_id: int = 0) -> torch.Tensor:
    """(B, T) bucket of the n tokens ending at each position (before the first token, `pad_id` stands in).
    The same n-gram gets the same bucket wherever it is; n-grams of different lengths hash apart; distinct
    n-grams share a bucket only by hash collision."""
    t = tokens.shape[1]
    # (B, n - 1 + T): n - 1 pads before the text, so every n-gram is whole, also for n > T (a one-word text)
    padded = torch.cat([tokens.new_full((tokens.shape[0], n - 1), pad_id), tokens], dim=1)
    h = torch.full_like(tokens, n - 2)
    for start in range(n):  # the oldest token first: the n-grams' i-th tokens are padded[:, start : start + T]
        h = (h * vocab_size + padded[:, start : start + t]) % _PRIME
    return ((h * _A + _B) % _PRIME) % buckets


class TokenEmbedding(nn.Embedding):
    """`nn.Embedding` of the words (its `weight` is what pretrained vectors fill and what freezing holds fixed)
    whose output also adds, when `ngram_buckets` > 0, for n = 2 .. `ngram_max`, the row of `ngrams` (a second
    table, trained from zero, so an untrained one leaves the word vectors as they are) picked by hashing the n
    tokens that end at each position. A padding position gets no n-gram vector: its output is the pad row."""

    def __init__(
        self, vocab_size: int, dim: int, padding_idx: int = 0, ngram_buckets: int = 0, ngram_max: int = 2
    ) -> None:
        super().__init__(vocab_size, dim, padding_idx=padding_idx)
        self.ngram_max = ngram_max
        self.ngrams = nn.Embedding(ngram_buckets, dim) if ngram_buckets > 0 else None
        if self.ngrams is not None:
            nn.init.zeros_(self.ngrams.weight)

    def parts(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """What `forward` sums, apart: the word vectors (B, T, D) and, for n = 2 .. ngram_max, the vectors of the
        n-grams ending at each position (B, T, D), zero at padding (none without an n-gram table)."""
        words = super().forward(tokens)  # (B, T, D)
        if self.ngrams is None:
            return words, []
        pad = self.padding_idx if self.padding_idx is not None else 0
        real = (tokens != pad).unsqueeze(-1).to(words.dtype)  # (B, T, 1): padding gets no n-gram vector
        buckets = self.ngrams.num_embeddings
        ids = [ngram_ids(tokens, n, self.num_embeddings, buckets, pad) for n in range(2, self.ngram_max + 1)]
        return words, [self.ngrams(i) * real for i in ids]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        words, grams = self.parts(tokens)
        return sum(grams, words)

    def extra_repr(self) -> str:
        grams = f", ngram_buckets={self.ngrams.num_embeddings}, ngram_max={self.ngram_max}" if self.ngrams else ""
        return super().extra_repr() + grams
