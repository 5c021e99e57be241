"""What the page's JSON holds beyond the weights: the text tab's series and the norm-weighted maps with their own
series, so that the map switch swaps the head, model and text views together."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .plots import attention_window
from .rollout import attention_rollout, pooled_rollout
from .scales import map_shares
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
    """The text tab's data over the whole text: its words (and their pieces) and, per series (each layer's head
    mean, each head, the rollout, each attribution), a value per word, the mean of its pieces' (`word_values`).
    `signed`: whether each method's values are signed (all when not given); `opens_on`: the method shown first."""
    words = join_pieces(tokens)

    def one(name: str, group: str, values: Any, **more: Any) -> dict[str, Any]:
        per_word = [float(f"{v:.4g}") for v in word_values(values, words, combine="mean")]
        return {"id": name, "group": group, **more, "values": per_word}

    series = [
        one(f"layer-{layer}", "mean of heads", pooled_row(w, pooling), label=f"layer {layer}")
        for layer, w in enumerate(attentions)
    ]
    for layer, w in enumerate(attentions):
        for h in range(w.shape[0]):
            label = f"layer {layer}, head {h}"
            series.append(one(f"layer-{layer}-head-{h}", f"layer {layer}", pooled_row(w[h], pooling), label=label))
    if rollout is not None:
        series.append(one("rollout", "all layers", pooled_rollout(rollout, pooling), label="rollout"))
    for m, values in attributions.items():
        is_signed = bool((signed or {}).get(m, True))
        series.append(one(f"method-{m}", "word attributions", values, method=m, signed=is_signed))
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
    """The norm-weighted maps as the page draws them, rows scaled to sum 1: cut like the weights ((H, n, n) each),
    their rollout ((n, n)) and the text tab's series of them (over the whole text)."""
    if len(norms) == 0:
        raise ValueError("norms: one (H, T, T) norm-weighted map per layer, got none")
    shares = map_shares(norms, "norm")  # (H, T, T) each, rows sum to 1
    layers = [attention_window(tokens, m, max_tokens)[1] for m in shares]  # (H, n, n) each
    n = layers[0].shape[-1]
    whole = attention_rollout(shares, residual=residual) if rollout else None  # (T, T)
    tab = text_tab(tokens, shares, pooling=pooling, rollout=whole, attributions=attributions, signed=signed)
    cut = None if whole is None else whole[:n, :n].astype(np.float64)
    return {"layers": layers, "rollout": cut, "series": tab["series"]}
