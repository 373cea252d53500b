// The viewer: loads the recording from tg's server, fills the kernel list, shows a selected kernel's schedule
// neighbourhood and codegen steps, and draws the timeline. Marks what it rendered in #rendered (read by tg's tests).
"use strict";
const $ = id => document.getElementById(id);
const state = {data: null, shown: [], selected: -1, programs: new Map(), schedules: new Map(), step: null, marks: {}};

function mark(key, value) {
  state.marks[key] = value;
  $("rendered").textContent = Object.entries(state.marks).map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join(" ");
  document.body.dataset[key] = value;
}
const fmtSeconds = s => s >= 1 ? `${s.toFixed(3)} s` : s >= 1e-3 ? `${(s * 1e3).toFixed(3)} ms` : `${(s * 1e6).toFixed(1)} us`;
const fmtBytes = b => b >= 1 << 30 ? `${(b / (1 << 30)).toFixed(2)} GiB` : b >= 1 << 20 ? `${(b / (1 << 20)).toFixed(2)} MiB` : b >= 1024 ? `${(b / 1024).toFixed(1)} KiB` : `${b} B`;
async function getJSON(url) { const r = await fetch(url); if (!r.ok) throw new Error(`${url}: ${r.status}`); return r.json(); }

function renderRow(i) {
  const run = state.data.runs[state.shown[i]], row = document.createElement("div");
  row.className = `krow ${run.kind}${state.shown[i] === state.selected ? " sel" : ""}`;
  row.innerHTML = `<span class="t"></span><span class="i"></span> <span class="n"></span> <span class="d"></span>`;
  row.querySelector(".i").textContent = `#${state.shown[i]}`;
  row.querySelector(".n").textContent = run.name;
  row.querySelector(".d").textContent = run.device;
  row.querySelector(".t").textContent = run.time_s ? fmtSeconds(run.time_s) : "";
  row.onclick = () => select(state.shown[i]);
  return row;
}

function applyFilter(text) {
  const q = text.trim().toLowerCase(), runs = state.data.runs;
  state.shown = [];
  for (let i = 0; i < runs.length; i++) if (!q || runs[i].name.toLowerCase().includes(q) || runs[i].device.toLowerCase().includes(q)) state.shown.push(i);
  $("kernel-count").textContent = `(${state.shown.length}${q ? ` of ${runs.length}` : ""})`;
  state.list.setCount(state.shown.length);
}

function kernelInfo(run) {
  const p = run.program != null ? state.data.programs[run.program] : null, bufs = state.data.buffers;
  const lines = [`#${state.selected} ${run.kind} ${run.name} on ${run.device}, schedule ${run.schedule}${run.time_s ? `, ${fmtSeconds(run.time_s)}` : ""}`];
  if (p) {
    lines.push(`shape ${JSON.stringify(p.shape)}  global ${JSON.stringify(p.global)}${p.local ? ` local ${JSON.stringify(p.local)}` : ""}  ${p.flops} flops  ${fmtBytes(p.mem)} moved${run.time_s ? ` (${(p.flops / run.time_s / 1e9).toFixed(2)} GFLOPS)` : ""}`);
    lines.push(`ops ${Object.entries(p.ops).map(([k, v]) => `${k}x${v}`).join(" ")}   opts ${p.opts.join(", ") || "none"}`);
  } else if (run.kind === "kernel") lines.push("compiled before VIZ was on: no codegen steps recorded");
  lines.push(`buffers ${run.bufs.map((b, j) => `${j < run.outs ? "out" : "in"} ${bufs[b].dtype}[${bufs[b].size}] ${fmtBytes(bufs[b].nbytes)}`).join(", ")}`);
  return lines.join("\n");
}

function scheduleGraph(index) {
  // the kernel, its buffers, and the other kernels/copies of its schedule that read or write them
  const runs = state.data.runs, me = runs[index], mine = new Set(me.bufs), nodes = [], edges = [], bufNode = new Map();
  const near = [];
  for (let i = 0; i < runs.length; i++) if (runs[i].schedule === me.schedule && (i === index || runs[i].bufs.some(b => mine.has(b)))) near.push(i);
  for (const i of near) {
    const r = runs[i], b = state.data.buffers;
    const bufLabel = id => `buf ${id}\n${b[id].dtype}[${b[id].size}]`;
    for (const id of r.bufs.slice(r.outs)) if (!bufNode.has(id)) { bufNode.set(id, nodes.length); nodes.push([bufLabel(id), "BUFFER", `${b[id].device} ${fmtBytes(b[id].nbytes)}`]); }
    const k = nodes.length;
    nodes.push([`${i === index ? "▶ " : ""}#${i} ${r.name}`, r.kind === "copy" ? "COPY" : "KERNEL", `${r.device} ${r.time_s ? fmtSeconds(r.time_s) : ""}`]);
    for (const id of r.bufs.slice(r.outs)) edges.push([bufNode.get(id), k]);
    for (const id of r.bufs.slice(0, r.outs)) { bufNode.set(id, nodes.length); nodes.push([bufLabel(id), "BUFFER", `${b[id].device} ${fmtBytes(b[id].nbytes)}`]); edges.push([k, nodes.length - 1]); }
  }
  edges.sort((a, b) => a[1] - b[1]);
  return {nodes, edges};
}

function layout(hasGraph, hasText) {
  const view = $("step-view");
  view.classList.toggle("text-only", !hasGraph);
  view.classList.toggle("graph-only", hasGraph && !hasText);
  $("graph").style.display = hasGraph ? "" : "none";
}

