/* The page's data (html.py inlines it as JSON: weights, words, and the names it shares with Python) and the
   one state every view draws from. A view that changes the state calls changed(); main.js redraws. */

export const data = JSON.parse(document.getElementById("attention-data").textContent);
export const tokens = data.tokens;
export const T = tokens.length;
export const L = data.layers.length;
export const H = data.layers[0].length;

export const state = {
  view: "head",
  layer: "0",
  heads: new Array(H).fill(true),
  mean: false,
  hover: null,
  pin: { side: "query", index: 0 },
  scale: data.names.scale,
  kind: "weight",
  series: null,
  method: null,
};

const listeners = [];

export function onChange(listener) {
  listeners.push(listener);
}

/* The maps the head, model and text views draw: the weights, or the norm-weighted maps (when the page has them);
   the text tab's series (the same ids) swap with them. */
export function pickKind(kind) {
  if (!data.kinds || !(kind in data.kinds)) { return false; }
  state.kind = kind;
  data.layers = data.kinds[kind].layers;
  data.rollout = data.kinds[kind].rollout;
  data.text.series = data.kinds[kind].series;
  return true;
}

export function changed() {
  listeners.forEach((listener) => listener());
}
