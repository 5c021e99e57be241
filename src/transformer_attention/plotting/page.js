/* The attention view's script: plain ES5, no library. No double slash anywhere (comments are block
   comments), so the page holds no URL but the SVG namespace name. Every drawn mark (line, block, model
   cell) carries data-* attributes (data-series, data-query, data-key, data-weight, data-layer, data-head)
   for tests and tools.

   Head view: each series (a head, the head mean, or the rollout) owns a fixed column of blocks beside
   each token, fill opacity = weight, so heads never cover one another; lines are opaque (no colour that
   is not in the legend) and drawn thickest first, so a thin line always lies on top of a thick one.
   Model view: one small query x key heat map per layer and head, on one 0 to 1 colour scale.
   Word attributions (when the page carries them): the text, each word coloured by the picked method's
   attribution (data-method, data-value), and each method's faithfulness on this text in a table. */
(function () {
  "use strict";
  var SVG_NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("attention-data").textContent);
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf"];
  var RAMP = [[0, [255, 255, 255]], [0.5, [107, 174, 214]], [1, [8, 48, 107]]];
  var DARK = "#333333", ROW = 24, MAX_WIDTH = 6, GAP = 260, PAD = 12, TOP = 18, BOX = 13, TOP_K = 5;
  var tokens = data.tokens, T = tokens.length, L = data.layers.length, H = data.layers[0].length;
  var SLOTS = H + 1;  /* one block column per head, and one for the mean */
  var MAP_PX = Math.max(1, Math.floor(120 / T));  /* pixels per token in a model view cell */
  var state = { view: "head", layer: "0", heads: [], mean: false, hover: null, pin: { side: "query", index: 0 },
    method: null };
  var METHOD_NAMES = { attention: "attention (last layer)", rollout: "rollout", integrated_gradients:
    "Integrated Gradients", grad_x_input: "gradient x input", leave_one_out: "leave-one-out", random: "random" };
  var FOR = [31, 119, 180], AGAINST = [255, 127, 14];  /* blue: towards the predicted class, orange: against */
  var methods = data.attributions ? Object.keys(data.attributions) : [];
  var wordSpans = [];
  var i;
  for (i = 0; i < H; i++) { state.heads.push(true); }

  var svg = document.getElementById("view");
  var select = document.getElementById("layer");
  var headBox = document.getElementById("heads");
  var readout = document.getElementById("readout");
  var lineLayer, blockLayer, left = [], right = [], labels = [], xLeft, xRight, xBlocks = {}, xLine = {};

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG_NS, name), k;
    for (k in attrs) { if (attrs.hasOwnProperty(k)) { node.setAttribute(k, attrs[k]); } }
    if (parent) { parent.appendChild(node); }
    return node;
  }
  function html(name, className, text, parent) {
    var node = document.createElement(name);
    if (className) { node.className = className; }
    if (text) { node.textContent = text; }
    if (parent) { parent.appendChild(node); }
    return node;
  }
  function colorOf(h) { return COLORS[h % COLORS.length]; }
  function y(t) { return PAD + TOP + t * ROW + ROW / 2; }
  function swatch(color, parent) { html("span", "swatch", "", parent).style.background = color; }
  function ramp(w) {
    var j, a, b, f;
    w = Math.min(1, Math.max(0, w));
    for (j = 1; j < RAMP.length && RAMP[j][0] < w; j++) { continue; }
    a = RAMP[j - 1];
    b = RAMP[Math.min(j, RAMP.length - 1)];
    f = b[0] > a[0] ? (w - a[0]) / (b[0] - a[0]) : 0;
    return [0, 1, 2].map(function (c) { return Math.round(a[1][c] + f * (b[1][c] - a[1][c])); });
  }

  function buildControls() {
    var l, h, opt;
    for (l = 0; l < L; l++) {
      opt = html("option", "", "layer " + l, select);
      opt.value = String(l);
    }
    if (data.rollout) {
      opt = html("option", "", "rollout (all layers)", select);
      opt.value = "rollout";
    }
    select.addEventListener("change", function () { state.layer = select.value; draw(); });
    function toggle(text, color, id, onChange) {
      var label = html("label", "", "", headBox), box = html("input", "", "", label);
      label.id = "label-" + id;
      box.type = "checkbox";
      box.id = id;
      box.addEventListener("change", onChange);
      swatch(color, label);
      label.appendChild(document.createTextNode(text));
      headBox.appendChild(document.createTextNode(" "));
    }
    for (h = 0; h < H; h++) {
      toggle("head " + h, colorOf(h), "head-" + h, (function (hh) {
        return function (ev) { state.heads[hh] = ev.target.checked; draw(); };
      })(h));
    }
    toggle("mean of heads", DARK, "head-mean", function (ev) { state.mean = ev.target.checked; draw(); });
    document.getElementById("mode-head").addEventListener("click", function () { state.view = "head"; draw(); });
    document.getElementById("mode-model").addEventListener("click", function () { state.view = "model"; draw(); });
  }

  function buildTokens() {
    var t, s, width = 0, widths = [], side;
    var probe = el("text", { x: 0, y: -100 }, svg);
    for (t = 0; t < T; t++) {
      probe.textContent = tokens[t];
      widths.push(probe.getComputedTextLength());
      width = Math.max(width, widths[t]);
    }
    svg.removeChild(probe);
    xLeft = PAD + width;
    xBlocks.query = xLeft + 8;
    xLine.query = xBlocks.query + SLOTS * BOX + 5;
    xLine.key = xLine.query + GAP;
    xBlocks.key = xLine.key + 5;
    xRight = xBlocks.key + SLOTS * BOX + 8;
    lineLayer = el("g", { id: "lines" }, svg);
    blockLayer = el("g", { id: "blocks" }, svg);
    for (side in xBlocks) {
      if (!xBlocks.hasOwnProperty(side)) { continue; }
      for (s = 0; s < SLOTS; s++) {
        labels.push(el("text", { "class": "slot", x: xBlocks[side] + s * BOX + (BOX - 1) / 2, y: PAD + TOP / 2,
          "text-anchor": "middle", "data-slot": s, "data-side": side }, svg));
      }
    }
    function column(kind, list) {
      for (t = 0; t < T; t++) {
        var g = el("g", { "class": "token " + kind, "data-index": t }, svg);
        var x = kind === "left" ? xLeft - widths[t] : xRight;
        el("rect", { "class": "hit", x: x - 4, y: y(t) - ROW / 2 + 1, width: widths[t] + 8, height: ROW - 2,
          rx: 3 }, g);
        el("text", { x: kind === "left" ? xLeft : xRight, y: y(t), "text-anchor": kind === "left" ? "end" : "start" },
          g).textContent = tokens[t];
        list.push(g);
      }
    }
    column("left", left);
    column("right", right);
    function listen(list, side) {
      list.forEach(function (node, t) {
        node.addEventListener("mouseenter", function () { state.hover = { side: side, index: t }; draw(); });
        node.addEventListener("mouseleave", function () { state.hover = null; draw(); });
        node.addEventListener("click", function () { state.pin = { side: side, index: t }; draw(); });
      });
    }
    listen(left, "query");
    listen(right, "key");
    svg.setAttribute("width", xRight + width + 2 * PAD);
    svg.setAttribute("height", 2 * PAD + TOP + T * ROW);
  }

  function buildModel() {
    var grid = document.getElementById("grid"), hint = document.getElementById("model-readout"), l, h, rows = [];
    grid.style.gridTemplateColumns = "auto repeat(" + H + ", auto)";
    html("div", "corner", "", grid);
    for (h = 0; h < H; h++) {
      var head = html("div", "colhead", "", grid);
      swatch(colorOf(h), head);
      head.appendChild(document.createTextNode("head " + h));
    }
    for (l = 0; l < L; l++) { rows.push({ name: "layer " + l, layer: String(l), maps: data.layers[l] }); }
    if (data.rollout) { rows.push({ name: "rollout", layer: "rollout", maps: [data.rollout] }); }
    rows.forEach(function (row) {
      html("div", "rowhead", row.name, grid);
      row.maps.forEach(function (map, hh) {
        var canvas = html("canvas", "map", "", grid), ctx, q, k, c;
        canvas.width = canvas.height = MAP_PX * T;
        canvas.setAttribute("data-layer", row.layer);
        canvas.setAttribute("data-head", row.layer === "rollout" ? "rollout" : String(hh));
        canvas.title = row.name + (row.layer === "rollout" ? "" : ", head " + hh) + ": click to open it";
        ctx = canvas.getContext("2d");
        for (q = 0; q < T; q++) {
          for (k = 0; k < T; k++) {
            c = ramp(map[q][k]);
            ctx.fillStyle = "rgb(" + c.join(",") + ")";
            ctx.fillRect(k * MAP_PX, q * MAP_PX, MAP_PX, MAP_PX);
          }
        }
        canvas.addEventListener("click", function () { openCell(row.layer, hh); });
        canvas.addEventListener("mousemove", function (ev) {
          var r = canvas.getBoundingClientRect(), n = r.width / T;
          var qq = Math.min(T - 1, Math.floor((ev.clientY - r.top) / n));
          var kk = Math.min(T - 1, Math.floor((ev.clientX - r.left) / n));
          hint.textContent = row.name + (row.layer === "rollout" ? "" : ", head " + hh) + ": \u201c" + tokens[qq] +
            "\u201d reads \u201c" + tokens[kk] + "\u201d " + map[qq][kk].toFixed(2);
        });
      });
      for (h = row.maps.length; h < H; h++) { html("div", "", "", grid); }
    });
    document.getElementById("scale-bar").style.background = "linear-gradient(to right, " +
      RAMP.map(function (stop) { return "rgb(" + stop[1].join(",") + ") " + 100 * stop[0] + "%"; }).join(", ") + ")";
  }

  function methodName(m) { return METHOD_NAMES.hasOwnProperty(m) ? METHOD_NAMES[m] : m; }

  function buildWords() {
    var box = document.getElementById("methods"), words = document.getElementById("words"), t, row, table;
    var hint = document.getElementById("word-readout"), measures = ["comprehensiveness", "sufficiency", "aopc"];
    if (!methods.length) { return; }
    state.method = methods.indexOf("integrated_gradients") >= 0 ? "integrated_gradients" : methods[0];
    document.getElementById("mode-words").hidden = false;
    document.getElementById("mode-words").addEventListener("click", function () { state.view = "words"; draw(); });
    methods.forEach(function (m) {
      var label = html("label", "", "", box), radio = html("input", "", "", label);
      radio.type = "radio";
      radio.name = "method";
      radio.id = "method-" + m;
      radio.addEventListener("change", function () { state.method = m; draw(); });
      label.appendChild(document.createTextNode(" " + methodName(m)));
    });
    for (t = 0; t < T; t++) {
      var span = html("span", "word", tokens[t], words);
      span.setAttribute("data-index", String(t));
      span.addEventListener("mouseenter", (function (tt) {
        return function () {
          var v = data.attributions[state.method][tt];
          hint.textContent = tt === 0 ? "\u201c" + tokens[tt] + "\u201d is kept in every test: not ranked" :
            methodName(state.method) + ": \u201c" + tokens[tt] + "\u201d " + v.toPrecision(3);
        };
      })(t));
      wordSpans.push(span);
    }
    if (!data.faithfulness) { return; }
    table = document.getElementById("faithfulness");
    row = html("tr", "", "", table);
    ["method", "comprehensiveness", "sufficiency", "AOPC"].forEach(function (name) { html("th", "", name, row); });
    methods.forEach(function (m) {
      var scores = data.faithfulness[m];
      if (!scores) { return; }
      row = html("tr", "", "", table);
      row.setAttribute("data-method", m);
      html("td", "", methodName(m), row);
      measures.forEach(function (key) { html("td", "", scores[key].toFixed(3), row); });
    });
    if (data.faithfulness_note) { html("caption", "", data.faithfulness_note, table); }
  }

  function drawWords() {
    var values = data.attributions[state.method], top = 0, t;
    for (t = 1; t < T; t++) { top = Math.max(top, Math.abs(values[t])); }
    wordSpans.forEach(function (span, tt) {
      var v = values[tt], a = tt === 0 || top === 0 ? 0 : Math.abs(v) / top, c = v >= 0 ? FOR : AGAINST;
      span.style.background = "rgba(" + c.join(",") + "," + a.toFixed(3) + ")";
      span.style.color = a > 0.55 ? "#fff" : "#222";
      span.setAttribute("data-method", state.method);
      span.setAttribute("data-value", String(v));
    });
    methods.forEach(function (m) { document.getElementById("method-" + m).checked = m === state.method; });
    Array.prototype.forEach.call(document.querySelectorAll("#faithfulness tr[data-method]"), function (row) {
      row.className = row.getAttribute("data-method") === state.method ? "current" : "";
    });
  }

  function openCell(layer, head) {
    var h;
    state.layer = layer;
    if (layer !== "rollout") {
      for (h = 0; h < H; h++) { state.heads[h] = h === head; }
      state.mean = false;
    }
    state.view = "head";
    draw();
  }

  function meanOf(layer) {
    var rows = [], q, k, h, s;
    for (q = 0; q < T; q++) {
      rows.push([]);
      for (k = 0; k < T; k++) {
        for (s = 0, h = 0; h < H; h++) { s += layer[h][q][k]; }
        rows[q].push(s / H);
      }
    }
    return rows;
  }

  function series() {
    var out = [], h, layer;
    if (state.layer === "rollout") {
      return [{ name: "rollout", label: "rollout", color: DARK, slot: 0, rows: data.rollout }];
    }
    layer = data.layers[Number(state.layer)];
    for (h = 0; h < H; h++) {
      if (state.heads[h]) {
        out.push({ name: "head-" + h, label: "head " + h, color: colorOf(h), slot: h, rows: layer[h] });
      }
    }
    if (state.mean) { out.push({ name: "mean", label: "mean", color: DARK, slot: H, rows: meanOf(layer) }); }
    return out;
  }

  function weight(one, side, t, other) {
    return side === "query" ? one.rows[t][other] : one.rows[other][t];
  }

  function drawReadout(all, focus) {
    var title, line, j;
    while (readout.firstChild) { readout.removeChild(readout.firstChild); }
    title = focus.side === "query" ? "\u201c" + tokens[focus.index] + "\u201d (query) reads most:" :
      "\u201c" + tokens[focus.index] + "\u201d (key) is read most by:";
    html("div", "readtitle", all.length ? title : "no head selected", readout);
    all.forEach(function (one) {
      var best = [];
      for (j = 0; j < T; j++) { best.push([weight(one, focus.side, focus.index, j), j]); }
      best.sort(function (a, b) { return b[0] - a[0] || a[1] - b[1]; });
      line = html("div", "readline", "", readout);
      line.setAttribute("data-series", one.name);
      swatch(one.color, line);
      line.appendChild(document.createTextNode(one.label + ": " + best.slice(0, TOP_K).map(function (p) {
        return tokens[p[1]] + " " + p[0].toFixed(2);
      }).join(", ")));
    });
    if (data.note) { html("div", "note", "[" + data.note + "]", readout); }
  }

  function drawHead(all, focus) {
    var marks = [], s, t, w, lane, step = Math.min(MAX_WIDTH, (ROW - 4) / Math.max(1, all.length));
    var other = focus.side === "query" ? "key" : "query";
    var x1 = other === "query" ? xLine.query : xLeft + 6, x2 = other === "key" ? xLine.key : xRight - 6;
    while (lineLayer.firstChild) { lineLayer.removeChild(lineLayer.firstChild); }
    while (blockLayer.firstChild) { blockLayer.removeChild(blockLayer.firstChild); }
    for (s = 0; s < all.length; s++) {
      lane = (s - (all.length - 1) / 2) * step;
      for (t = 0; t < T; t++) {
        w = weight(all[s], focus.side, focus.index, t);
        var q = focus.side === "query" ? focus.index : t, k = focus.side === "query" ? t : focus.index;
        var at = { "data-series": all[s].name, "data-query": q, "data-key": k, "data-weight": String(w) };
        var block = el("rect", { "class": "block", x: xBlocks[other] + all[s].slot * BOX, y: y(t) - ROW / 2 + 2,
          width: BOX - 1, height: ROW - 4, fill: all[s].color, "fill-opacity": w }, blockLayer);
        for (var a in at) { if (at.hasOwnProperty(a)) { block.setAttribute(a, at[a]); } }
        if (w < data.min_weight) { continue; }
        var line = el("line", { "class": "attn", x1: x1, y1: y(q) + lane, x2: x2, y2: y(k) + lane,
          stroke: all[s].color, "stroke-width": w * MAX_WIDTH }, null);
        for (a in at) { if (at.hasOwnProperty(a)) { line.setAttribute(a, at[a]); } }
        marks.push([w, line]);
      }
    }
    marks.sort(function (m1, m2) { return m2[0] - m1[0]; });  /* thickest first: thin lines stay on top */
    marks.forEach(function (m) { lineLayer.appendChild(m[1]); });
    left.forEach(function (g, t) {
      g.setAttribute("class", "token left" + (focus.side === "query" && t === focus.index ? " focus" : "") +
        (state.pin.side === "query" && t === state.pin.index ? " pinned" : ""));
    });
    right.forEach(function (g, t) {
      g.setAttribute("class", "token right" + (focus.side === "key" && t === focus.index ? " focus" : "") +
        (state.pin.side === "key" && t === state.pin.index ? " pinned" : ""));
    });
    labels.forEach(function (label) {
      var slot = Number(label.getAttribute("data-slot")), shown = null;
      all.forEach(function (one) {
        if (one.slot === slot && label.getAttribute("data-side") === other) { shown = one; }
      });
      label.textContent = shown ? (shown.name === "mean" ? "m" : shown.name === "rollout" ? "R" : String(slot)) : "";
      label.setAttribute("fill", shown ? shown.color : "#bbb");
    });
  }

  function draw() {
    var focus = state.hover || state.pin, all = series(), rollout = state.layer === "rollout", h;
    ["head", "model", "words"].forEach(function (view) {
      document.getElementById(view + "-view").hidden = state.view !== view;
      document.getElementById("mode-" + view).className = state.view === view ? "tab on" : "tab";
    });
    if (state.method) { drawWords(); }
    for (h = 0; h < H; h++) { document.getElementById("head-" + h).checked = state.heads[h]; }
    document.getElementById("head-mean").checked = state.mean;
    Array.prototype.forEach.call(headBox.querySelectorAll("input"), function (box) {
      box.disabled = rollout;
      box.parentNode.className = rollout ? "off" : "";
    });
    select.value = state.layer;
    Array.prototype.forEach.call(document.querySelectorAll("canvas.map"), function (map) {
      var head = map.getAttribute("data-head"), on = map.getAttribute("data-layer") === state.layer &&
        (rollout || state.heads[Number(head)]);
      map.setAttribute("class", on ? "map current" : "map");
    });
    drawHead(all, focus);
    drawReadout(all, focus);
  }

  function fromHash() {
    var parts = window.location.hash.replace(/^#/, "").split("&"), p, kv, h, t;
    for (p = 0; p < parts.length; p++) {
      kv = parts[p].split("=");
      t = Number(kv[1]);
      if (kv[0] === "layer" && (kv[1] === "rollout" ? data.rollout : t < L)) { state.layer = kv[1]; }
      if (kv[0] === "mean") { state.mean = kv[1] === "1"; }
      if (kv[0] === "view" && (kv[1] === "head" || kv[1] === "model" || (kv[1] === "words" && state.method))) {
        state.view = kv[1];
      }
      if (kv[0] === "method" && methods.indexOf(kv[1]) >= 0) { state.method = kv[1]; }
      if ((kv[0] === "token" || kv[0] === "key") && t >= 0 && t < T) {
        state.pin = { side: kv[0] === "key" ? "key" : "query", index: t };
      }
      if (kv[0] === "heads") {
        for (h = 0; h < H; h++) { state.heads[h] = false; }
        (kv[1] || "").split(",").forEach(function (v) {
          if (v !== "" && Number(v) < H) { state.heads[Number(v)] = true; }
        });
      }
    }
  }

  buildControls();
  buildTokens();
  buildModel();
  buildWords();
  fromHash();
  window.addEventListener("hashchange", function () { fromHash(); draw(); });
  draw();
})();
