"""The rows of an example's text view: first its words as an explanation method scores them (`text_method`), then
the pooled row's attention, a paragraph per layer, its most focused heads and the rollout (plotting/text.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
import torch
from torch import nn

from ..analysis.attributions import attribute
from ..analysis.methods import methods
from ..analysis.settings import known_methods
from ..model.classifier import TransformerClassifier
from ..plotting.text import paragraphs


def check_text_method(method: str | None) -> str | None:
    """`method` when it names an explanation method (or is None: no such paragraph); else a ValueError."""
    if method is not None and method not in known_methods():
        raise ValueError(
            f"text_method={method!r} is not an explanation method: use one of {', '.join(known_methods())} "
            "(null: attention paragraphs only)"
        )
    return method


def text_rows(
    module: nn.Module,
    ids: Sequence[int] | np.ndarray,
    layers: Sequence[np.ndarray | torch.Tensor],
    *,
    pooling: str,
    heads: int,
    shares: np.ndarray,
    method: str | None,
    predicted: int,
    class_name: str,
) -> tuple[np.ndarray, list[str], int]:
    """The text view's rows (P, T) and labels, and how many of the first rows are scored, not weights (0 or 1)."""
    pooled, labels = paragraphs(layers, pooling, heads, shares)  # (P, T): a row a paragraph
    if len(layers) == 1:  # a 1-layer rollout reads what layer 0 does: the review once, not twice
        pooled, labels = pooled[:-1], labels[:-1]
    if method is None:
        return pooled, labels, 0
    chosen = methods()[method]
    net = cast(TransformerClassifier, getattr(module, "net", module))
    (found,), _ = attribute(net, [list(ids)], [predicted], mask_id=None, methods=[method])
    label = f"{chosen.label}: blue for {class_name}, orange against" if chosen.signed else f"{chosen.label}, by size"
    return np.vstack([found[method][None, :], pooled]), [label, *labels], 1
