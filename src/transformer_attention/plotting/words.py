"""Word pieces joined back into words, and what the classifier's pooled row gives each word: the shared base
of every view that shows a review as text (TensorBoard, predict.py's PNGs, the page's text tab)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from ..model.classifier import pool
from .style import as_numpy

CONTINUATION = "##"  # WordPiece's mark of a piece that continues the word before it (data/tokenizer.py)
COMBINE = ("sum", "mean")  # how word_values makes one value of a word's pieces
POOLED_ROW = {"cls": "the [CLS] row", "mean": "the mean of the rows"}  # what each pooling reads, for captions


class Word(NamedTuple):
    """One word of the text: its letters and the positions of the tokens it was cut into."""

    text: str
    tokens: list[int]


def join_pieces(tokens: Sequence[str]) -> list[Word]:
    """The words of a tokenized text: every `##piece` is joined to the word before it (a leading one stands
    alone, without its mark); special tokens such as `[CLS]` are words of their own."""
    words: list[Word] = []
    for i, token in enumerate(tokens):
        if token.startswith(CONTINUATION) and len(token) > len(CONTINUATION) and words:
            words[-1].tokens.append(i)
            words[-1] = Word(words[-1].text + token[len(CONTINUATION) :], words[-1].tokens)
        else:
            words.append(Word(token.removeprefix(CONTINUATION) or token, [i]))
    return words


def word_values(
    values: np.ndarray | torch.Tensor | Sequence[float], words: Sequence[Word], combine: str = "sum"
) -> np.ndarray:
    """(len(words),) per-word values of (T,) per-token `values`. `combine="sum"`: a word cut into pieces gets the
    weight of all of them, so a row that sums to 1 over tokens still sums to 1 over words (but a word in three
    pieces of a near-even row reads three times as dark). `"mean"`: the mean of its pieces, on the same per-token
    scale as the maps (an even row's 1/n stays 1/n), so no word is dark for being split."""
    if combine not in COMBINE:
        raise ValueError(f"combine={combine!r}: expected one of {', '.join(map(repr, COMBINE))}")
    v = as_numpy(values).astype(np.float64)
    if v.ndim != 1:
        raise ValueError(f"word_values takes one value per token, (T,), got shape {tuple(v.shape)}")
    covered = sum(len(w.tokens) for w in words)
    if covered != v.shape[0]:
        raise ValueError(f"{v.shape[0]} values for words that cover {covered} tokens")
    return np.array([v[w.tokens].mean() if combine == "mean" else v[w.tokens].sum() for w in words])


def pooled_row(weights: np.ndarray | torch.Tensor, pooling: str = "cls") -> np.ndarray:
    """(T,) the row of one attention map that feeds the pooled vector, as the classifier pools (`model.pool`): the
    `[CLS]` row or the mean of the rows. `weights` is (T, T), or (H, T, T) for the mean of the heads; padding cut
    off."""
    w = as_numpy(weights).astype(np.float64)
    a = w.mean(axis=0) if w.ndim == 3 else w  # (T, T)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"pooled_row takes a (T, T) or (H, T, T) map, got shape {tuple(w.shape)}")
    if pooling not in POOLED_ROW:
        raise ValueError(f"pooling={pooling!r}: expected one of {', '.join(map(repr, POOLED_ROW))}")
    return pool(torch.from_numpy(a)[None], None, pooling)[0].numpy()  # (T,)
