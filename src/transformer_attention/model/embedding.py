"""The token embedding: each token's vector, plus (`bigram_buckets` > 0) a vector of the pair of words it ends.

A bag of word pairs is what lifts the linear baselines on long reviews ("not good", "well worth"): NBSVM and
TF-IDF gain 1.5-3 points on IMDB from bigrams. A one-layer encoder with absolute positions can in principle
attend from "good" to the "not" before it, but it learns that slowly from 25k reviews. fastText's answer (Joulin
et al. 2017, "Bag of Tricks for Efficient Text Classification") is a second table indexed by a hash of
(previous token, token), summed into the input: the same here, so attention reads word pairs as well as words.
"""

from __future__ import annotations

import torch
from torch import nn

# Carter-Wegman hashing, ((a * pair + b) mod p) mod buckets with p the prime 2^31 - 1: every bit of the pair
# moves the bucket (a plain multiple mod a power of two would read only the pair's low bits)
_PRIME = 2**31 - 1
_A, _B = 1_540_483_477, 97


def bigram_ids(tokens: torch.Tensor, vocab_size: int, buckets: int, pad_id: int = 0) -> torch.Tensor:
    """(B, T) bucket of each (previous token, token) pair; the first position's previous token is `pad_id`.
    The same pair gets the same bucket wherever it is; distinct pairs share a bucket only by hash collision."""
    prev = torch.full_like(tokens[:, :1], pad_id)
    pairs = torch.cat([prev, tokens[:, :-1]], dim=1) * vocab_size + tokens  # (B, T) a unique id per pair
    return ((pairs * _A + _B) % _PRIME) % buckets


class TokenEmbedding(nn.Embedding):
    """`nn.Embedding` of the words (its `weight` is what pretrained vectors fill and what freezing holds fixed)
    whose output also adds, when `bigram_buckets` > 0, the row of `bigrams` (a second table, trained from zero,
    so an untrained one leaves the word vectors as they are) picked by hashing each (previous token, token).
    A padding position gets no pair vector: its output is the pad row, as without pairs."""

    def __init__(self, vocab_size: int, dim: int, padding_idx: int = 0, bigram_buckets: int = 0) -> None:
        super().__init__(vocab_size, dim, padding_idx=padding_idx)
        self.bigrams = nn.Embedding(bigram_buckets, dim) if bigram_buckets > 0 else None
        if self.bigrams is not None:
            nn.init.zeros_(self.bigrams.weight)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = super().forward(tokens)  # (B, T, D)
        if self.bigrams is None:
            return x
        pad = self.padding_idx if self.padding_idx is not None else 0
        ids = bigram_ids(tokens, self.num_embeddings, self.bigrams.num_embeddings, pad)
        real = (tokens != pad).unsqueeze(-1).to(x.dtype)  # (B, T, 1)
        return x + self.bigrams(ids) * real

    def extra_repr(self) -> str:
        return super().extra_repr() + (f", bigram_buckets={self.bigrams.num_embeddings}" if self.bigrams else "")
