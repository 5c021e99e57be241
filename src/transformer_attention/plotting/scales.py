"""Colour scales for attention: what a weight's colour means. A trained model's heads are often diffuse, which the
fixed 0-1 scale draws as near-blank; the other two make them readable, and every colour bar says which is drawn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .style import as_numpy

if TYPE_CHECKING:
    import torch

SCALES = {  # name -> what a colour means, for captions, colour bars and the page (written once)
    "fixed": "colour = weight, 0 to 1",
    "row": "colour = weight / the largest weight of its row",
    "uniform": "colour = w·n / (w·n + 1): an even spread over n keys (w = 1/n) is half",
}
# the default, measured (benchmarks/scales.py, docs/attention.md): on a trained Rotten Tomatoes model's maps the
# cells span 57% of the colour range (fixed: 11%), and every map keeps the order of its weights (row does not)
DEFAULT_SCALE = "uniform"


MAP_KINDS = {  # name -> what a map's cell is, for captions and colour bars
    "weight": "attention weight",
    "norm": "weight x norm (||\u03b1 f(x)||, each row scaled to sum 1)",
}


def check_kind(kind: str) -> str:
    """`kind` if it names a map kind, else a ValueError that lists them."""
    if kind not in MAP_KINDS:
        raise ValueError(f"kind={kind!r}: not a map kind; use weight or norm (weight x norm, rows as shares)")
    return kind


def map_shares(layers: Sequence[np.ndarray | torch.Tensor], kind: str) -> list[np.ndarray]:
    """Each layer's (H, T, T) map as drawn: the weights, or the norm-weighted maps, each row scaled to sum 1."""
    out = [as_numpy(m).astype(np.float32) for m in layers]
    if check_kind(kind) == "norm":
        out = [m / np.clip(m.sum(axis=-1, keepdims=True), 1e-12, None) for m in out]
    return out


def check_scale(scale: str) -> str:
    """`scale` if it names a colour scale, else a ValueError that lists them."""
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}: expected one of {', '.join(SCALES)}")
    return scale


def scale_note(scale: str) -> str:
    """What a colour means on `scale`, for captions and colour bars: `row scale: colour = weight / ...`."""
    return f"{check_scale(scale)} scale: {SCALES[scale]}"


def scaled(weights: np.ndarray | torch.Tensor, scale: str = DEFAULT_SCALE, n: int | None = None) -> np.ndarray:
    """`weights` (..., m) as colour values in [0, 1] by `scale` (`SCALES`: `uniform` draws an even spread at half
    whatever n is). `n`: the keys the rows spread over, by default m (a window of a text passes the text's)."""
    w = np.clip(as_numpy(weights).astype(np.float64), 0.0, None)
    check_scale(scale)
    if scale == "row":
        top = w.max(axis=-1, keepdims=True) if w.size else w
        return np.divide(w, top, out=np.zeros_like(w), where=top > 0)
    if scale == "uniform":
        r = w * (w.shape[-1] if n is None else n)
        return r / (r + 1.0)
    return np.clip(w, 0.0, 1.0)
