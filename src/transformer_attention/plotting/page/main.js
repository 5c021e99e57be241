/* The page's entry: tabs, the colour scale switch, the URL hash, the export buttons (SVG, PNG), and one draw() that
   every change of state ends in. The hash picks the initial view: #layer=1&heads=0,2&token=4 (layer=rollout,
   mean=1, key=3 to pin a key), view=model|text|words, scale=fixed|row|uniform, series=<a text tab choice>
   (layer-1, layer-1-head-0, rollout, method-<name>), method=<name> for the word attributions tab, kind=norm
   for the norm-weighted maps (when the page has them). */
import { data, state, L, T, H, onChange, pickKind } from "./state.js";
import { SVG_NS, byId, htmlNode } from "./dom.js";
import { buildScaleSwitch, drawLegends } from "./scale.js";
import { buildWords, drawWords, methods } from "./words.js";
import { buildText, drawText, pickSeries } from "./text.js";
import { buildHeadControls, buildTokens, drawHead, drawHeadControls } from "./head.js";
import { buildModel, drawModel } from "./model.js";

const VIEWS = ["head", "model", "text", "words"];
const MAX_PNG_PX = 4e6; /* a taller view is saved at the screen's pixels: 2x of a 450-token head view is 47 MP */
const scaleSwitch = buildScaleSwitch();
const kindSwitch = byId("kind");

function draw() {
  VIEWS.forEach((view) => {
    byId(view + "-view").hidden = state.view !== view;
    byId("mode-" + view).className = state.view === view ? "tab on" : "tab";
  });
  scaleSwitch.value = state.scale;
  kindSwitch.value = state.kind;
  drawLegends();
  drawHeadControls();
  drawHead();
  if (state.view === "model") { drawModel(); }
  if (state.view === "text") { drawText(); }
  if (state.view === "words") { drawWords(); }
}

function fromHash() {
  window.location.hash.replace(/^#/, "").split("&").forEach((part) => {
    const [key, value = ""] = part.split("="), t = Number(value);
    if (key === "layer" && (value === "rollout" ? data.rollout : value !== "" && t >= 0 && t < L)) {
      state.layer = value;
    }
    if (key === "mean") { state.mean = value === "1"; }
    if (key === "view" && VIEWS.includes(value) && (value !== "words" || state.method)) { state.view = value; }
    if (key === "method" && methods.includes(value)) { state.method = value; }
    if (key === "scale" && value in data.names.scales) { state.scale = value; }
    if (key === "kind") { pickKind(value); }
    if (key === "series") { pickSeries(value); }
    if ((key === "token" || key === "key") && value !== "" && t >= 0 && t < T) {
      state.pin = { side: key === "key" ? "key" : "query", index: t };
    }
    if (key === "heads") {
      const on = value.split(",").filter((v) => v !== "").map(Number);
      state.heads = state.heads.map((_, h) => on.includes(h) && h < H);
    }
  });
}

/* The view on screen as a standalone SVG picture (its markup in a foreignObject, the page's style inlined,
   each canvas as a picture): { svg, width, height }. */
