"""What the page's JSON holds beyond the weights: the text tab's series (each word's share of the pooled row, per
layer, head, the rollout and each attribution) and the norm-weighted maps (weight x norm) with their own series,
so that the map switch swaps the head, model and text views together. NumPy only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .plots import attention_window
from .rollout import attention_rollout, pooled_rollout
from .words import POOLED_ROW, join_pieces, pooled_row, word_values

READS = {"cls": "the classifier reads the output of [CLS]", "mean": "the classifier reads the mean of every output"}
DECIMALS = 5  # weights are inlined rounded to 5 decimals: 5e-6 at most from the model's


def text_tab(
    tokens: Sequence[str],
    attentions: Sequence[np.ndarray | torch.Tensor],
    *,
    pooling: str,
    rollout: np.ndarray | None,
    attributions: Mapping[str, Sequence[float]],
    signed: Mapping[str, bool] | None = None,
    opens_on: str | None = None,
) -> dict:
    """The text tab's data, over the whole text: its words (and each word's pieces), and per series (each layer's
    head mean, each head, the rollout, each attribution method) one value per word: the mean of its pieces' values
    (words.py's `word_values`: a word is not darker for being cut in pieces; the page says so). `signed`: whether
    each method's values point towards the class or against it (all of them when not given); `opens_on`: the
    method the tab opens on (else the last layer's head mean)."""
    words = join_pieces(tokens)

    def per_word(values) -> list[float]:
        return [float(f"{v:.4g}") for v in word_values(values, words, combine="mean")]

    series: list[dict[str, Any]] = [
        {
            "id": f"layer-{layer}",
            "group": "mean of heads",
            "label": f"layer {layer}",
            "values": per_word(pooled_row(w, pooling)),
        }
        for layer, w in enumerate(attentions)
    ]
    for layer, w in enumerate(attentions):
        series += [
            {"id": f"layer-{layer}-head-{h}", "group": f"layer {layer}", "label": f"layer {layer}, head {h}",
             "values": per_word(pooled_row(w[h], pooling))}
            for h in range(w.shape[0])
        ]  # fmt: skip
    if rollout is not None:
        series.append({"id": "rollout", "group": "all layers", "label": "rollout", "values": per_word(
            pooled_rollout(rollout, pooling))})  # fmt: skip
    for m, values in attributions.items():
        series.append({"id": f"method-{m}", "group": "word attributions", "method": m,
                       "signed": bool((signed or {}).get(m, True)), "values": per_word(values)})  # fmt: skip
    return {
        "words": [w.text for w in words],
        "pieces": [[tokens[i] for i in w.tokens] for w in words],
        "first": int(bool(tokens) and tokens[0] == "[CLS]"),  # not a word of the text: its share is stated apart
        "pooling": pooling,
        "pooled": POOLED_ROW[pooling],
        "reads": READS[pooling],
        "series": series,
        "default": f"method-{opens_on}" if opens_on in attributions else f"layer-{len(attentions) - 1}",
    }


def norm_maps(
    tokens: Sequence[str],
    norms: Sequence[np.ndarray | torch.Tensor],
    *,
    max_tokens: int | None,
    rollout: bool,
    residual: float,
    pooling: str,
    attributions: Mapping[str, Sequence[float]],
    signed: Mapping[str, bool] | None = None,
) -> dict:
    """The norm-weighted maps as the page draws them: rows scaled to sum 1, cut like the weights ((H, n, n) arrays),
    their rollout ((n, n)), and the text tab's series of them (over the whole text, as `text_tab`'s of the weights)."""
    if len(norms) == 0:
        raise ValueError("norms: one (H, T, T) norm-weighted map per layer, got none")
    per_layer = [np.asarray(m, dtype=np.float64) for m in norms]  # (H, T, T) each
    shares = [m / np.clip(m.sum(axis=-1, keepdims=True), 1e-12, None) for m in per_layer]  # rows sum to 1
    layers = [attention_window(tokens, m, max_tokens)[1] for m in shares]  # (H, n, n) each
    n = layers[0].shape[-1]
    whole = attention_rollout(shares, residual=residual) if rollout else None  # (T, T)
    return {
        "layers": layers,
        "rollout": None if whole is None else whole[:n, :n].astype(np.float64),
        "series": text_tab(tokens, shares, pooling=pooling, rollout=whole, attributions=attributions, signed=signed)[
            "series"
        ],
    }
