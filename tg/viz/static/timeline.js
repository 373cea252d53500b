// The PROFILE timeline on a canvas: one track per device and queue (Chrome trace "X" events grouped by pid/tid, named
// by the "M" metadata events) and one per counter ("C" events by pid and name, drawn as steps scaled to their maximum),
// a time axis on top; wheel zooms around the pointer, drag pans, a click reports the event; highlight() marks one.
"use strict";
const TRACK_H = 22, AXIS_H = 18, LABEL_W = 150;
function nameColor(name) { let h = 0; for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0; return `hsl(${h % 360},45%,42%)`; }
function fmtTime(us) { const a = Math.abs(us); return a >= 1e6 ? `${+(us / 1e6).toFixed(4)} s` : a >= 1e3 ? `${+(us / 1e3).toFixed(4)} ms` : a >= 1 ? `${+us.toFixed(3)} us` : `${+(us * 1e3).toFixed(1)} ns`; }
function tickStep(min) { const p = Math.pow(10, Math.floor(Math.log10(min))); return [1, 2, 5, 10].map(m => m * p).find(s => s >= min); }

class Timeline {
  constructor(canvas, events, onPick, onHover) {
    this.canvas = canvas; this.onPick = onPick; this.onHover = onHover;
    const procs = {}, threads = {}, tracks = new Map();
    for (const e of events) {
      if (e.ph === "M" && e.name === "process_name") procs[e.pid] = e.args.name;
      if (e.ph === "M" && e.name === "thread_name") threads[`${e.pid}:${e.tid}`] = e.args.name;
    }
    for (const e of events) {
      if (e.ph !== "X") continue;
      const key = `${e.pid}:${e.tid}`;
      if (!tracks.has(key)) tracks.set(key, {label: `${procs[e.pid] ?? e.pid} / ${threads[key] ?? e.tid}`, events: []});
      tracks.get(key).events.push(e);
    }
    const counters = new Map();
    for (const e of events) {
      if (e.ph !== "C") continue;
      for (const [series, value] of Object.entries(e.args || {})) {
        const key = `${e.pid}:${e.name}:${series}`;
        if (!counters.has(key)) counters.set(key, {label: `${procs[e.pid] ?? e.pid} ${e.name}`, events: [], counter: true, max: 0});
        const c = counters.get(key);
        c.events.push({ts: e.ts, value}); c.max = Math.max(c.max, value);
      }
    }
    this.tracks = [...tracks.values()].sort((a, b) => a.label.localeCompare(b.label));
    this.tracks.push(...[...counters.values()].sort((a, b) => a.label.localeCompare(b.label)));
    for (const t of this.tracks) t.events.sort((a, b) => a.ts - b.ts);
    this.counterCount = counters.size; this.highlighted = null;
    const all = this.tracks.flatMap(t => t.events);
    this.count = all.length - this.tracks.filter(t => t.counter).reduce((n, t) => n + t.events.length, 0);
    this.t0 = all.length ? Math.min(...all.map(e => e.ts)) : 0;
    const t1 = all.length ? Math.max(...all.map(e => e.ts + (e.dur || 0))) : 1;
    this.span = Math.max(t1 - this.t0, 1e-3);
    this.view = [0, this.span * 1.02];  // shown range, microseconds after t0
    this.bind(); this.draw();
  }
  xOf(us, w) { return LABEL_W + (us - this.view[0]) / (this.view[1] - this.view[0]) * (w - LABEL_W); }
  usOf(x, w) { return this.view[0] + (x - LABEL_W) / (w - LABEL_W) * (this.view[1] - this.view[0]); }
  eventAt(x, y) {
    const t = this.tracks[Math.floor((y - AXIS_H) / TRACK_H)];
    if (!t || t.counter || x < LABEL_W) return null;
    const us = this.usOf(x, this.canvas.clientWidth) + this.t0, slack = 3 * (this.view[1] - this.view[0]) / this.canvas.clientWidth;
    return t.events.find(e => e.ts - slack <= us && us <= e.ts + (e.dur || 0) + slack) || null;
  }
  bind() {
    const c = this.canvas;
    c.addEventListener("wheel", e => {
      e.preventDefault();
      const w = c.clientWidth, at = this.usOf(e.offsetX, w), f = e.deltaY > 0 ? 1.25 : 0.8;
      this.view = [at - (at - this.view[0]) * f, at + (this.view[1] - at) * f]; this.draw();
    }, {passive: false});
    let drag = null, moved = false;
    c.addEventListener("mousedown", e => { drag = [e.offsetX, this.view[0], this.view[1]]; moved = false; });
    window.addEventListener("mouseup", () => { drag = null; });
    c.addEventListener("mousemove", e => {
      if (drag) {
        const d = (e.offsetX - drag[0]) / (c.clientWidth - LABEL_W) * (drag[2] - drag[1]);
        if (Math.abs(e.offsetX - drag[0]) > 2) moved = true;
        this.view = [drag[1] - d, drag[2] - d]; this.draw(); return;
      }
      const ev = this.eventAt(e.offsetX, e.offsetY);
      this.onHover(ev ? `${ev.name}: ${fmtTime(ev.dur || 0)} at ${fmtTime(ev.ts - this.t0)}` : "");
    });
    c.addEventListener("click", e => { if (!moved) { const ev = this.eventAt(e.offsetX, e.offsetY); if (ev) this.onPick(ev); } });
    new ResizeObserver(() => this.draw()).observe(c);
  }
  draw() {
    const c = this.canvas, dpr = window.devicePixelRatio || 1, w = c.clientWidth, h = c.clientHeight;
    if (!w || !h) return;
    c.width = w * dpr; c.height = h * dpr;
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = "#111318"; g.fillRect(0, 0, w, h);
    g.font = "11px monospace"; g.textBaseline = "middle";
    const step = tickStep((this.view[1] - this.view[0]) * 90 / Math.max(w - LABEL_W, 1));  // a tick every 90 px or more
    g.fillStyle = "#8a90a0"; g.strokeStyle = "#2a2e38";
    for (let t = Math.ceil(this.view[0] / step) * step; t < this.view[1]; t += step) {
      const x = this.xOf(t, w); g.beginPath(); g.moveTo(x, AXIS_H); g.lineTo(x, h); g.stroke(); g.fillText(fmtTime(t), x + 2, AXIS_H / 2);
    }
    this.tracks.forEach((t, row) => {
      const y = AXIS_H + row * TRACK_H;
      if (t.counter) this.drawCounter(g, t, y, w);
      else for (const e of t.events) {
        const x0 = Math.max(this.xOf(e.ts - this.t0, w), LABEL_W), x1 = Math.min(this.xOf(e.ts - this.t0 + (e.dur || 0), w), w);
        if (x1 < LABEL_W || x0 > w) continue;
        g.fillStyle = nameColor(e.name); g.fillRect(x0, y + 2, Math.max(x1 - x0, 1), TRACK_H - 4);
        if (x1 - x0 > 40) { g.fillStyle = "#fff"; g.save(); g.beginPath(); g.rect(x0, y, x1 - x0 - 2, TRACK_H); g.clip(); g.fillText(e.name, x0 + 3, y + TRACK_H / 2); g.restore(); }
        if (e === this.highlighted) { g.strokeStyle = "#ffd040"; g.lineWidth = 2; g.strokeRect(x0 - 1, y + 1, Math.max(x1 - x0, 1) + 2, TRACK_H - 2); g.lineWidth = 1; g.strokeStyle = "#2a2e38"; }
      }
      g.fillStyle = "#1c1f26"; g.fillRect(0, y, LABEL_W, TRACK_H);
      g.fillStyle = "#c9cdd8"; g.fillText(t.label, 4, y + TRACK_H / 2);
    });
    if (!this.tracks.length) { g.fillStyle = "#8a90a0"; g.fillText("no timeline events (PROFILE records kernels and copies on queue-driven devices)", 10, AXIS_H + 12); }
    c.dataset.events = this.count; c.dataset.tracks = this.tracks.length;
  }
  drawCounter(g, t, y, w) {
    g.fillStyle = "#4a78a8"; g.beginPath(); g.moveTo(LABEL_W, y + TRACK_H);
    t.events.forEach((e, i) => {
      const x0 = Math.max(this.xOf(e.ts - this.t0, w), LABEL_W), next = t.events[i + 1];
      const x1 = next ? Math.min(this.xOf(next.ts - this.t0, w), w) : w, h = t.max ? (TRACK_H - 4) * e.value / t.max : 0;
      if (x1 < LABEL_W || x0 > w) return;
      g.lineTo(x0, y + TRACK_H - h); g.lineTo(x1, y + TRACK_H - h);
    });
    g.lineTo(w, y + TRACK_H); g.closePath(); g.fill();
  }
  highlight(run) {
    // mark the event of recorded run `run` and bring it into view
    this.highlighted = this.tracks.flatMap(t => t.counter ? [] : t.events).find(e => e.args && e.args.run === run) || null;
    const e = this.highlighted;
    if (e && (e.ts - this.t0 < this.view[0] || e.ts - this.t0 > this.view[1])) {
      const span = this.view[1] - this.view[0], mid = e.ts - this.t0 + (e.dur || 0) / 2;
      this.view = [mid - span / 2, mid + span / 2];
    }
    this.draw();
    return this.highlighted !== null;
  }
}
