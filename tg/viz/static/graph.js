// Directed acyclic graphs as SVG: nodes in layers by longest path from the sources (sources on top), ordered within
// a layer by the mean position of their inputs; wheel zooms, drag pans. Input: {nodes: [[label, op, title]], edges: [[src, dst]]}
// with every edge's source listed before its destination.
"use strict";
const SVG_NS = "http://www.w3.org/2000/svg";
const OP_COLORS = [[/^(LOAD|DEFINE_GLOBAL|DEFINE_LOCAL|DEFINE_VAR|BUFFER)$/, "#2d5a7b"], [/^(STORE|SINK)$/, "#7b3d2d"],
  [/^(REDUCE_AXIS|WMMA|RANGE|ENDRANGE|SPECIAL)$/, "#6b4f8a"], [/^(CONST|VIEW|VALID)$/, "#3a4150"], [/^(KERNEL)$/, "#4f6e2f"], [/^(COPY)$/, "#7a6a2a"]];
function opColor(op) { for (const [re, c] of OP_COLORS) if (re.test(op)) return c; return "#35563f"; }

function layoutGraph(g) {
  const n = g.nodes.length, layer = new Array(n).fill(0), preds = Array.from({length: n}, () => []);
  for (const [s, d] of g.edges) { preds[d].push(s); layer[d] = Math.max(layer[d], layer[s] + 1); }
  const layers = [];
  for (let i = 0; i < n; i++) (layers[layer[i]] ||= []).push(i);
  const size = g.nodes.map(([label]) => { const lines = label.split("\n"); return [Math.max(...lines.map(l => l.length)) * 7 + 14, lines.length * 14 + 8]; });
  const x = new Array(n).fill(0), y = new Array(n).fill(0);
  let top = 0, width = 0;
  for (const row of layers) {
    if (!row) continue;
    const key = i => preds[i].length ? preds[i].reduce((a, p) => a + x[p], 0) / preds[i].length : i;
    row.sort((a, b) => key(a) - key(b));
    let left = 0, tallest = 0;
    for (const i of row) { x[i] = left + size[i][0] / 2; left += size[i][0] + 16; tallest = Math.max(tallest, size[i][1]); }
    for (const i of row) y[i] = top + tallest / 2;
    top += tallest + 36; width = Math.max(width, left);
  }
  for (const row of layers) {  // center each layer
    if (!row) continue;
    const last = row[row.length - 1], span = x[last] + size[last][0] / 2, shift = (width - span) / 2;
    for (const i of row) x[i] += shift;
  }
  return {x, y, size, width: Math.max(width, 100), height: Math.max(top, 60)};
}

function el(tag, attrs, parent) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}

function drawGraph(container, g, caption) {
  container.textContent = "";
  if (caption) { const c = document.createElement("div"); c.className = "cap"; c.textContent = caption; container.appendChild(c); }
  if (!g) { const p = document.createElement("div"); p.className = "cap"; p.style.top = "20px"; p.textContent = "graph too large to draw: see the listing below"; container.appendChild(p); return null; }
  const L = layoutGraph(g), svg = el("svg", {"data-nodes": g.nodes.length}, container);
  const root = el("g", {}, svg);
  for (const [s, d] of g.edges) {
    const x1 = L.x[s], y1 = L.y[s] + L.size[s][1] / 2, x2 = L.x[d], y2 = L.y[d] - L.size[d][1] / 2, m = (y1 + y2) / 2;
    el("path", {d: `M${x1},${y1} C${x1},${m} ${x2},${m} ${x2},${y2}`, fill: "none", stroke: "#5b6275", "stroke-width": 1}, root);
  }
  g.nodes.forEach(([label, op, title], i) => {
    const [w, h] = L.size[i], node = el("g", {class: "node", transform: `translate(${L.x[i] - w / 2},${L.y[i] - h / 2})`}, root);
    el("title", {}, node).textContent = title;
    el("rect", {width: w, height: h, rx: 4, fill: opColor(op), stroke: "#0008"}, node);
    label.split("\n").forEach((line, j) => { const t = el("text", {x: 7, y: 15 + j * 14, fill: "#eef", "font-size": 12}, node); t.textContent = line; });
  });
  let vb = [-20, -20, L.width + 40, L.height + 40];
  const apply = () => svg.setAttribute("viewBox", vb.join(" "));
  apply();
  svg.addEventListener("wheel", e => {
    e.preventDefault();
    const r = svg.getBoundingClientRect(), f = e.deltaY > 0 ? 1.2 : 1 / 1.2;
    const px = vb[0] + (e.clientX - r.left) / r.width * vb[2], py = vb[1] + (e.clientY - r.top) / r.height * vb[3];
    vb = [px - (px - vb[0]) * f, py - (py - vb[1]) * f, vb[2] * f, vb[3] * f]; apply();
  }, {passive: false});
  let drag = null;
  svg.addEventListener("mousedown", e => { drag = [e.clientX, e.clientY, vb[0], vb[1]]; });
  window.addEventListener("mouseup", () => { drag = null; });
  svg.addEventListener("mousemove", e => {
    if (!drag) return;
    const r = svg.getBoundingClientRect(), s = Math.max(vb[2] / r.width, vb[3] / r.height);
    vb[0] = drag[2] - (e.clientX - drag[0]) * s; vb[1] = drag[3] - (e.clientY - drag[1]) * s; apply();
  });
  return svg;
}