function showStep(name) {
  state.step = name;
  for (const b of $("steps").children) b.classList.toggle("sel", b.textContent === name);
  const info = $("step-info"), text = $("step-text"), graph = $("graph");
  info.textContent = ""; text.textContent = "";
  if (name === "schedule") {
    const g = scheduleGraph(state.selected);
    info.innerHTML = `<div class="kv">the kernel, its buffers and the kernels of schedule ${state.data.runs[state.selected].schedule} that share them</div>`;
    const svg = drawGraph(graph, g, "schedule");
    layout(true, false);
    mark("step", name); mark("graphnodes", svg ? g.nodes.length : 0);
    return;
  }
  const run = state.data.runs[state.selected];
  const steps = name.startsWith("scheduler ") ? state.schedules.get(run.schedule) : state.programs.get(run.program), step = steps.find(s => s.name === name);
  for (const [k, v] of Object.entries(step.info)) { const d = document.createElement("div"); d.className = "kv"; d.textContent = `${k}: ${v}`; info.appendChild(d); }
  if (step.rewrite_count) {
    const h = document.createElement("div"); h.textContent = `${step.rewrite_count} graph rewrites; rules fired:`; info.appendChild(h);
    for (const [rule, count] of Object.entries(step.fired)) { const d = document.createElement("div"); d.className = "kv"; d.textContent = `${count}x ${rule}`; info.appendChild(d); }
    const h2 = document.createElement("div"); h2.textContent = `rewrites (first ${step.rewrites.length}; click for before/after):`; info.appendChild(h2);
    step.rewrites.forEach(rw => {
      const d = document.createElement("div"); d.className = "rule"; d.textContent = rw.text;
      d.onclick = () => {
        for (const x of info.querySelectorAll(".rule")) x.classList.remove("sel");
        d.classList.add("sel"); graph.textContent = "";
        const before = document.createElement("div"), after = document.createElement("div");
        before.className = after.className = "half"; graph.append(before, after); layout(true, !!step.text);
        drawGraph(before, rw.before, "before"); drawGraph(after, rw.after, `after: ${rw.rules.join(" · ")}`);
      };
      info.appendChild(d);
    });
  }
  const svg = step.graph ? drawGraph(graph, step.graph, name) : null;
  layout(!!step.graph, !!step.text);
  text.textContent = step.text || "";
  mark("step", name); mark("graphnodes", svg ? step.graph.nodes.length : 0);
}

async function select(index, stepName) {
  const run = state.data.runs[index];
  if (!run) return;
  state.selected = index; state.list.refresh();
  const pos = state.shown.indexOf(index);
  if (pos >= 0) state.list.scrollTo(pos);
  $("kernel-info").textContent = kernelInfo(run);
  if (!state.schedules.has(run.schedule)) state.schedules.set(run.schedule, await getJSON(`/api/schedule/${run.schedule}`));
  let names = ["schedule", ...state.schedules.get(run.schedule).map(s => s.name)];
  if (run.program != null) {
    if (!state.programs.has(run.program)) state.programs.set(run.program, await getJSON(`/api/program/${run.program}`));
    names = names.concat(state.programs.get(run.program).map(s => s.name));
  }
  const nav = $("steps"); nav.textContent = "";
  for (const n of names) { const b = document.createElement("button"); b.textContent = n; b.onclick = () => { showStep(n); writeHash(); }; nav.appendChild(b); }
  const codegen = names.find(n => n !== "schedule" && !n.startsWith("scheduler "));  // a kernel opens on its first codegen step
  showStep(names.includes(stepName) ? stepName : names.includes(state.step) ? state.step : codegen ?? names[0]);
  writeHash(); mark("selected", index);
  if (state.timeline) mark("highlighted", state.timeline.highlight(index) ? index : "none");
}

function writeHash() { history.replaceState(null, "", `#kernel=${state.selected}&step=${encodeURIComponent(state.step)}`); }
function readHash() { return Object.fromEntries(location.hash.slice(1).split("&").filter(Boolean).map(kv => kv.split("=").map(decodeURIComponent))); }

async function main() {
  const [data, events] = await Promise.all([getJSON("/api/kernels"), getJSON("/api/timeline")]);
  state.data = data;
  $("source").textContent = data.source;
  $("status").textContent = `${data.runs.length} kernels and copies in ${data.schedules} schedules, ${data.programs.length} compiled programs`;
  state.list = new VirtualList($("kernel-list"), 20, renderRow);
  $("filter").addEventListener("input", e => applyFilter(e.target.value));
  applyFilter("");
  mark("kernels", data.runs.length); mark("rows", $("kernel-list").querySelectorAll(".krow").length);
  const hover = $("timeline-hover");
  state.timeline = new Timeline($("timeline-canvas"), events, ev => {
    const i = ev.args && ev.args.run !== undefined ? ev.args.run : data.runs.findIndex(r => r.name === ev.name);
    if (i >= 0) select(i);
  }, text => { hover.textContent = text; });
  mark("timeline", state.timeline.count); mark("counters", state.timeline.counterCount);
  const want = readHash();
  if (data.runs.length) await select(Math.min(Number(want.kernel ?? 0) || 0, data.runs.length - 1), want.step);
}

main().catch(e => { $("status").textContent = `error: ${e.message}`; mark("error", e.message); });
