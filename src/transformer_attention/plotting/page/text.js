/* Text tab: the whole review as wrapped words (word pieces joined, their weights summed: words.py), each
   shaded by the weight the pooled row gives it (the [CLS] row, or the mean of the rows for mean pooling:
   the page says which) of the series picked: a layer's mean of heads, one head, the rollout, or a word
   attribution (signed: blue towards the predicted class, orange against); with the map switch on weight x norm,
   the same series of the norm-weighted maps (state.pickKind swaps them). A leading [CLS] is no word of
   the review: its own share is stated, not shaded. Each word carries data-index and data-value. */
import { data, state, changed } from "./state.js";
import { byId, htmlNode, quoted } from "./dom.js";
import { ramp, rgb, scaled } from "./scale.js";
import { FOR, AGAINST, methodName } from "./words.js";

const text = data.text;
const spans = [];

function seriesOf(id) {
  return text.series.find((one) => one.id === id) || text.series[0];
}

export function buildText() {
  const select = byId("text-series"), box = byId("text"), hint = byId("text-readout");
  const groups = {};
  text.series.forEach((one) => {
    if (!groups[one.group]) { groups[one.group] = htmlNode("optgroup", "", "", select); }
    groups[one.group].label = one.group;
    const option = htmlNode("option", "", one.method ? methodName(one.method) : one.label, groups[one.group]);
    option.value = one.id;
  });
  select.addEventListener("change", () => { state.series = select.value; changed(); });
  byId("text-pooled").textContent = text.pooled;
  byId("text-pooling").textContent = "pooling=" + text.pooling + ": " + text.reads;
  text.words.forEach((word, i) => {
    if (i < text.first) { return; }
    const span = htmlNode("span", "word", word, box);
    span.setAttribute("data-index", String(i));
    span.addEventListener("mouseenter", () => {
      const one = seriesOf(state.series), v = one.values[i];
      const pieces = text.pieces[i] > 1 ? " (" + text.pieces[i] + " pieces, summed)" : "";
      hint.textContent = (one.method ? methodName(one.method) : one.label) + ": " + quoted(word) + pieces + " " +
        v.toPrecision(3);
    });
    box.appendChild(document.createTextNode(" ")); /* whitespace between words: the text wraps */
    spans.push(span);
  });
  state.series = text.default;
}

export function drawText() {
  const one = seriesOf(state.series);
  const shown = one.values.slice(text.first);
  const top = Math.max(0, ...shown.map(Math.abs));
  const colours = one.signed ? shown.map((v) => (top > 0 ? Math.abs(v) / top : 0)) : scaled(shown, state.scale);
  spans.forEach((span, j) => {
    const v = shown[j], c = colours[j];
    span.style.background = one.signed ? "rgba(" + (v >= 0 ? FOR : AGAINST).join(",") + "," + c.toFixed(3) + ")" :
      rgb(ramp(c));
    span.style.color = c > 0.55 ? "#fff" : "#222";
    span.setAttribute("data-value", String(v));
    span.setAttribute("data-series", one.id);
    span.setAttribute("data-kind", one.signed ? "attribution" : state.kind);
  });
  byId("text-series").value = one.id;
  const norm = state.kind === "norm" ? ", by weight x norm (each row as shares: the map switch)" : "";
  const note = one.signed ? "an attribution is shaded by its size / the largest on this text, whatever the scale" :
    "shaded on the colour scale below" + norm;
  const own = text.first && !one.signed ? "; " + text.words[0] + " itself takes " + one.values[0].toFixed(3) : "";
  byId("text-note").textContent = note + own;
  byId("text-legend").hidden = Boolean(one.signed);
}

export function pickSeries(id) {
  if (text.series.some((one) => one.id === id)) { state.series = id; }
}