function viewSvg() {
  const view = byId(state.view + "-view"), box = view.getBoundingClientRect();
  const copy = htmlNode("div", "", "", null);
  [document.querySelector("h1"), document.querySelector(".caption"), byId("review"), byId("cut-note"), view]
    .forEach((node) => copy.appendChild(node.cloneNode(true)));
  const inputs = view.querySelectorAll("input, option"), canvases = view.querySelectorAll("canvas");
  copy.querySelectorAll("input, option").forEach((node, i) => { /* what is ticked now, not what the page began with */
    const on = inputs[i].checked || inputs[i].selected;
    node.toggleAttribute(node.tagName === "OPTION" ? "selected" : "checked", Boolean(on));
  });
  copy.querySelectorAll("canvas").forEach((canvas, i) => {
    const img = htmlNode("img", canvas.className, "", null);
    img.setAttribute("src", canvases[i].toDataURL("image/png"));
    img.setAttribute("style", canvases[i].getAttribute("style") + "; image-rendering: pixelated");
    canvas.replaceWith(img);
  });
  /* a picture of the view, not of the page's controls: no help, no hover hint, each list as its choice (the head
     view keeps its readout: the weights of the token pinned) */
  copy.querySelectorAll(".export, .help, #model-readout, #text-readout, #word-readout")
    .forEach((node) => node.remove());
  const selects = view.querySelectorAll("select");
  copy.querySelectorAll("select").forEach((node, i) => {
    const picked = selects[i].selectedOptions[0];
    node.replaceWith(htmlNode("b", "", picked ? picked.textContent : "", null));
  });
  const style = document.querySelector("style").textContent;
  const top = document.querySelector("h1").getBoundingClientRect().top;
  const width = Math.ceil(Math.max(box.width, view.scrollWidth)), height = Math.ceil(box.bottom - top) + 16;
  /* no character XML 1.0 forbids (a review's BEL or ESC): the SVG must parse, and the PNG is drawn from it */
  const body = new XMLSerializer().serializeToString(copy).replace(/[^\t\n\r\u0020-\ufffd]/g, "");
  const svg = "<svg xmlns=\"" + SVG_NS + "\" width=\"" + width + "\" height=\"" + height +
    "\"><foreignObject width=\"100%\" height=\"100%\"><div xmlns=\"" + document.documentElement.namespaceURI +
    "\" style=\"font: 14px system-ui, sans-serif; background: #fff\"><style>" + style + "</style>" + body +
    "</div></foreignObject></svg>";
  return { svg, width, height };
}

/* Hand `blob` to the browser's download, named after the page's short name (never the review: a file name
   holds 255 bytes) and the view. */
function download(blob, kind) {
  const link = htmlNode("a", "", "", document.body);
  link.setAttribute("download", data.names.file + " - " + state.view + " view." + kind);
  link.setAttribute("href", URL.createObjectURL(blob));
  link.click();
  link.remove();
}

function exportSvg() {
  download(new Blob([viewSvg().svg], { type: "image/svg+xml" }), "svg");
}

/* The same picture as a PNG at twice the screen's pixels (once, for a view over MAX_PNG_PX pixels): the SVG
   drawn onto a canvas. */
function exportPng() {
  const { svg, width, height } = viewSvg(), image = new Image(), scale = width * height > MAX_PNG_PX ? 1 : 2;
  image.onload = () => {
    const canvas = document.createElement("canvas");
    canvas.width = width * scale;
    canvas.height = height * scale;
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(image, 0, 0, canvas.width, canvas.height);
    canvas.toBlob((blob) => download(blob, "png"), "image/png");
  };
  image.setAttribute("src", "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svg));
}

/* The review under the heading, three lines of it until "show all"; where the model read only part of it, how
   much (the text tab marks the cut). */
function buildReview() {
  const review = data.review;
  if (!review) { return; }
  const box = byId("review"), more = byId("review-more");
  box.textContent = review.text;
  box.hidden = false;
  more.hidden = box.scrollHeight <= box.clientHeight + 1;
  more.addEventListener("click", () => {
    more.textContent = box.classList.toggle("clamped") ? "show all" : "show less";
  });
  if (review.read < review.total) {
    const note = byId("cut-note");
    note.hidden = false;
    note.textContent = "The model read the first " + review.read + " of this text\u2019s " + review.total +
      " tokens (the length it takes): the maps end there, and the text tab marks the cut.";
  }
}

buildReview();
buildHeadControls();
buildTokens();
buildModel();
buildWords();
buildText();
VIEWS.forEach((view) => byId("mode-" + view).addEventListener("click", () => { state.view = view; draw(); }));
scaleSwitch.addEventListener("change", () => { state.scale = scaleSwitch.value; draw(); });
byId("kind-switch").hidden = !data.kinds;
kindSwitch.addEventListener("change", () => { pickKind(kindSwitch.value); draw(); });
byId("export").addEventListener("click", exportSvg);
byId("export-png").addEventListener("click", exportPng);
fromHash();
onChange(draw);
window.addEventListener("hashchange", () => { fromHash(); draw(); });
draw();
