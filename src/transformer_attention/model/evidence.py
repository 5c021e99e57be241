"""Naive-Bayes n-gram evidence: a term of the logits, summed over the n-grams of the text, each counted once.

On long reviews a linear model of word n-grams is hard to beat: NBSVM (Wang & Manning 2012, "Baselines and
Bigrams") scales each binary n-gram feature by its naive-Bayes log-count ratio r, counted on the training split,
and learns a weight for it. The same term is part of the model here: the n-grams ending at each position (n = 1 ..
`ngram_max`, hashed into `buckets` rows as `embedding.ngram_ids` hashes word pairs) give the logits r * w of their
row, the first time each appears in the text (NBSVM's binarised features), and the encoder's logits add them up.
A token's evidence is the sum over the n-grams it ends: the parts add up to the term exactly, so every
decomposition of the logits shares it out token by token with the encoder's own parts.

Shapes: B batch, T tokens, C classes, N rows of training texts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from .embedding import ngram_ids

SMOOTHING = 1.0  # the ratio's additive smoothing, Wang & Manning's alpha


def first_seen(ids: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: True where a real position holds a value not seen at an earlier real position of its row."""
    marked = torch.where(real, ids, torch.full_like(ids, -1))  # padding and dropped words: one value, cut below
    ordered, order = torch.sort(marked, dim=1, stable=True)  # equal values keep their order: the first leads
    repeat = torch.zeros_like(real)
    repeat[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    return torch.zeros_like(real).scatter_(1, order, ~repeat) & real


def share_of_margin(encoder: torch.Tensor, evidence: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(B,): how much of each text's margin for its `target` class (B,) (that logit less the mean of the others)
    the evidence term carries against the encoder's: |evidence's margin| / (|evidence's| + |encoder's|);
    `encoder`, `evidence` (B, C) the logits' two terms."""
    C = encoder.shape[1]

    def margin(logits: torch.Tensor) -> torch.Tensor:
        return (logits.gather(1, target.view(-1, 1))[:, 0] * C - logits.sum(dim=1)) / max(C - 1, 1)

    ours, theirs = margin(evidence).abs(), margin(encoder).abs()
    return ours / (ours + theirs).clamp(min=torch.finfo(ours.dtype).tiny)


class NgramEvidence(nn.Module):
    """The naive-Bayes n-gram term of the logits: `ratio` (buckets, C), each row's one-class-against-the-rest
    log-count ratio, counted by `fit` on the training split and kept in the checkpoint (a buffer: never trained);
    `weight` (buckets, C), how much of each ratio the model uses, trained with the rest from zero (so an untrained
    term adds nothing)."""

    ratio: torch.Tensor
    fitted: torch.Tensor

    def __init__(self, vocab_size: int, num_classes: int, buckets: int, ngram_max: int, pad_id: int = 0) -> None:
        super().__init__()
        self.vocab_size, self.ngram_max, self.pad_id = vocab_size, ngram_max, pad_id
        self.register_buffer("ratio", torch.zeros(buckets, num_classes))
        self.register_buffer("fitted", torch.tensor(False))  # True once `fit` has counted (and in its checkpoints)
        self.weight = nn.Parameter(torch.zeros(buckets, num_classes))

    def rows(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """For n = 1 .. ngram_max: the (B, T) row of the n-gram ending at each position and whether it counts
        there (a real position, the n-gram's first in the text)."""
        buckets = self.ratio.shape[0]
        out = []
        for n in range(1, self.ngram_max + 1):
            ids = ngram_ids(tokens, n, self.vocab_size, buckets, self.pad_id)  # (B, T)
            out.append((ids, first_seen(ids, mask)))
        return out

    def by_n(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        """For n = 1 .. ngram_max, (B, T, C): the evidence of the n-gram ending at each position (zero at padding
        and where the n-gram was seen before in the text)."""
        # the rows read, not the whole table: a training step's product and its gradient cost B x T x C, not buckets x C
        return [
            self.ratio[ids] * self.weight[ids] * counts.unsqueeze(-1).to(self.weight.dtype)
            for ids, counts in self.rows(tokens, mask)
        ]

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, C): the term the logits add."""
        return sum(part.sum(dim=1) for part in self.by_n(tokens, mask))  # type: ignore[return-value]

    @torch.no_grad()
    def fit(self, texts: Sequence[Sequence[int] | np.ndarray], labels: Sequence[int], batch_size: int = 256) -> None:
        """Count, in how many training texts of each class each row's n-grams appear, and set `ratio`."""
        buckets, classes = self.ratio.shape
        counts = torch.zeros(classes, buckets, dtype=torch.float64)  # (C, buckets)
        label_of = torch.as_tensor(np.asarray(labels, dtype=np.int64))
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            T = max(len(row) for row in chunk)
            tokens = torch.full((len(chunk), T), self.pad_id, dtype=torch.long)
            for i, row in enumerate(chunk):
                tokens[i, : len(row)] = torch.as_tensor(np.asarray(row, dtype=np.int64))
            mask = tokens != self.pad_id
            cls = label_of[start : start + len(chunk)].unsqueeze(1).expand(-1, T)  # (B, T)
            for ids, seen in self.rows(tokens, mask):
                counts.index_put_((cls[seen], ids[seen]), torch.ones((), dtype=counts.dtype), accumulate=True)
        own, rest = counts + SMOOTHING, counts.sum(dim=0, keepdim=True) - counts + SMOOTHING  # the other classes'
        share, rest_share = own / own.sum(1, keepdim=True), rest / rest.sum(1, keepdim=True)
        self.ratio.copy_((share.log() - rest_share.log()).T.to(self.ratio.dtype))
        self.fitted.fill_(True)

    def extra_repr(self) -> str:
        return f"buckets={self.ratio.shape[0]}, classes={self.ratio.shape[1]}, ngram_max={self.ngram_max}"
