/* Model view: every layer x head (and the rollout) as a query x key map on the scale picked. A map's canvas
   has one pixel per cell, drawn at CELL_PX or more per cell (never under MIN_CELL_PX): a long text's maps
   keep readable cells and the grid scrolls in its own box, never the page. */
import { data, state, tokens, T, H, changed } from "./state.js";
import { byId, colorOf, htmlNode, quoted, swatch } from "./dom.js";
import { ramp, scaledRows } from "./scale.js";

const MAP_PX = 120, MIN_CELL_PX = 3;
const CELL_PX = Math.max(MIN_CELL_PX, Math.floor(MAP_PX / T));
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

export function buildModel() {
  const grid = byId("grid"), hint = byId("model-readout"), rows = [];
  grid.style.gridTemplateColumns = "auto repeat(" + H + ", auto)";
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
      canvas.style.width = canvas.style.height = CELL_PX * T + "px";
      canvas.setAttribute("data-layer", row.layer);
      canvas.setAttribute("data-head", row.layer === "rollout" ? "rollout" : String(h));
      canvas.title = name + ": click to open it";
      canvas.addEventListener("click", () => openMap(row.layer, h));
      canvas.addEventListener("mousemove", (ev) => {
        const r = canvas.getBoundingClientRect(), n = r.width / T;
        const q = Math.min(T - 1, Math.floor((ev.clientY - r.top) / n));
        const k = Math.min(T - 1, Math.floor((ev.clientX - r.left) / n));
        const v = mapOf(row.layer, h)[q][k];
        hint.textContent = name + ": " + quoted(tokens[q]) + " reads " + quoted(tokens[k]) + " " + v.toFixed(3);
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
