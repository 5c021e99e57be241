/* Head view: queries on the left, keys on the right. Each series (a head, the head mean, or the rollout)
   owns a fixed column of blocks beside each token, fill opacity = the weight on the scale picked, so heads
   never cover one another; lines are opaque (no colour outside the legend), thickness = the scaled weight,
   drawn thickest first so a thin line lies on top of a thick one; the readout gives weights to 3 significant
   digits (1/n of a 500-token text is 0.00200); a long text's rows are compact, and it marks only the keys read
   at least an even share (1/n): below that every row of a diffuse head is a wall of half-tone blocks. Every mark
   carries data-series, data-query, data-key and data-weight (the model's weight) for tests and tools. */
import { data, state, tokens, T, H, changed } from "./state.js";
import { DARK, byId, colorOf, htmlNode, quoted, svgNode, swatch } from "./dom.js";
import { scaledRows } from "./scale.js";

const LONG = 64; /* a text of more tokens is drawn in compact rows: 16 px, not 24 */
const ROW = T > LONG ? 16 : 24, MAX_WIDTH = 6, GAP = 260, PAD = 12, TOP = 18, BOX = 13, TOP_K = 5;
const SLOTS = H + 1; /* one block column per head, and one for the mean */
const svg = byId("view");
const readout = byId("readout");
const left = [], right = [], labels = [];
const xBlocks = {}, xLine = {};
const means = {};
let lineLayer, blockLayer, xLeft, xRight;

function y(t) {
  return PAD + TOP + t * ROW + ROW / 2;
}

export function buildTokens() {
  svg.classList.toggle("compact", T > LONG);
  const probe = svgNode("text", { x: 0, y: -100 }, svg);
  const widths = tokens.map((token) => {
    probe.textContent = token;
    return probe.getComputedTextLength();
  });
  svg.removeChild(probe);
  const width = Math.max(0, ...widths);
  xLeft = PAD + width;
  xBlocks.query = xLeft + 8;
  xLine.query = xBlocks.query + SLOTS * BOX + 5;
  xLine.key = xLine.query + GAP;
  xBlocks.key = xLine.key + 5;
  xRight = xBlocks.key + SLOTS * BOX + 8;
  lineLayer = svgNode("g", { id: "lines" }, svg);
  blockLayer = svgNode("g", { id: "blocks" }, svg);
  for (const side of ["query", "key"]) {
    for (let s = 0; s < SLOTS; s++) {
      labels.push(svgNode("text", { class: "slot", x: xBlocks[side] + s * BOX + (BOX - 1) / 2, y: PAD + TOP / 2,
        "text-anchor": "middle", "data-slot": s, "data-side": side }, svg));
    }
  }
  const column = (kind, list, side) => {
    tokens.forEach((token, t) => {
      const g = svgNode("g", { class: "token " + kind, "data-index": t }, svg);
      const x = kind === "left" ? xLeft - widths[t] : xRight;
      svgNode("rect", { class: "hit", x: x - 4, y: y(t) - ROW / 2 + 1, width: widths[t] + 8, height: ROW - 2,
        rx: 3 }, g);
      svgNode("text", { x: kind === "left" ? xLeft : xRight, y: y(t),
        "text-anchor": kind === "left" ? "end" : "start" }, g).textContent = token;
      g.addEventListener("mouseenter", () => { state.hover = { side, index: t }; changed(); });
      g.addEventListener("mouseleave", () => { state.hover = null; changed(); });
      g.addEventListener("click", () => { state.pin = { side, index: t }; changed(); });
      list.push(g);
    });
  };
  column("left", left, "query");
  column("right", right, "key");
  svg.setAttribute("width", xRight + width + 2 * PAD);
  svg.setAttribute("height", 2 * PAD + TOP + T * ROW);
}

function meanOf(layer) {
  const key = state.kind + ":" + layer;
  if (!means[key]) {
    const maps = data.layers[Number(layer)];
    means[key] = maps[0].map((row, q) => row.map((_, k) => maps.reduce((s, map) => s + map[q][k], 0) / H));
  }
  return means[key];
}

/* The series the head view draws now: the rollout alone, or the heads switched on and the mean. */
function series() {
  if (state.layer === "rollout") {
    return [{ name: "rollout", label: "rollout", color: DARK, slot: 0, rows: data.rollout }];
  }
  const layer = data.layers[Number(state.layer)];
  const out = [];
  for (let h = 0; h < H; h++) {
    if (state.heads[h]) { out.push({ name: "head-" + h, label: "head " + h, color: colorOf(h), slot: h, rows: layer[h] }); }
  }
  if (state.mean) { out.push({ name: "mean", label: "mean", color: DARK, slot: H, rows: meanOf(state.layer) }); }
  return out;
}

