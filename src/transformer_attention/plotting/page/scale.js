/* What a weight's colour means: the three scales of scales.py (named and described there, passed in the
   page's data), the one white-to-blue ramp, and the legend every view shows. */
import { data, state } from "./state.js";
import { byId, htmlNode } from "./dom.js";

const RAMP = [[0, [255, 255, 255]], [0.5, [107, 174, 214]], [1, [8, 48, 107]]];
const ENDS = { fixed: ["0", "1"], row: ["0", "the row\u2019s largest"], uniform: ["0", "1/n at half", "1"] };
const memo = new WeakMap();

/* A row of n weights as colour values in [0, 1]: fixed keeps them, row divides by the row's largest,
   uniform maps w to w.n / (w.n + 1), so a head that reads its n keys alike is drawn at half colour. */
export function scaled(row, scale) {
  const n = row.length;
  if (scale === "row") {
    const top = Math.max(0, ...row);
    return row.map((w) => (top > 0 ? Math.max(0, w) / top : 0));
  }
  if (scale === "uniform") {
    return row.map((w) => Math.max(0, w) * n / (Math.max(0, w) * n + 1));
  }
  return row.map((w) => Math.min(1, Math.max(0, w)));
}

/* Every row of a (n, n) map scaled, kept for the next draw (a map's rows are never changed). */
export function scaledRows(rows, scale) {
  if (!memo.has(rows)) { memo.set(rows, {}); }
  const kept = memo.get(rows);
  if (!kept[scale]) { kept[scale] = rows.map((row) => scaled(row, scale)); }
  return kept[scale];
}

export function ramp(v) {
  const w = Math.min(1, Math.max(0, v));
  let j = 1;
  while (j < RAMP.length - 1 && RAMP[j][0] < w) { j++; }
  const [a, b] = [RAMP[j - 1], RAMP[j]];
  const f = (w - a[0]) / (b[0] - a[0]);
  return [0, 1, 2].map((c) => Math.round(a[1][c] + f * (b[1][c] - a[1][c])));
}

export function rgb(c) {
  return "rgb(" + c.join(",") + ")";
}

/* Each .legend box: the ramp, its ends, and what a colour means on the scale picked. */
export function drawLegends() {
  const gradient = "linear-gradient(to right, " +
    RAMP.map(([at, c]) => rgb(c) + " " + 100 * at + "%").join(", ") + ")";
  document.querySelectorAll(".legend").forEach((box) => {
    box.replaceChildren();
    const ends = ENDS[state.scale] || ["0", "1"];
    htmlNode("span", "", ends[0], box);
    const bar = htmlNode("span", "bar", "", box);
    bar.style.background = gradient;
    if (ends.length === 3) { htmlNode("span", "mid", ends[1], bar); }
    htmlNode("span", "", ends[ends.length - 1], box);
    const what = htmlNode("span", "what", state.scale + " scale: " + data.names.scales[state.scale], box);
    what.setAttribute("data-scale", state.scale);
  });
}

export function buildScaleSwitch() {
  const select = byId("scale");
  Object.keys(data.names.scales).forEach((name) => {
    const option = htmlNode("option", "", name, select);
    option.value = name;
    option.title = data.names.scales[name];
  });
  return select;
}
