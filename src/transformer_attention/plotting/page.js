/* The attention view's script: plain ES5, no library. No double slash anywhere (comments are block
   comments), so the page holds no URL but the SVG namespace name. Drawn lines carry data-series,
   data-query, data-key and data-weight for tests and tools. */
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
      readout.textContent = "\u201c" + tokens[q] + "\u201d reads (" + all[0].name.replace("-", " ") + "): " +
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
