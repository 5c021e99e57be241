/* The ATTENTION tab. TensorBoard loads this module in the tab's frame and calls render(): a run, one of its
   examples and a step to pick, and below them that page in a frame of its own (page?run=&tag=&step=, the page the
   callback writes to <run>/attention/, served by the plugin). A new step keeps the view: the page's tab, layer,
   colour scale, map and text series travel to the next page in its URL hash, which the page reads. */

const STYLE = `
body { font: 14px system-ui, sans-serif; margin: 0; }
#bar { display: flex; flex-wrap: wrap; gap: 4px 16px; align-items: center; padding: 8px 12px;
  border-bottom: 1px solid #ddd; }
#bar label { display: inline-flex; gap: 6px; align-items: center; }
#step { width: 16em; }
#hint { margin: 8px 12px; color: #555; }
#page { border: 0; width: 100%; height: calc(100vh - 52px); }
`;
const KEPT = [["layer", "layer"], ["scale", "scale"], ["kind", "kind"], ["series", "text-series"]];

function node(tag, parent, props = {}) {
  const element = Object.assign(document.createElement(tag), props);
  parent.appendChild(element);
  return element;
}

function labelled(text, parent, tag, props) {
  const label = node("label", parent, { textContent: text + " " });
  return node(tag, label, props);
}

function fill(select, values) {
  select.replaceChildren(...values.map((value) => Object.assign(document.createElement("option"),
    { value, textContent: value })));
}

/* The view on screen in `frame`'s page as a URL hash its main.js reads ("" when there is no page). */
function viewHash(frame) {
  const doc = frame.contentDocument, on = doc && doc.querySelector("#tabs .tab.on");
  if (!on) { return ""; }
  const parts = ["view=" + on.id.replace(/^mode-/, "")];
  KEPT.forEach(([key, id]) => {
    const input = doc.getElementById(id);
    if (input && input.value) { parts.push(key + "=" + encodeURIComponent(input.value)); }
  });
  return "#" + parts.join("&");
}

export async function render() {
  node("style", document.head, { textContent: STYLE });
  const bar = node("div", document.body, { id: "bar" });
  const runSelect = labelled("run", bar, "select", { id: "run" });
  const exampleSelect = labelled("example", bar, "select", { id: "example" });
  const stepInput = labelled("step", bar, "input", { id: "step", type: "range", min: 0, step: 1 });
  const stepText = node("span", bar, { id: "step-text" });
  const hint = node("p", document.body, { id: "hint", hidden: true });
  const frame = node("iframe", document.body, { id: "page", title: "attention page" });
  let runs;
  try {
    const reply = await fetch("runs");
    runs = (await reply.json()).runs;
  } catch (error) {
    hint.hidden = false;
    hint.textContent = "The attention tab could not list the runs: " + error;
    return;
  }
  const byName = new Map(runs.map((run) => [run.run, run]));
  const steps = () => {
    const run = byName.get(runSelect.value);
    const example = run && run.examples.find((e) => e.tag === exampleSelect.value);
    return example ? example.steps : [];
  };
  const showStep = () => {
    const all = steps(), i = Number(stepInput.value);
    stepText.textContent = all.length ? "step " + all[i] + " (" + (i + 1) + " of " + all.length + ")" : "";
  };
  const load = () => {
    const all = steps();
    showStep();
    if (!all.length) { frame.hidden = true; return; }
    const step = all[stepInput.value];
    const query = new URLSearchParams({ run: runSelect.value, tag: exampleSelect.value, step });
    frame.hidden = false;
    frame.src = "page?" + query + viewHash(frame);
  };
  const pickExample = () => {
    const all = steps();
    stepInput.max = Math.max(all.length - 1, 0);
    stepInput.value = Math.max(all.length - 1, 0); /* the latest step first */
    stepInput.disabled = all.length < 2;
    load();
  };
  const pickRun = () => {
    const run = byName.get(runSelect.value);
    fill(exampleSelect, run ? run.examples.map((e) => e.tag) : []);
    hint.hidden = !run || !run.hint;
    hint.textContent = run ? run.hint : "";
    pickExample();
  };
  if (!runs.length) {
    hint.hidden = false;
    hint.textContent = "No runs under --logdir yet: start a training run, then reload this tab.";
    frame.hidden = true;
    return;
  }
  fill(runSelect, runs.map((run) => run.run));
  const first = runs.find((run) => run.examples.length);
  runSelect.value = (first || runs[0]).run;
  runSelect.addEventListener("change", pickRun);
  exampleSelect.addEventListener("change", pickExample);
  stepInput.addEventListener("input", showStep);
  stepInput.addEventListener("change", load);
  pickRun();
}
