"""A logged page as the tab shows it: plotting's template and style sheet (package data, found without importing
plotting, which imports torch) filled with a blob's page, its ES modules served as files beside it
(`static/<name>.js`): TensorBoard's Content-Security-Policy runs same-origin scripts (`script-src 'self'`), so the
page holds no inline script to hash and no handler attributes, and loads nothing from elsewhere."""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "static"  # the tab's own script, index.js
SCRIPT = re.compile(r"<script>\s*__SCRIPT__\s*</script>")  # the template's inline script, as html.py inlines it
MODULE = '<script type="module" src="static/main.js"></script>'  # relative to .../page: .../static/main.js
FILE = re.compile(r"[a-z][a-z0-9_-]*\.js")  # every name served: no '/', '\', '%' or '..' reaches the disk


def page_folder() -> Path:
    """plotting/page/: located, not imported (plotting's __init__ imports torch)."""
    spec = find_spec("transformer_attention.plotting")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("transformer_attention.plotting is not installed: reinstall the package")
    return Path(next(iter(spec.submodule_search_locations))) / "page"


def static_file(name: str) -> bytes | None:
    """The script file `name` (the tab's index.js or one of the page's modules), or None for any other name."""
    if not FILE.fullmatch(name):
        return None
    for folder in (HERE, page_folder()):
        if (folder / name).is_file():
            return (folder / name).read_bytes()
    return None


def render(data: dict[str, Any]) -> str:
    """The HTML of the page of `data` (plotting's `page_data`), as html.py's `render_page` writes it."""
    template, style = _template()
    title, caption = (str(data.get(key) or "") for key in ("title", "caption"))
    return fill(template, title or "attention", caption, data, STYLE=style)


def fill(template: str, title: str, caption: str, data: Mapping[str, Any], **parts: str) -> str:
    """The page `template` with its __TITLE__ and __CAPTION__ (HTML-escaped), __DATA__ (JSON safe inside a
    <script> element) and each of `parts` (e.g. STYLE, SCRIPT: as they are) filled, in one pass: plotting's
    standalone pages and the tab's alike. Text never becomes markup."""
    fills = {"TITLE": _text(title), "CAPTION": _text(caption), "DATA": _json(data), **parts}
    return re.sub(rf"__({'|'.join(fills)})__", lambda m: fills[m.group(1)], template)


@functools.lru_cache(maxsize=1)
def _template() -> tuple[str, str]:
    folder = page_folder()
    template = (folder / "page.html").read_text(encoding="utf-8")
    if not SCRIPT.search(template):
        raise FileNotFoundError(f"{folder / 'page.html'}: no <script>__SCRIPT__</script> for the page's modules")
    return SCRIPT.sub(MODULE, template), (folder / "page.css").read_text(encoding="utf-8")


def _text(s: str) -> str:
    """HTML-escaped text, `/` too: no `</...>` and no `//` from user text in the markup."""
    return html.escape(s, quote=True).replace("/", "&#x2F;")


def _json(data: Mapping[str, Any]) -> str:
    """JSON safe inside a <script> element: `<`, `>`, `&`, `/` as escapes that JSON.parse reads back."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("/", "\\/")):
        text = text.replace(ch, esc)
    return text
