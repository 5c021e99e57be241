"""An interactive attention view in one self-contained HTML file that works offline (no CDN, no server).

Head view: the tokens stand in two columns, queries on the left and keys on the right. Hovering a query draws
what it reads, hovering a key who reads it, for the layer picked in a selector and the heads switched on:
each head has its own column of blocks beside the tokens (opacity = weight) so that no head covers another,
and its own colour of line (thickness = weight, opaque, so no blended colour outside the legend); the readout
lists the top five of each head. The head mean and the attention rollout (rollout.py) are options of the same
view. Click a token to pin it. Model view: every layer x head as a small query x key map on one 0-1 colour
scale; clicking a map opens that layer and head alone in the head view. The page is package data (page.html,
page.css, page.js beside this module); each page inlines them and the weights (as JSON), so it opens from disk
in any browser. Word attributions view (when given them): the text, each word coloured by the attribution of
the method picked (attention, rollout, Integrated Gradients, leave-one-out: analysis/), and each method's
faithfulness on the text. The URL hash picks the initial view: `page.html#layer=1&heads=0,2&token=4`
(`layer=rollout`, `mean=1` for the head mean, `key=3` to pin a key, `view=model`, `view=words&method=rollout`).

Everything that comes from the text is escaped: tokens travel in the JSON with `<`, `>`, `&` and `/`
written as `\\u003c`... (so no token can close the script tag), and they reach the page through
`textContent`, never as markup; the title and caption are HTML-escaped, `/` included.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from ..files import atomic_write
from .plots import attention_window, cut_note
from .rollout import attention_rollout

MAX_HTML_TOKENS = 128  # longer texts are cut to their first MAX_HTML_TOKENS tokens (rows and columns)
MIN_WEIGHT = 1e-3  # weights below this draw no line (thinner than a hundredth of a pixel)
DECIMALS = 5  # weights are inlined rounded to 5 decimals: 5e-6 at most from the model's


def attention_html(
    tokens: Sequence[str],
    attentions: Sequence[np.ndarray | torch.Tensor],
    *,
    title: str | None = None,
    caption: str | None = None,
    rollout: bool = True,
    residual: float = 0.5,
    max_tokens: int | None = MAX_HTML_TOKENS,
    attributions: Mapping[str, Sequence[float]] | None = None,
    faithfulness: Mapping[str, Mapping[str, float]] | None = None,
    faithfulness_note: str | None = None,
) -> str:
    """The page for one text: `tokens` (T strings) and `attentions`, one (H, T, T) map per layer with
    padding cut off (what `predict(..., need_weights=True)` gives). `rollout` adds the attention rollout
    over all layers (with `residual`, computed on the whole text before any cut) as a choice of the layer
    selector. Texts longer than `max_tokens` are cut to their first `max_tokens` tokens; the page says so.
    `attributions` (method -> one value per token) add the word attributions view, with each method's
    `faithfulness` on this text (method -> comprehensiveness, sufficiency, aopc) under it and the note."""
    if not attentions:
        raise ValueError("attention_html needs at least one layer's attention, got none")
    layers, shown = [], list(tokens)
    for layer, weights in enumerate(attentions):
        shape = tuple(weights.shape)
        if len(shape) != 3:
            raise ValueError(f"layer {layer}: attention of shape {shape}; every layer must be (H, T, T)")
        if layers and shape[0] != layers[0].shape[0]:
            raise ValueError(f"layer {layer} has {shape[0]} heads, layer 0 has {layers[0].shape[0]}")
        shown, w = attention_window(tokens, weights, max_tokens)  # (H, n, n), shapes checked
        layers.append(w)
    n = len(shown)
    data = {
        "tokens": shown,
        "layers": [np.round(w.astype(np.float64), DECIMALS).tolist() for w in layers],  # (L, H, n, n)
        "rollout": None,
        "residual": residual,
        "min_weight": MIN_WEIGHT,
        "note": cut_note(n, len(tokens)),
    }
    if attributions:
        for method, values in attributions.items():
            if len(values) != len(tokens):
                raise ValueError(f"attributions[{method!r}] has {len(values)} values for {len(tokens)} tokens")
        data["attributions"] = {m: [float(f"{float(v):.4g}") for v in values[:n]] for m, values in attributions.items()}
        data["faithfulness"] = (
            {m: {k: round(float(v), DECIMALS) for k, v in s.items()} for m, s in faithfulness.items()}
            if faithfulness
            else None
        )
        data["faithfulness_note"] = faithfulness_note or ""
    if rollout:
        full = attention_rollout(attentions, residual=residual)[:n, :n]  # (n, n), over the whole text
        data["rollout"] = np.round(full.astype(np.float64), DECIMALS).tolist()
    title = title or "attention"
    page, style, script = _assets()
    values = {
        "TITLE": _text(title),
        "CAPTION": _text(caption or ""),
        "DATA": _json(data),
        "STYLE": style,
        "SCRIPT": script,
    }
    return re.sub(r"__(TITLE|CAPTION|DATA|STYLE|SCRIPT)__", lambda m: values[m.group(1)], page)  # one pass


def save_attention_html(
    path: str | Path,
    tokens: Sequence[str],
    attentions: Sequence[np.ndarray | torch.Tensor],
    **kwargs,
) -> Path:
    """`attention_html(tokens, attentions, **kwargs)` written to `path` (UTF-8, atomically); returns the path."""
    return atomic_write(path, attention_html(tokens, attentions, **kwargs))


def read_attention_data(page: str) -> dict:
    """The data a page inlines, parsed back (tokens, layers (L, H, T, T), rollout): for tests and tools."""
    start = page.index('<script type="application/json" id="attention-data">')
    start = page.index(">", start) + 1
    return json.loads(page[start : page.index("</script>", start)])


def _text(s: str) -> str:
    """HTML-escaped text, `/` too: no `</...>` and no `//` from user text in the markup."""
    return html.escape(s, quote=True).replace("/", "&#x2F;")


def _json(data: dict) -> str:
    """JSON that is safe inside a <script> element: `<`, `>`, `&`, `/` as escapes JSON.parse reads back."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("/", "\\/")):
        text = text.replace(ch, esc)
    return text


@functools.lru_cache(maxsize=1)
def _assets() -> tuple[str, str, str]:
    """The page's template, style sheet and script: package data beside this module (page.html, page.css,
    page.js), read once, inlined into every page so that it opens offline."""
    folder = resources.files(__package__)
    return tuple(folder.joinpath(f"page.{kind}").read_text(encoding="utf-8") for kind in ("html", "css", "js"))
