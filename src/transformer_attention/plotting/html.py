"""The interactive attention page (docs/attention.md): one HTML file that opens offline, its template, style and ES
modules (page/, package data) and data inlined. Text never becomes markup: tokens travel in the JSON with `<`, `>`,
`&` and `/` escaped and reach the page through `textContent`; the title and caption are HTML-escaped."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..files import atomic_write
from ..tensorboard_plugin.page import fill
from .pack import unpacked
from .page_data import MAX_HTML_TOKENS, MIN_WEIGHT, page_data

__all__ = ["MAX_HTML_TOKENS", "MIN_WEIGHT", "attention_html", "page_data", "read_attention_data", "render_page"]

MODULES = ("state", "dom", "scale", "words", "text", "head", "model", "main")  # page/*.js, joined in this order
IMPORT = re.compile(r'^import \{[^}]*\} from "\./\w+\.js";\n', flags=re.MULTILINE)


def attention_html(tokens: Sequence[str], attentions: Sequence[np.ndarray | torch.Tensor], **kwargs: Any) -> str:
    """The standalone page of one text: the data `page_data(tokens, attentions, **kwargs)` builds, inlined in the
    template with the page's style and script (one file that opens offline)."""
    return render_page(page_data(tokens, attentions, **kwargs))


def render_page(data: Mapping[str, Any]) -> str:
    """The page of `data` (`page_data`'s dict: the page's script reads it from the element #attention-data)."""
    page, style, script = _assets()
    return fill(page, data["title"], data["caption"], data, STYLE=style, SCRIPT=script)  # the tab's rules too


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
