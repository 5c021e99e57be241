/* Word attributions tab (when the page carries them): each token coloured by the picked method's
   attribution (data-method, data-value), blue towards the predicted class, orange against, the strongest
   fully coloured; each method's faithfulness on this text in a table. Method labels come from Python. */
import { data, state, tokens, T, changed } from "./state.js";
import { byId, htmlNode, quoted } from "./dom.js";

export const FOR = [31, 119, 180], AGAINST = [255, 127, 14];
export const methods = data.attributions ? Object.keys(data.attributions) : [];
const MEASURES = ["comprehensiveness", "sufficiency", "aopc"];
const wordSpans = [];

export function methodName(m) {
  return data.names.methods[m] || m;
}

export function buildWords() {
  if (!methods.length) { return; }
  const box = byId("methods"), words = byId("words"), hint = byId("word-readout");
  state.method = methods.includes("integrated_gradients") ? "integrated_gradients" : methods[0];
  byId("mode-words").hidden = false;
  methods.forEach((m) => {
    const label = htmlNode("label", "", "", box), radio = htmlNode("input", "", "", label);
    radio.type = "radio";
    radio.name = "method";
    radio.id = "method-" + m;
    radio.addEventListener("change", () => { state.method = m; changed(); });
    label.appendChild(document.createTextNode(" " + methodName(m)));
  });
  for (let t = 0; t < T; t++) {
    const span = htmlNode("span", "word", tokens[t], words);
    span.setAttribute("data-index", String(t));
    span.addEventListener("mouseenter", () => {
      const v = data.attributions[state.method][t];
      hint.textContent = t === 0 ? quoted(tokens[t]) + " is kept in every test: not ranked" :
        methodName(state.method) + ": " + quoted(tokens[t]) + " " + v.toPrecision(3);
    });
    words.appendChild(document.createTextNode(" ")); /* whitespace between tokens: the row wraps */
    wordSpans.push(span);
  }
  if (!data.faithfulness) { return; }
  const table = byId("faithfulness");
  let row = htmlNode("tr", "", "", table);
  ["method", "comprehensiveness", "sufficiency", "AOPC"].forEach((name) => htmlNode("th", "", name, row));
  methods.forEach((m) => {
    const scores = data.faithfulness[m];
    if (!scores) { return; }
    row = htmlNode("tr", "", "", table);
    row.setAttribute("data-method", m);
    htmlNode("td", "", methodName(m), row);
    MEASURES.forEach((key) => htmlNode("td", "", scores[key].toFixed(3), row));
  });
  if (data.faithfulness_note) { htmlNode("caption", "", data.faithfulness_note, table); }
}

export function drawWords() {
  if (!state.method) { return; }
  const values = data.attributions[state.method];
  const top = Math.max(0, ...values.slice(1).map(Math.abs));
  wordSpans.forEach((span, t) => {
    const v = values[t], a = t === 0 || top === 0 ? 0 : Math.abs(v) / top;
    span.style.background = "rgba(" + (v >= 0 ? FOR : AGAINST).join(",") + "," + a.toFixed(3) + ")";
    span.style.color = a > 0.55 ? "#fff" : "#222";
    span.setAttribute("data-method", state.method);
    span.setAttribute("data-value", String(v));
  });
  methods.forEach((m) => { byId("method-" + m).checked = m === state.method; });
  document.querySelectorAll("#faithfulness tr[data-method]").forEach((row) => {
    row.className = row.getAttribute("data-method") === state.method ? "current" : "";
  });
}
