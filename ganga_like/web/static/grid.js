// The subjob grid: one cell per subjob, coloured by status, drawn into one canvas as
// pixels (100,000 cells are one image, not 100,000 elements). Hover names the cell's
// subjob (and asks the server for its exit code and cause); a click peeks at its output.
"use strict";

const GRID_WIDTH = 960;  // pixels across, at most
const GRID_AREA = 960 * 540;  // pixels the cells may cover, at most
const MAX_CELL = 24;

function hexColour(hex) {
  const value = parseInt(hex.slice(1), 16);
  return [(value >> 16) & 255, (value >> 8) & 255, value & 255];
}

class SubjobGrid {
  constructor(canvas, tip, peek) {
    this.canvas = canvas;
    this.tip = tip;
    this.peek = peek;
    this.data = null;
    this.codes = new Uint8Array(0);
    this.details = new Map();
    this.hovered = -1;
    canvas.addEventListener("mousemove", (event) => this.hover(event));
    canvas.addEventListener("mouseleave", () => { this.tip.hidden = true; this.hovered = -1; });
    canvas.addEventListener("click", (event) => this.open(event));
  }

  // Cell size and columns for ``count`` cells: as large as fits, at least one pixel.
  static layout(count) {
    const fit = Math.floor(Math.sqrt(GRID_AREA / Math.max(count, 1)));
    const size = Math.max(1, Math.min(MAX_CELL, fit));
    const columns = Math.max(1, Math.min(count, Math.floor(GRID_WIDTH / size)));
    return { size, columns, rows: Math.ceil(count / columns) };
  }

  draw(data) {
    const before = this.codes;
    this.data = data;
    this.codes = Uint8Array.from(atob(data.codes), (c) => c.charCodeAt(0));
    for (const index of [...this.details.keys()]) {
      if (before[index] !== this.codes[index]) this.details.delete(index);  // it changed
    }
    const { size, columns, rows } = SubjobGrid.layout(data.count);
    Object.assign(this, { size, columns, rows });
    const width = columns * size;
    const height = Math.max(rows, 1) * size;
    const canvas = this.canvas;
    if (canvas.width !== width || canvas.height !== height) {
      canvas.width = width;
      canvas.height = height;
    }
    const context = canvas.getContext("2d");
    const image = context.createImageData(width, height);
    const pixels = image.data;
    const palette = data.colours.map(hexColour);
    const unknown = [0, 0, 0];
    const inner = size >= 5 ? size - 1 : size;  // a gap between cells large enough to see one
    for (let index = 0; index < data.count; index++) {
      const code = this.codes[index];
      const [r, g, b] = code < palette.length ? palette[code] : unknown;
      const x0 = (index % columns) * size;
      const y0 = Math.floor(index / columns) * size;
      for (let dy = 0; dy < inner; dy++) {
        let at = ((y0 + dy) * width + x0) * 4;
        for (let dx = 0; dx < inner; dx++, at += 4) {
          pixels[at] = r; pixels[at + 1] = g; pixels[at + 2] = b; pixels[at + 3] = 255;
        }
      }
    }
    context.putImageData(image, 0, 0);
    if (this.hovered >= 0) {
      this.describe(this.hovered);
      this.ask(this.hovered);
    }
  }

  // The subjob under the pointer, or -1.
  cellAt(event) {
    if (!this.data) return -1;
    const scale = this.canvas.width / this.canvas.clientWidth || 1;
    const column = Math.floor((event.offsetX * scale) / this.size);
    const row = Math.floor((event.offsetY * scale) / this.size);
    if (column < 0 || column >= this.columns) return -1;
    const index = row * this.columns + column;
    return index < this.data.count ? index : -1;
  }

  fqid(index) {
    return this.data.single ? String(this.data.job) : this.data.job + "." + index;
  }

  label(index) {
    const code = this.codes[index];
    return code < this.data.labels.length ? this.data.labels[code] : "unknown";
  }

  hover(event) {
    const index = this.cellAt(event);
    if (index < 0) { this.tip.hidden = true; this.hovered = -1; return; }
    this.tip.style.left = event.offsetX + 14 + "px";
    this.tip.style.top = event.offsetY + 14 + "px";
    if (index === this.hovered) return;
    this.hovered = index;
    this.describe(index);
    clearTimeout(this.asking);
    this.asking = setTimeout(() => this.ask(index), 120);  // not for every cell crossed
  }

  describe(index) {
    const known = this.details.get(index);
    const lines = [this.fqid(index) + "  " + this.label(index)];
    if (known) {
      const code = known.exit_code === null ? null : "exit code " + known.exit_code;
      if (code) lines.push(code);
      if (known.cause && known.cause !== code) lines.push(known.cause);
    }
    this.tip.textContent = lines.join("\n");
    this.tip.hidden = false;
  }

  async ask(index) {
    if (this.details.has(index) || index !== this.hovered) return;
    try {
      this.details.set(index, await getJSON("/api/detail/" + this.fqid(index)));
      if (index === this.hovered) this.describe(index);
    } catch (error) {
      /* the cell's status is shown; the rest comes at the next hover */
    }
  }

  async open(event) {
    const index = this.cellAt(event);
    if (index < 0) return;
    const fqid = this.fqid(index);
    this.peek.hidden = false;
    this.peek.textContent = "reading the output of " + fqid + "…";
    try {
      const output = await getJSON("/api/output/" + fqid);
      const parts = ["--- " + fqid + ": last lines of stdout"];
      parts.push(...(output.stdout === null ? ["(no stdout yet)"] : output.stdout));
      if (output.stderr && output.stderr.length) parts.push("--- stderr", ...output.stderr);
      this.peek.textContent = parts.join("\n");
    } catch (error) {
      this.peek.textContent = fqid + ": " + error.message;
    }
  }
}
