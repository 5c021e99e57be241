"""The interactive attention page (docs/attention.md): one HTML file that opens offline, its template, style and ES
modules (page/, package data) and data inlined. Text never becomes markup: tokens travel in the JSON with `<`, `>`,
`&` and `/` escaped and reach the page through `textContent`; the title and caption are HTML-escaped."""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..files import atomic_write
from .pack import COMPUTE, norm_data, pack, unpacked
from .page_data import DECIMALS, norm_maps, text_tab
from .plots import attention_window
from .review import Review, file_stem, plain, review_data
from .rollout import attention_rollout
from .scales import DEFAULT_SCALE, SCALES, check_scale
from .words import POOLED_ROW

MAX_HTML_TOKENS = 512  # the maps of longer texts are cut to their first 512 tokens; the text tab shows them whole
MODULES = ("state", "dom", "scale", "words", "text", "head", "model", "main")  # page/*.js, joined in this order
IMPORT = re.compile(r'^import \{[^}]*\} from "\./\w+\.js";\n', flags=re.MULTILINE)
MIN_WEIGHT = 1e-3  # a weight whose colour value (scales.py) is below this draws no line: under 0.01 px


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
    pooling: str = "cls",
    scale: str = DEFAULT_SCALE,
    method_labels: Mapping[str, str] | None = None,
    method_signed: Mapping[str, bool] | None = None,
    text_method: str | None = None,
    norms: Sequence[np.ndarray | torch.Tensor] | None = None,
    agreement: Mapping[str, Mapping[str, Mapping]] | None = None,
    name: str | None = None,
    review: Review | None = None,
) -> str:
    """The page of one text: `tokens` and an (H, T, T) map per layer without padding, cut past `max_tokens`; the
    `attributions` (method -> a value per token) with their `faithfulness` and `agreement`; `norms`, the weight x
    norm switch; `name`, the saved pictures' name; `review`, the text under the heading and its cut."""
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
    full = attention_rollout(attentions, residual=residual) if rollout else None  # (T, T), the whole text
    if full is not None:  # the page computes the rollout of the maps it holds; of a cut text, it is given
        data["rollout"] = pack(full[:n, :n]) if cut else COMPUTE
    tab: dict[str, Any] = {"pooling": pooling, "attributions": attributions or {}, "signed": method_signed}
    data["text"] = text_tab(tokens, attentions, rollout=full, opens_on=text_method, **tab)
    if norms is not None:  # the text tab's series swap with the maps: each word by weight x norm
        norm = norm_maps(tokens, norms, max_tokens=max_tokens, rollout=rollout, residual=residual, **tab)
        data["kinds"] = {"norm": {"series": norm["series"], **norm_data(layers, norms, norm, cut=cut)}}
    page, style, script = _assets()
    fills = {
        "TITLE": _text(title),
        "CAPTION": _text(plain(caption or "")),
        "DATA": _json(data),
        "STYLE": style,
        "SCRIPT": script,
    }
    return re.sub(r"__(TITLE|CAPTION|DATA|STYLE|SCRIPT)__", lambda m: fills[m.group(1)], page)  # one pass


def save_attention_html(
    path: str | Path,
    tokens: Sequence[str],
    attentions: Sequence[np.ndarray | torch.Tensor],
    **kwargs,
) -> Path:
    """`attention_html(tokens, attentions, **kwargs)` written to `path` (UTF-8, atomically); returns the path."""
    return atomic_write(path, attention_html(tokens, attentions, **kwargs))


def read_attention_data(page: str, *, raw: bool = False) -> dict:
    """The data a page inlines, as its script reads it (`unpacked`: maps as arrays) or as stored (`raw`)."""
    start = page.index('<script type="application/json" id="attention-data">')
    start = page.index(">", start) + 1
    data = json.loads(page[start : page.index("</script>", start)])
    return data if raw else unpacked(data)


def _rounded(v: float | None) -> float | None:
    """A score to DECIMALS places; None for none (NaN: a text of one word has no agreement)."""
    return None if v is None or np.isnan(v) else round(float(v), DECIMALS)


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
    """The page's template, style sheet and script (its ES modules joined in the order of MODULES), read once."""
    folder = resources.files(__package__).joinpath("page")
    parts = []
    for name in MODULES:  # the tests hold each module's imports to one line, of a module joined before it
        source = folder.joinpath(f"{name}.js").read_text(encoding="utf-8")
        body = re.sub(r"^export ", "", IMPORT.sub("", source), flags=re.MULTILINE)
        parts.append(f"/* ---- page/{name}.js ---- */\n{body}")
    script = '(() => {\n"use strict";\n' + "\n".join(parts) + "})();\n"
    page, style = (folder.joinpath(f"page.{kind}").read_text(encoding="utf-8") for kind in ("html", "css"))
    return page, style, script
