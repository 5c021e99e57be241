/* Text tab: the whole review as wrapped words (word pieces joined: words.py), each shaded by the weight the
   pooled row gives it (the [CLS] row, or the mean of the rows for mean pooling: the page says which) of the
   series picked: a layer's mean of heads, one head, the rollout, or a word attribution (signed: blue towards the
   explained class, orange against, said in a legend); with the map switch on weight x norm, the same series of
   the norm-weighted maps (state.pickKind swaps them). A word cut into pieces takes the mean of its pieces'
   values, so no word is dark for being split; its pieces show on hover. A leading [CLS] is no word of the
   review: its own share is stated, not shaded. A method's series is explained by its one-line description (the
   registry's); a method that repeats an attention series (the rollout) is listed once, with the attention. Where the model read only part of the text, a mark stands at
   the cut and the unread rest follows in grey. Each word carries data-index and data-value. */
import { data, state, changed } from "./state.js";
import { byId, htmlNode, swatch } from "./dom.js";
import { ramp, rgb, scaled } from "./scale.js";
import { FOR, AGAINST, methodName, methodNote, signedReading, withPieces } from "./words.js";

const text = data.text;
const spans = [];
const order = Object.keys(data.names.methods); /* the methods in the order Python names them */

function seriesOf(id) {
  return text.series.find((one) => one.id === id) || text.series[0];
}

function seriesName(one) {
  return one.method ? methodName(one.method) : one.label;
}

function rank(one) {
  const i = one.method ? order.indexOf(one.method) : -1;
  return i < 0 ? order.length : i;
}

export function buildText() {
  const select = byId("text-series"), box = byId("text"), hint = byId("text-readout");
  const groups = {};
  const plainNames = text.series.filter((one) => !one.method).map((one) => one.label);
  const listed = text.series.map((one, i) => [one, i])
    .filter(([one]) => !one.method || one.id === text.default || !plainNames.includes(seriesName(one))).sort(([a, i], [b, j]) => (a.method && b.method ?
    rank(a) - rank(b) || i - j : i - j)); /* methods in Python's order, everything else as given */
  listed.forEach(([one]) => {
    if (!groups[one.group]) { groups[one.group] = htmlNode("optgroup", "", "", select); }
    groups[one.group].label = one.group;
    const option = htmlNode("option", "", seriesName(one), groups[one.group]);
    option.value = one.id;
    option.title = one.method ? methodNote(one.method) : "";
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
      const top = Math.max(0, ...one.values.slice(text.first).map(Math.abs));
      hint.textContent = seriesName(one) + ": " + withPieces(word, text.pieces[i]) + " " +
        (one.signed ? signedReading(v, top) : v.toPrecision(3) + (one.method ? "" : " (a weight, 0 to 1)"));
    });
    box.appendChild(document.createTextNode(" ")); /* whitespace between words: the text wraps */
    spans.push(span);
  });
  const review = data.review;
  if (review && review.read < review.total) {
    htmlNode("span", "cut", "\u2702 the model read no further (" + review.read + " of " + review.total +
      " tokens)", box).id = "text-cut";
    box.appendChild(document.createTextNode(" "));
    htmlNode("span", "unread", review.unread, box);
  }
  state.series = text.series.some((one) => one.id === text.default) ? text.default : text.series[0].id;
}

/* The legend of a signed series: what its two colours mean. */
function drawSigned(box, shown) {
  box.hidden = !shown;
  if (!shown || box.childElementCount) { return; }
  const target = text.target || "the predicted class";
  swatch("rgb(" + FOR.join(",") + ")", box);
  box.appendChild(document.createTextNode("blue: towards " + target + ", "));
  swatch("rgb(" + AGAINST.join(",") + ")", box);
  box.appendChild(document.createTextNode("orange: against it; the strongest word of this text fully coloured"));
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
  const own = text.first && !one.signed ? "; " + text.words[0] + " itself takes " + one.values[0].toPrecision(3) : "";
  byId("text-note").textContent = note + own;
  byId("text-legend").hidden = Boolean(one.signed);
  const described = one.method ? methodNote(one.method) : "";
  byId("text-help").hidden = Boolean(one.method);
  byId("text-method").hidden = !one.method;
  byId("text-method").textContent = one.method ? "The review as the model read it, each word shaded by " +
    seriesName(one) + (described ? ": " + described : "") + "." : "";
  drawSigned(byId("text-signed"), Boolean(one.signed));
}

export function pickSeries(id) {
  if (text.series.some((one) => one.id === id)) { state.series = id; }
}
