/* Model view: every layer x head (and the rollout) as a query x key map on the scale picked. A map's canvas
   has one pixel per cell, drawn at CELL_PX per cell (MIN_CELL_PX or more) where a layer's H maps fit the page
   side by side; a long text's maps are drawn smaller, every head of a layer still in view at once (cells under a
   pixel blend), and the readout gives each weight; a grid taller than the screen scrolls in its own box. */
import { data, state, tokens, T, H, changed } from "./state.js";
import { byId, colorOf, htmlNode, quoted, swatch } from "./dom.js";
import { ramp, scaledRows } from "./scale.js";

const MAP_PX = 120, MIN_CELL_PX = 3;
const CELL_PX = Math.max(MIN_CELL_PX, Math.floor(MAP_PX / T)), MARGIN_PX = 150, GAP_PX = 10;
const maps = [];
let drawn = null;

/* The map a canvas shows, of the kind picked now (state.pickKind swaps data.layers and data.rollout). */
function mapOf(layer, h) {
  return layer === "rollout" ? data.rollout : data.layers[Number(layer)][h];
}

function openMap(layer, head) {
  state.layer = layer;
  if (layer !== "rollout") {
    state.heads = state.heads.map((_, h) => h === head);
    state.mean = false;
  }
  state.view = "head";
  changed();
}

/* A map's side on screen: CELL_PX a cell, or what lets a layer's H maps stand side by side on the page. */
function mapSide() {
  const room = Math.floor((document.documentElement.clientWidth - MARGIN_PX) / H) - GAP_PX;
  return Math.max(Math.min(CELL_PX * T, room), Math.min(CELL_PX * T, MAP_PX / 2));
}

export function buildModel() {
  const grid = byId("grid"), hint = byId("model-readout"), rows = [];
  grid.style.gridTemplateColumns = "auto repeat(" + H + ", auto)";
  const side = mapSide();
  htmlNode("div", "corner", "", grid);
  for (let h = 0; h < H; h++) {
    const head = htmlNode("div", "colhead", "", grid);
    swatch(colorOf(h), head);
    head.appendChild(document.createTextNode("head " + h));
  }
  data.layers.forEach((layer, l) => rows.push({ name: "layer " + l, layer: String(l), maps: layer }));
  if (data.rollout) { rows.push({ name: "rollout", layer: "rollout", maps: [data.rollout] }); }
  rows.forEach((row) => {
    htmlNode("div", "rowhead", row.name, grid);
    row.maps.forEach((_, h) => {
      const canvas = htmlNode("canvas", "map", "", grid);
      const name = row.name + (row.layer === "rollout" ? "" : ", head " + h);
      canvas.width = canvas.height = T;
      canvas.style.width = canvas.style.height = side + "px";
      if (side < T) { canvas.style.imageRendering = "auto"; } /* cells under a pixel blend, none is dropped */
      canvas.setAttribute("data-layer", row.layer);
      canvas.setAttribute("data-head", row.layer === "rollout" ? "rollout" : String(h));
      canvas.title = name + ": click to open it";
      canvas.addEventListener("click", () => openMap(row.layer, h));
      canvas.addEventListener("mousemove", (ev) => {
        const r = canvas.getBoundingClientRect(), n = r.width / T;
        const q = Math.min(T - 1, Math.floor((ev.clientY - r.top) / n));
        const k = Math.min(T - 1, Math.floor((ev.clientX - r.left) / n));
        const v = mapOf(row.layer, h)[q][k];
        hint.textContent = name + ": " + quoted(tokens[q]) + " reads " + quoted(tokens[k]) + " " + v.toPrecision(3);
      });
      maps.push([canvas, row.layer, h]);
    });
    for (let h = row.maps.length; h < H; h++) { htmlNode("div", "", "", grid); }
  });
}

/* Paint every map's cells (only when the scale changed) and outline the maps the head view shows. */
export function drawModel() {
  if (drawn !== state.scale + ":" + state.kind) {
    maps.forEach(([canvas, layer, h]) => {
      const ctx = canvas.getContext("2d"), image = ctx.createImageData(T, T);
      scaledRows(mapOf(layer, h), state.scale).forEach((row, q) => row.forEach((v, k) => {
        image.data.set([...ramp(v), 255], 4 * (q * T + k));
      }));
      ctx.putImageData(image, 0, 0);
    });
    drawn = state.scale + ":" + state.kind;
  }
  const rollout = state.layer === "rollout";
  maps.forEach(([canvas]) => {
    const on = canvas.getAttribute("data-layer") === state.layer &&
      (rollout || state.heads[Number(canvas.getAttribute("data-head"))]);
    canvas.setAttribute("class", on ? "map current" : "map");
  });
}
