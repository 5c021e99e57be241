/* The page's data (html.py inlines it as JSON: weights, words, and the names it shares with Python) and the
   one state every view draws from. A view that changes the state calls changed(); main.js redraws.
   The maps come packed (pack.py: 16 bits of each weight's square root, base64); the rollout of a text shown
   whole and the norm-weighted maps (weight x the length of what each key moves) are computed here. */

export const data = JSON.parse(document.getElementById("attention-data").textContent);
data.layers = unpack(data.layers);
data.rollout = rolloutOf(data.rollout, data.layers);
if (data.kinds) { data.kinds.weight = { layers: data.layers, rollout: data.rollout, series: data.text.series }; }
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

/* A packed array back as nested arrays, each innermost row a Float32Array: w = (code / 65535)^2. */
function unpack(packed) {
  const bytes = atob(packed.sqrt16), flat = new Float32Array(bytes.length / 2);
  for (let i = 0; i < flat.length; i++) {
    const u = (bytes.charCodeAt(2 * i) | (bytes.charCodeAt(2 * i + 1) << 8)) / 65535;
    flat[i] = u * u;
  }
  const nest = (offset, dims) => {
    if (dims.length === 1) { return flat.subarray(offset, offset + dims[0]); }
    const step = dims.slice(1).reduce((a, b) => a * b, 1);
    return Array.from({ length: dims[0] }, (_, i) => nest(offset + i * step, dims.slice(1)));
  };
  return nest(0, packed.shape);
}

/* The rollout (rollout.py's formula): per layer the head mean mixed with the residual path, rows renormalised,
   multiplied from the first layer up; "compute" in the data asks for it, a packed one is read, null has none. */
function rolloutOf(stored, layers) {
  if (stored !== "compute") { return stored && unpack(stored); }
  const n = layers[0][0].length, r = data.residual;
  let out = null;
  layers.forEach((maps) => {
    const mixed = [];
    for (let q = 0; q < n; q++) {
      const row = new Float64Array(n);
      maps.forEach((map) => { for (let k = 0; k < n; k++) { row[k] += (1 - r) * map[q][k] / maps.length; } });
      row[q] += r;
      const sum = row.reduce((a, b) => a + b, 0);
      mixed.push(row.map((v) => v / Math.max(sum, 1e-12)));
    }
    out = out === null ? mixed : mixed.map((row) => {
      const next = new Float64Array(n);
      row.forEach((v, j) => { if (v !== 0) { const below = out[j]; for (let k = 0; k < n; k++) { next[k] += v * below[k]; } } });
      return next;
    });
  });
  return out.map((row) => Float32Array.from(row));
}

/* The norm-weighted maps of the kind `one` (pack.py's norm_data): each weight times its key's length, every row
   scaled to sum 1; or the shares as stored. */
function normMaps(one) {
  if (!one.lengths) { return unpack(one.layers); }
  return data.kinds.weight.layers.map((maps, l) => maps.map((rows, h) => rows.map((row) => {
    const v = row.map((w, k) => w * one.lengths[l][h][k]), sum = v.reduce((a, b) => a + b, 0);
    return v.map((x) => (sum > 0 ? x / sum : 0));
  })));
}

export function onChange(listener) {
  listeners.push(listener);
}

/* The maps the head, model and text views draw: the weights, or the norm-weighted maps (when the page has them);
   the text tab's series (the same ids) swap with them. */
export function pickKind(kind) {
  if (!data.kinds || !(kind in data.kinds)) { return false; }
  const one = data.kinds[kind];
  if (!one.ready) {
    one.layers = kind === "weight" ? one.layers : normMaps(one);
    one.rollout = kind === "weight" ? one.rollout : rolloutOf(one.rollout, one.layers);
    one.ready = true;
  }
  state.kind = kind;
  data.layers = one.layers;
  data.rollout = one.rollout;
  data.text.series = one.series;
  return true;
}

export function changed() {
  listeners.forEach((listener) => listener());
}
