"""An interactive attention view in one self-contained HTML file that works offline (no CDN, no server).

The tokens stand in two columns, queries on the left and keys on the right; hovering a left token draws
lines to the tokens it reads, thickness = weight, one colour per head, for the layer picked in a
selector; the head mean and the attention rollout (plotting.attention_rollout) are options of the same
view. Click a token to pin it. The weights are inlined as JSON and the script is inline, so the page
opens from disk in any browser. The URL hash picks the initial view: `page.html#layer=1&heads=0,2&token=4`
(`layer=rollout`, `mean=1` for the head mean).

Everything that comes from the text is escaped: tokens travel in the JSON with `<`, `>`, `&` and `/`
written as `\\u003c`... (so no token can close the script tag), and they reach the page through
`textContent`, never as markup; the title and caption are HTML-escaped, `/` included.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from .plotting import attention_rollout, attention_window, cut_note

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
) -> str:
    """The page for one text: `tokens` (T strings) and `attentions`, one (H, T, T) map per layer with
    padding cut off (what `predict(..., need_weights=True)` gives). `rollout` adds the attention rollout
    over all layers (with `residual`, computed on the whole text before any cut) as a choice of the layer
    selector. Texts longer than `max_tokens` are cut to their first `max_tokens` tokens; the page says so."""
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
    if rollout:
        full = attention_rollout(attentions, residual=residual)[:n, :n]  # (n, n), over the whole text
        data["rollout"] = np.round(full.astype(np.float64), DECIMALS).tolist()
    title = title or "attention"
    values = {"TITLE": _text(title), "CAPTION": _text(caption or ""), "DATA": _json(data), "SCRIPT": _SCRIPT}
    return re.sub(r"__(TITLE|CAPTION|DATA|SCRIPT)__", lambda m: values[m.group(1)], _PAGE)  # one pass


def save_attention_html(
    path: str | Path,
    tokens: Sequence[str],
    attentions: Sequence[np.ndarray | torch.Tensor],
    **kwargs,
) -> Path:
    """`attention_html(tokens, attentions, **kwargs)` written to `path` (UTF-8); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(attention_html(tokens, attentions, **kwargs), encoding="utf-8")
    return path


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


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 16px 24px; color: #222; background: #fff; }
h1 { font-size: 17px; margin: 0 0 4px; font-weight: 600; }
.caption { margin: 0 0 10px; color: #555; }
#controls { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center; margin-bottom: 6px; }
#controls label { white-space: nowrap; cursor: pointer; }
#controls label.off { color: #aaa; cursor: default; }
.swatch { display: inline-block; width: 11px; height: 11px; margin: 0 3px 0 2px; vertical-align: -1px;
  border-radius: 2px; }
#help { color: #666; margin: 4px 0 8px; font-size: 12.5px; }
#readout { font-size: 12.5px; min-height: 1.4em; margin-bottom: 6px; color: #333; }
svg text { font: 13px ui-monospace, Menlo, Consolas, monospace; dominant-baseline: central; }
g.token { cursor: pointer; }
g.token rect.hit { fill: #000; fill-opacity: 0; }
g.token.query rect.hit { fill: #ffd54f; fill-opacity: 0.8; }
g.token.pinned text { font-weight: bold; }
line.attn { stroke-linecap: round; stroke-opacity: 0.65; pointer-events: none; }
</style>
</head>
<body>
<h1>__TITLE__</h1>
<p class="caption">__CAPTION__</p>
<div id="controls"><label>view <select id="layer"></select></label><span id="heads"></span></div>
<p id="help">Hover a token on the left (the query): lines go to the tokens it reads on the right (the keys),
thickness = attention weight. Click a token to pin it. Rollout: the share of each input token in a
position's output through all layers (head means mixed with the residual path).</p>
<div id="readout"></div>
<svg id="view" width="10" height="10"></svg>
<script type="application/json" id="attention-data">__DATA__</script>
<script>__SCRIPT__</script>
</body>
</html>
"""

# Plain ES5, no library. No `//` anywhere (comments are /* */), so the page holds no URL but the SVG
# namespace name. Drawn lines carry data-series, data-query, data-key and data-weight for tests and tools.
_SCRIPT = """
(function () {
  "use strict";
  var SVG_NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("attention-data").textContent);
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf"];
  var DARK = "#333333", ROW = 22, MAX_WIDTH = 9, GAP = 300, PAD = 12;
  var tokens = data.tokens, T = tokens.length, L = data.layers.length, H = data.layers[0].length;
  var state = { layer: "0", heads: [], mean: false, hover: null, pinned: 0 };
  var i;
  for (i = 0; i < H; i++) { state.heads.push(true); }

  var svg = document.getElementById("view");
  var select = document.getElementById("layer");
  var headBox = document.getElementById("heads");
  var readout = document.getElementById("readout");
  var lineLayer, left = [], right = [], xLeft, xRight;

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG_NS, name), k;
    for (k in attrs) { if (attrs.hasOwnProperty(k)) { node.setAttribute(k, attrs[k]); } }
    if (parent) { parent.appendChild(node); }
    return node;
  }
  function colorOf(h) { return COLORS[h % COLORS.length]; }
  function y(t) { return PAD + t * ROW + ROW / 2; }

  function buildControls() {
    var l, h, opt, label, box;
    for (l = 0; l < L; l++) {
      opt = document.createElement("option");
      opt.value = String(l);
      opt.textContent = "layer " + l;
      select.appendChild(opt);
    }
    if (data.rollout) {
      opt = document.createElement("option");
      opt.value = "rollout";
      opt.textContent = "rollout (all layers)";
      select.appendChild(opt);
    }
    select.addEventListener("change", function () { state.layer = select.value; draw(); });
    function toggle(text, color, id, onChange) {
      label = document.createElement("label");
      label.id = "label-" + id;
      box = document.createElement("input");
      box.type = "checkbox";
      box.id = id;
      box.addEventListener("change", onChange);
      var sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.background = color;
      label.appendChild(box);
      label.appendChild(sw);
      label.appendChild(document.createTextNode(text));
      headBox.appendChild(label);
      headBox.appendChild(document.createTextNode(" "));
    }
    for (h = 0; h < H; h++) {
      toggle("head " + h, colorOf(h), "head-" + h, (function (hh) {
        return function (ev) { state.heads[hh] = ev.target.checked; draw(); };
      })(h));
    }
    toggle("mean of heads", DARK, "head-mean", function (ev) { state.mean = ev.target.checked; draw(); });
  }

  function buildTokens() {
    var t, g, text, width = 0, widths = [];
    var probe = el("text", { x: 0, y: -100 }, svg);
    for (t = 0; t < T; t++) {
      probe.textContent = tokens[t];
      widths.push(probe.getComputedTextLength());
      width = Math.max(width, widths[t]);
    }
    svg.removeChild(probe);
    xLeft = PAD + width;
    xRight = xLeft + GAP;
    lineLayer = el("g", { id: "lines" }, svg);
    function column(side, list) {
      for (t = 0; t < T; t++) {
        g = el("g", { "class": "token " + side, "data-index": t }, svg);
        var x = side === "left" ? xLeft - widths[t] : xRight;
        el("rect", { "class": "hit", x: x - 4, y: y(t) - ROW / 2 + 1, width: widths[t] + 8, height: ROW - 2,
          rx: 3 }, g);
        text = el("text", { x: side === "left" ? xLeft : xRight, y: y(t),
          "text-anchor": side === "left" ? "end" : "start" }, g);
        text.textContent = tokens[t];
        list.push(g);
      }
    }
    column("left", left);
    column("right", right);
    left.forEach(function (node, t) {
      node.addEventListener("mouseenter", function () { state.hover = t; draw(); });
      node.addEventListener("mouseleave", function () { state.hover = null; draw(); });
      node.addEventListener("click", function () { state.pinned = t; draw(); });
    });
    svg.setAttribute("width", xRight + width + 2 * PAD);
    svg.setAttribute("height", 2 * PAD + T * ROW);
  }

  function series() {
    var out = [], h, q, k, mean, layer;
    if (state.layer === "rollout") {
      return [{ name: "rollout", color: DARK, rows: data.rollout }];
    }
    layer = data.layers[Number(state.layer)];
    for (h = 0; h < H; h++) {
      if (state.heads[h]) { out.push({ name: "head-" + h, color: colorOf(h), rows: layer[h] }); }
    }
    if (state.mean) {
      mean = [];
      for (q = 0; q < T; q++) {
        mean.push([]);
        for (k = 0; k < T; k++) {
          var s = 0;
          for (h = 0; h < H; h++) { s += layer[h][q][k]; }
          mean[q].push(s / H);
        }
      }
      out.push({ name: "mean", color: DARK, rows: mean });
    }
    return out;
  }

  function draw() {
    var q = state.hover !== null ? state.hover : state.pinned;
    var all = series(), best = [], k, s, w, line, shade = [];
    while (lineLayer.firstChild) { lineLayer.removeChild(lineLayer.firstChild); }
    for (k = 0; k < T; k++) { shade.push(0); }
    for (s = 0; s < all.length; s++) {
      for (k = 0; k < T; k++) {
        w = all[s].rows[q][k];
        shade[k] = Math.max(shade[k], w);
        if (w < data.min_weight) { continue; }
        line = el("line", { "class": "attn", x1: xLeft + 6, y1: y(q), x2: xRight - 6, y2: y(k),
          stroke: all[s].color, "stroke-width": w * MAX_WIDTH }, lineLayer);
        line.setAttribute("data-series", all[s].name);
        line.setAttribute("data-query", q);
        line.setAttribute("data-key", k);
        line.setAttribute("data-weight", String(w));
      }
    }
    left.forEach(function (g, t) {
      g.setAttribute("class", "token left" + (t === q ? " query" : "") + (t === state.pinned ? " pinned" : ""));
    });
    right.forEach(function (g, t) {
      g.querySelector("rect").setAttribute("style", "fill: #1f77b4; fill-opacity: " + (0.35 * shade[t]).toFixed(3));
    });
    var rollout = state.layer === "rollout";
    for (k = 0; k < H; k++) { document.getElementById("head-" + k).checked = state.heads[k]; }
    document.getElementById("head-mean").checked = state.mean;
    Array.prototype.forEach.call(headBox.querySelectorAll("input"), function (box) {
      box.disabled = rollout;
      box.parentNode.className = rollout ? "off" : "";
    });
    select.value = state.layer;
    if (all.length) {
      for (k = 0; k < T; k++) { best.push([all[0].rows[q][k], k]); }
      best.sort(function (a, b) { return b[0] - a[0]; });
      readout.textContent = "\\u201c" + tokens[q] + "\\u201d reads (" + all[0].name.replace("-", " ") + "): " +
        best.slice(0, 5).map(function (p) { return tokens[p[1]] + " " + p[0].toFixed(2); }).join(", ");
    } else {
      readout.textContent = "no head selected";
    }
    if (data.note) { readout.textContent += "  [" + data.note + "]"; }
  }

  function fromHash() {
    var parts = window.location.hash.replace(/^#/, "").split("&"), p, kv, h, t;
    for (p = 0; p < parts.length; p++) {
      kv = parts[p].split("=");
      if (kv[0] === "layer" && (kv[1] === "rollout" ? data.rollout : Number(kv[1]) < L)) { state.layer = kv[1]; }
      if (kv[0] === "mean") { state.mean = kv[1] === "1"; }
      if (kv[0] === "token") { t = Number(kv[1]); if (t >= 0 && t < T) { state.pinned = t; } }
      if (kv[0] === "heads") {
        for (h = 0; h < H; h++) { state.heads[h] = false; }
        kv[1].split(",").forEach(function (v) { if (v !== "" && Number(v) < H) { state.heads[Number(v)] = true; } });
      }
    }
  }

  buildControls();
  buildTokens();
  fromHash();
  window.addEventListener("hashchange", function () { fromHash(); draw(); });
  draw();
})();
"""
