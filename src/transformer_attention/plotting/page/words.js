/* Word attributions tab (when the page carries them): each word of the text coloured by the picked method's
   attribution (data-method, data-value), blue towards the explained class, orange against, the strongest
   fully coloured; the same words as the text tab (a word cut into pieces takes the mean of its pieces' values,
   its pieces on hover; a leading [CLS] is no word of the review: not shown). It opens on the method the text tab
   opens on. Each method's label and one-line description come from Python (the registry); each method's
   faithfulness on this text in a table, and, when predict.py explained several texts, each method's agreement
   (tau) over all of them, mean +- SE. */
import { data, state, changed } from "./state.js";
import { byId, htmlNode, quoted } from "./dom.js";

export const FOR = [31, 119, 180], AGAINST = [255, 127, 14];
export const methods = data.attributions ? Object.keys(data.attributions) : [];
const MEASURES = ["comprehensiveness", "sufficiency", "aopc", "naopc", "tau_leave_one_out", "tau_integrated_gradients"];
const HEADS = ["comprehensiveness", "sufficiency", "AOPC", "nAOPC", "tau LOO", "tau IG"];
const wordSpans = [];

export function methodName(m) {
  return data.names.methods[m] || m;
}

/* A method's one-line description (what its number means, and its unit), or "" where the page has none. */
export function methodNote(m) {
  return (data.names.notes || {})[m] || "";
}

/* A signed attribution as hover reads it: its sign and size, the class it counts for or against, and its size
   against the largest of the text (the colour's opacity). */
export function signedReading(v, top) {
  const target = data.text.target || "the class explained";
  const share = top > 0 ? " (" + Math.round(100 * Math.abs(v) / top) + "% of this text\u2019s largest)" : "";
  return (v > 0 ? "+" : "") + v.toPrecision(3) + ", " + (v >= 0 ? "towards " : "against ") + target + share;
}

/* `word` with its pieces, where the tokenizer cut it: "film (fi ##lm: the mean of 2 pieces)". */
export function withPieces(word, pieces) {
  return quoted(word) + (pieces.length > 1 ? " (" + pieces.join(" ") + ": the mean of " + pieces.length +
    " pieces)" : "");
}

/* The method's value for each word of the text tab (data.text: the mean of each word's pieces). */
function wordValues(m) {
  const one = data.text.series.find((s) => s.id === "method-" + m);
  return one ? one.values : data.text.words.map(() => 0);
}

export function buildWords() {
  if (!methods.length) { return; }
  const box = byId("methods"), words = byId("words"), hint = byId("word-readout");
  const opening = data.text.default.replace(/^method-/, "");
  state.method = methods.includes(opening) ? opening : methods[0]; /* the text tab's method */
  byId("mode-words").hidden = false;
  byId("words-note").textContent = data.words_note || "";
  methods.forEach((m) => {
    const label = htmlNode("label", "", "", box), radio = htmlNode("input", "", "", label);
    label.title = methodNote(m);
    radio.type = "radio";
    radio.name = "method";
    radio.id = "method-" + m;
    radio.addEventListener("change", () => { state.method = m; changed(); });
    label.appendChild(document.createTextNode(" " + methodName(m)));
  });
  data.text.words.forEach((word, i) => {
    if (i < data.text.first) { return; }
    const span = htmlNode("span", "word", word, words), pieces = data.text.pieces[i];
    span.setAttribute("data-index", String(i));
    span.addEventListener("mouseenter", () => {
      const values = wordValues(state.method), top = Math.max(0, ...values.slice(data.text.first).map(Math.abs));
      hint.textContent = methodName(state.method) + ": " + withPieces(word, pieces) + " " + signedReading(values[i], top);
    });
    words.appendChild(document.createTextNode(" ")); /* whitespace between words: the row wraps */
    wordSpans.push(span);
  });
  if (!data.faithfulness) { return; }
  byId("faithfulness-help").hidden = false;
  const table = byId("faithfulness");
  let row = htmlNode("tr", "", "", table);
  const shown = MEASURES.map((key, i) => [key, HEADS[i]]).filter(([key]) =>
    methods.some((m) => data.faithfulness[m] && key in data.faithfulness[m]));  /* the measures the page has */
  const over = data.agreement || {}; /* each method's tau over every text predict.py explained, beside this one's */
  const across = MEASURES.map((key, i) => [key, HEADS[i]])
    .filter(([key]) => methods.some((m) => over[m] && over[m][key]));
  const texts = (key) => Math.max(...methods.map((m) => (over[m] && over[m][key] ? over[m][key].texts : 0)));
  ["method", ...shown.map(([, head]) => head), ...across.map(([key, head]) => head + ", " + texts(key) + " texts")]
    .forEach((name) => htmlNode("th", "", name, row));
  methods.forEach((m) => {
    const scores = data.faithfulness[m];
    if (!scores) { return; }
    row = htmlNode("tr", "", "", table);
    row.setAttribute("data-method", m);
    htmlNode("td", "", methodName(m), row);
    shown.forEach(([key]) => htmlNode("td", "", cell(key, scores[key]), row));
    across.forEach(([key]) => htmlNode("td", "across", spread(over[m] && over[m][key]), row));
  });
  if (data.faithfulness_note) { htmlNode("caption", "", data.faithfulness_note, table); }
}

/* A score to three decimals; "-" where the text has none (one word, no bounds); a tau of 1 says "identical". */
function cell(key, value) {
  if (value === null || value === undefined) { return "-"; }
  return key.startsWith("tau_") && value === 1 ? "1 (identical)" : value.toFixed(3);
}

/* A tau over several texts: mean +- standard error, "1 (identical)" when every text ranks the words the same. */
function spread(one) {
  if (!one || one.mean === null) { return "-"; }
  return one.identical ? "1 (identical)" : one.mean.toFixed(3) + " \u00b1 " + one.sem.toFixed(3);
}

export function drawWords() {
  if (!state.method) { return; }
  const values = wordValues(state.method), first = data.text.first;
  const top = Math.max(0, ...values.slice(first).map(Math.abs));
  wordSpans.forEach((span, j) => {
    const v = values[j + first], a = top === 0 ? 0 : Math.abs(v) / top;
    span.style.background = "rgba(" + (v >= 0 ? FOR : AGAINST).join(",") + "," + a.toFixed(3) + ")";
    span.style.color = a > 0.55 ? "#fff" : "#222";
    span.setAttribute("data-method", state.method);
    span.setAttribute("data-value", String(v));
  });
  methods.forEach((m) => { byId("method-" + m).checked = m === state.method; });
  const note = methodNote(state.method);
  byId("method-note").textContent = note ? methodName(state.method) + ": " + note + "." : "";
  document.querySelectorAll("#faithfulness tr[data-method]").forEach((row) => {
    row.className = row.getAttribute("data-method") === state.method ? "current" : "";
  });
}
