/* Small DOM helpers and the heads' colours, shared by every view. */

export const SVG_NS = "http://www.w3.org/2000/svg";
export const DARK = "#333333";
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf"];

export function byId(id) {
  return document.getElementById(id);
}

export function svgNode(name, attrs, parent) {
  const node = document.createElementNS(SVG_NS, name);
  Object.entries(attrs).forEach(([k, v]) => node.setAttribute(k, v));
  if (parent) { parent.appendChild(node); }
  return node;
}

export function htmlNode(name, className, text, parent) {
  const node = document.createElement(name);
  if (className) { node.className = className; }
  if (text) { node.textContent = text; }
  if (parent) { parent.appendChild(node); }
  return node;
}

export function colorOf(h) {
  return COLORS[h % COLORS.length];
}

export function swatch(color, parent) {
  htmlNode("span", "swatch", "", parent).style.background = color;
}

export function quoted(text) {
  return "\u201c" + text + "\u201d";
}
