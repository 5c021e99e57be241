"""What a page shows, as one JSON-able dict (`page_data`): the maps (packed), the text tab's series, the norm-weighted
maps with their own series (the map switch swaps the head, model and text views together), the word attributions
with their scores, and the names and notes the page prints. html.py inlines it in a standalone file; the page's
script (page/state.js) reads it from the element #attention-data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .pack import COMPUTE, norm_data, pack
from .plots import attention_window
from .review import Review, file_stem, plain, review_data
from .rollout import attention_rollout, pooled_rollout
from .scales import DEFAULT_SCALE, SCALES, check_scale, map_shares
from .words import POOLED_ROW, join_pieces, pooled_row, word_values

READS = {"cls": "the classifier reads the output of [CLS]", "mean": "the classifier reads the mean of every output"}
DECIMALS = 5  # weights are inlined rounded to 5 decimals: 5e-6 at most from the model's
MAX_HTML_TOKENS = 512  # the maps of longer texts are cut to their first 512 tokens; the text tab shows them whole
MIN_WEIGHT = 1e-3  # a weight whose colour value (scales.py) is below this draws no line: under 0.01 px


def page_data(
    tokens: Sequence[str],
    attentions: Sequence[np.ndarray | torch.Tensor],
    *,
    title: str | None = None,
    caption: str | None = None,
    rollout: bool = True,
    residual: float = 0.5,
    max_tokens: int | None = MAX_HTML_TOKENS,
    attributions: Mapping[str, Sequence[float]] | None = None,
    faithfulness: Mapping[str, Mapping[str, float | None]] | None = None,
    faithfulness_note: str | None = None,
    words_note: str | None = None,
    target: str | None = None,
    pooling: str = "cls",
    scale: str = DEFAULT_SCALE,
    method_labels: Mapping[str, str] | None = None,
    method_signed: Mapping[str, bool] | None = None,
    method_notes: Mapping[str, str] | None = None,
    text_method: str | None = None,
    norms: Sequence[np.ndarray | torch.Tensor] | None = None,
    agreement: Mapping[str, Mapping[str, Mapping]] | None = None,
    name: str | None = None,
    review: Review | None = None,
) -> dict[str, Any]:
    """The data of one text's page: `tokens` and an (H, T, T) map per layer without padding, cut past `max_tokens`;
    the `attributions` (method -> a value per token, explaining the class `target`) with their `faithfulness` and
    `agreement` and the notes on them; the methods' labels, signs and one-line descriptions (the registry's);
    `text_method`, the method the text and words tabs open on; `norms`, the weight x norm switch; `name`, the saved
    pictures' name; `review`, the text under the heading and its cut."""
    check_scale(scale)
    if pooling not in POOLED_ROW:
        raise ValueError(f"pooling={pooling!r}: expected one of {', '.join(map(repr, POOLED_ROW))}")
    if not attentions:
        raise ValueError("attention_html needs at least one layer's attention, got none")
    layers: list[np.ndarray] = []
    shown = list(tokens)
    for layer, weights in enumerate(attentions):
        shape = tuple(weights.shape)
        if len(shape) != 3:
            raise ValueError(f"layer {layer}: attention of shape {shape}; every layer must be (H, T, T)")
        if layers and shape[0] != layers[0].shape[0]:
            raise ValueError(f"layer {layer} has {shape[0]} heads, layer 0 has {layers[0].shape[0]}")
        shown, w = attention_window(tokens, weights, max_tokens)  # (H, n, n), shapes checked
        layers.append(w.astype(np.float64))
    n = len(shown)
    cut = n < len(tokens)
    title = plain(title or "attention")
    data: dict[str, Any] = {
        "title": title,
        "caption": plain(caption or ""),
        "tokens": shown,
        "layers": pack(np.stack(layers)),  # (L, H, n, n)
        "rollout": None,
        "residual": residual,
        "min_weight": MIN_WEIGHT,
        "note": f"first {n} of {len(tokens)} tokens" if cut else "",
        "names": {
            "scales": SCALES,
            "scale": scale,
            "methods": dict(method_labels or {}),
            "notes": dict(method_notes or {}),
            "file": file_stem(name or title),
        },
        "review": None if review is None else review_data(review, len(tokens)),
    }
    if attributions:
        for method, values in attributions.items():
            if len(values) != len(tokens):
                raise ValueError(f"attributions[{method!r}] has {len(values)} values for {len(tokens)} tokens")
        data["attributions"] = {m: [float(f"{float(v):.4g}") for v in values[:n]] for m, values in attributions.items()}
        data["faithfulness"] = (
            {m: {k: _rounded(v) for k, v in s.items()} for m, s in faithfulness.items()} if faithfulness else None
        )
        data["agreement"] = {
            m: {k: {**a, "mean": _rounded(a["mean"]), "sem": _rounded(a["sem"])} for k, a in keys.items()}
            for m, keys in (agreement or {}).items()
        }
        data["faithfulness_note"] = faithfulness_note or ""
        data["words_note"] = words_note or ""
    rollout = rollout and len(attentions) > 1  # a 1-layer rollout is that layer's mean, mixed with the residual
    full = attention_rollout(attentions, residual=residual) if rollout else None  # (T, T), the whole text
    if full is not None:  # the page computes the rollout of the maps it holds; of a cut text, it is given
        data["rollout"] = pack(full[:n, :n]) if cut else COMPUTE
    tab: dict[str, Any] = {"pooling": pooling, "attributions": attributions or {}, "signed": method_signed}
    data["text"] = {**text_tab(tokens, attentions, rollout=full, opens_on=text_method, **tab), "target": target}
    if norms is not None:  # the text tab's series swap with the maps: each word by weight x norm
        norm = norm_maps(tokens, norms, max_tokens=max_tokens, rollout=rollout, residual=residual, **tab)
        data["kinds"] = {"norm": {"series": norm["series"], **norm_data(layers, norms, norm, cut=cut)}}
    return data


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


def _rounded(v: float | None) -> float | None:
    """A score to DECIMALS places; None for none (NaN: a text of one word has no agreement)."""
    return None if v is None or np.isnan(v) else round(float(v), DECIMALS)
