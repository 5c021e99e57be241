"""Which tokens a map of a long text shows: the keys the pooled row reads most, with their neighbours, in text
order and the gaps marked, rather than its first tokens (a review's verdict often comes at its end)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .style import as_numpy

GAP = "\u2026"  # marks a token that follows a gap: the tokens between were left out


def key_window(shares: np.ndarray | torch.Tensor | Sequence[float], max_tokens: int, context: int = 1) -> list[int]:
    """The positions (sorted) a map of at most `max_tokens` tokens shows: all when they fit, else the first
    (`[CLS]`), then the keys of largest `shares`, each with its `context` neighbours while they fit."""
    s = as_numpy(shares).astype(np.float64)
    n = len(s)
    if max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens}: must be >= 1")
    if n <= max_tokens:
        return list(range(n))
    keep = {0}
    for i in np.argsort(-s, kind="stable"):
        if len(keep) >= max_tokens:
            break
        around = [j for j in range(i - context, i + context + 1) if 0 <= j < n and j not in keep]
        keep.update(around if len(keep) + len(around) <= max_tokens else [int(i)])
    return sorted(int(i) for i in keep)


def window_labels(tokens: Sequence[str], keep: Sequence[int]) -> list[str]:
    """The labels of the kept tokens: a token that follows a gap is marked `…token`."""
    return [f"{GAP}{tokens[k]}" if k and (j == 0 or keep[j - 1] != k - 1) else tokens[k] for j, k in enumerate(keep)]


def window_note(shown: int, total: int, what: str = "the pooled row") -> str:
    """What a windowed map shows, for its title; empty when the whole text is shown."""
    if shown >= total:
        return ""
    return f"{shown} of {total} tokens: those {what} reads most and their neighbours ({GAP} marks a gap)"