function drawReadout(all, focus) {
  readout.replaceChildren();
  const title = focus.side === "query" ? quoted(tokens[focus.index]) + " (query) reads most:" :
    quoted(tokens[focus.index]) + " (key) is read most by:";
  htmlNode("div", "readtitle", all.length ? title : "no head selected", readout);
  all.forEach((one) => {
    const best = tokens.map((_, j) => [at(one.rows, focus, j), j]);
    best.sort((a, b) => b[0] - a[0] || a[1] - b[1]);
    const line = htmlNode("div", "readline", "", readout);
    line.setAttribute("data-series", one.name);
    swatch(one.color, line);
    line.appendChild(document.createTextNode(one.label + ": " +
      best.slice(0, TOP_K).map(([w, j]) => tokens[j] + " " + w.toPrecision(3)).join(", ")));
  });
  if (data.note) { htmlNode("div", "note", "[" + data.note + "]", readout); }
}

/* The entry of `rows` between the focused token and token `t` of the other side. */
function at(rows, focus, t) {
  return focus.side === "query" ? rows[focus.index][t] : rows[t][focus.index];
}

export function drawHead() {
  const focus = state.hover || state.pin, all = series(), marks = [];
  const step = Math.min(MAX_WIDTH, (ROW - 4) / Math.max(1, all.length));
  const other = focus.side === "query" ? "key" : "query";
  const x1 = other === "query" ? xLine.query : xLeft + 6, x2 = other === "key" ? xLine.key : xRight - 6;
  lineLayer.replaceChildren();
  blockLayer.replaceChildren();
  all.forEach((one, s) => {
    const lane = (s - (all.length - 1) / 2) * step, colours = scaledRows(one.rows, state.scale);
    for (let t = 0; t < T; t++) {
      const w = at(one.rows, focus, t), v = at(colours, focus, t);
      if (T > LONG && w < 1 / T) { continue; } /* a long text: only the keys read at least an even share */
      const q = focus.side === "query" ? focus.index : t, k = focus.side === "query" ? t : focus.index;
      const marked = { "data-series": one.name, "data-query": q, "data-key": k, "data-weight": String(w) };
      svgNode("rect", { class: "block", x: xBlocks[other] + one.slot * BOX, y: y(t) - ROW / 2 + 2, width: BOX - 1,
        height: ROW - 4, fill: one.color, "fill-opacity": v, ...marked }, blockLayer);
      if (v >= data.min_weight) {
        marks.push([v, svgNode("line", { class: "attn", x1, y1: y(q) + lane, x2, y2: y(k) + lane, stroke: one.color,
          "stroke-width": v * MAX_WIDTH, ...marked }, null)]);
      }
    }
  });
  marks.sort((m1, m2) => m2[0] - m1[0]); /* thickest first: thin lines stay on top */
  marks.forEach(([, line]) => lineLayer.appendChild(line));
  const mark = (list, kind, side) => list.forEach((g, t) => {
    g.setAttribute("class", "token " + kind + (focus.side === side && t === focus.index ? " focus" : "") +
      (state.pin.side === side && t === state.pin.index ? " pinned" : ""));
  });
  mark(left, "left", "query");
  mark(right, "right", "key");
  labels.forEach((label) => {
    const slot = Number(label.getAttribute("data-slot"));
    const shown = label.getAttribute("data-side") === other ? all.find((one) => one.slot === slot) : undefined;
    label.textContent = shown ? (shown.name === "mean" ? "m" : shown.name === "rollout" ? "R" : String(slot)) : "";
    label.setAttribute("fill", shown ? shown.color : "#bbb");
  });
  drawReadout(all, focus);
}

/* The view selector (each layer, the rollout) and a toggle per head and for the mean of heads. */
export function buildHeadControls() {
  const select = byId("layer"), headBox = byId("heads");
  for (let l = 0; l < data.layers.length; l++) { htmlNode("option", "", "layer " + l, select).value = String(l); }
  if (data.rollout) { htmlNode("option", "", "rollout (all layers)", select).value = "rollout"; }
  select.addEventListener("change", () => { state.layer = select.value; changed(); });
  const toggle = (text, color, id, onChange) => {
    const label = htmlNode("label", "", "", headBox), box = htmlNode("input", "", "", label);
    label.id = "label-" + id;
    box.type = "checkbox";
    box.id = id;
    box.addEventListener("change", onChange);
    swatch(color, label);
    label.appendChild(document.createTextNode(text));
    headBox.appendChild(document.createTextNode(" "));
  };
  for (let h = 0; h < H; h++) {
    toggle("head " + h, colorOf(h), "head-" + h, (ev) => { state.heads[h] = ev.target.checked; changed(); });
  }
  toggle("mean of heads", DARK, "head-mean", (ev) => { state.mean = ev.target.checked; changed(); });
}

export function drawHeadControls() {
  const rollout = state.layer === "rollout";
  for (let h = 0; h < H; h++) { byId("head-" + h).checked = state.heads[h]; }
  byId("head-mean").checked = state.mean;
  byId("heads").querySelectorAll("input").forEach((box) => {
    box.disabled = rollout;
    box.parentNode.className = rollout ? "off" : "";
  });
  byId("layer").value = state.layer;
}
