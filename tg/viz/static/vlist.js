// A virtualized list: only the rows in view (plus a margin) exist in the DOM, so 10k+ rows scroll smoothly.
"use strict";
class VirtualList {
  constructor(container, rowHeight, renderRow) {
    this.el = container; this.rowHeight = rowHeight; this.renderRow = renderRow; this.count = 0;
    this.spacer = document.createElement("div"); this.spacer.className = "spacer";
    this.el.appendChild(this.spacer);
    this.rows = new Map();  // row index -> element currently shown
    this.el.addEventListener("scroll", () => this.draw());
    new ResizeObserver(() => this.draw()).observe(this.el);
  }
  setCount(n) {
    this.count = n; this.spacer.style.height = `${n * this.rowHeight}px`;
    for (const el of this.rows.values()) el.remove();
    this.rows.clear(); this.draw();
  }
  refresh() { for (const el of this.rows.values()) el.remove(); this.rows.clear(); this.draw(); }
  scrollTo(i) {
    const top = i * this.rowHeight, view = this.el.clientHeight;
    if (top < this.el.scrollTop || top + this.rowHeight > this.el.scrollTop + view) this.el.scrollTop = Math.max(0, top - view / 2);
    this.draw();
  }
  draw() {
    const margin = 10, view = this.el.clientHeight || 600;
    const first = Math.max(0, Math.floor(this.el.scrollTop / this.rowHeight) - margin);
    const last = Math.min(this.count, Math.ceil((this.el.scrollTop + view) / this.rowHeight) + margin);
    for (const [i, el] of this.rows) if (i < first || i >= last) { el.remove(); this.rows.delete(i); }
    for (let i = first; i < last; i++) {
      if (this.rows.has(i)) continue;
      const el = this.renderRow(i);
      el.style.top = `${i * this.rowHeight}px`;
      this.el.appendChild(el); this.rows.set(i, el);
    }
  }
}
