// One head's attention map on a canvas: its weights as cells, token labels on both axes, a
// caption under the cells, and a hover tip naming the cell under the pointer.

const LABEL_FONT = "10px system-ui, sans-serif";
const LABEL_LINE = 11;  // px between two labels' centres at the least (the font's 10 px and a gap)
const LABEL_HALF = 5;   // half a label's height, for its box
const MEASURE = document.createElement("canvas").getContext("2d");

// A token as drawn: a space, a newline and a tab as visible glyphs (open box, return, tab).
function tokenGlyph(t) {
  return String(t).replace(/ /g, "\u2423").replace(/\n/g, "\u21b5").replace(/\t/g, "\u21e5");
}

function labelWidth(text) {
  MEASURE.font = LABEL_FONT;
  return Math.ceil(MEASURE.measureText(text).width);
}

// Every how many cells of side c a label is drawn so that labels never overlap: 1 when a cell
// is a label's line or more.
function labelStep(c) { return Math.max(1, Math.ceil(LABEL_LINE / c)); }

// The widest of the labels drawn (every step-th token, as glyphs).
function widestLabel(tokens, step) {
  let most = 0;
  tokens.forEach((t, i) => { if (i % step === 0) most = Math.max(most, labelWidth(tokenGlyph(t))); });
  return most;
}

// Where a map's parts go for cells of side c: margins left (query labels) and top (key labels)
// that fit the widest label drawn, and the canvas size with a caption line under the cells.
function mapLayout(layer, c) {
  const step = labelStep(c), tq = layer.queries.length, tk = layer.keys.length;
  const left = widestLabel(layer.queries, step) + 11, top = widestLabel(layer.keys, step) + 11;
  return { c, step, left, top, w: left + c * tk + 4, h: top + c * tq + 18 };
}

// One layout for all the maps of an example, so that their cells line up column by column
// (a seq2seq model's encoder, decoder and cross rows): the widest margins and canvas.
function sharedLayout(layers, c) {
  const all = layers.map((l) => mapLayout(l, c));
  const left = Math.max(...all.map((a) => a.left)), top = Math.max(...all.map((a) => a.top));
  const caption = labelWidth("head " + Math.max(...layers.map((l) => l.heads - 1)) + " \u00b7 first 0.00") + 4;
  const w = Math.max(...layers.map((l) => left + c * l.keys.length + 4), left + caption);
  return (layer) => ({ c, step: labelStep(c), left, top, w, h: top + c * layer.queries.length + 18 });
}

// The weights' cells, one pixel each, scaled up c times without smoothing.
function drawCells(g, w, L) {
  const cells = document.createElement("canvas");
  cells.width = w.cols; cells.height = w.rows;
  const cg = cells.getContext("2d"), img = cg.createImageData(w.cols, w.rows);
  for (let k = 0; k < w.rows * w.cols; ++k) {
    img.data.set(VIRIDIS_BYTES[Math.round((w.q[k] / w.scale) * 255)], 4 * k);
    img.data[4 * k + 3] = 255;
  }
  cg.putImageData(img, 0, 0);
  g.imageSmoothingEnabled = false;
  g.drawImage(cells, L.left, L.top, L.c * w.cols, L.c * w.rows);
}

// The token labels, every L.step-th, each with a tick to its row or column (so that thinned
// labels read as spaced, not as neighbours): queries right-aligned left of the rows, keys
// rotated above the columns. Returns the boxes drawn, [index, text, x0, y0, x1, y1] in pixels.
function drawLabels(g, layer, L) {
  const boxes = { q: [], k: [] };
  g.font = LABEL_FONT; g.fillStyle = "#333"; g.strokeStyle = "#999"; g.textBaseline = "middle";
  g.textAlign = "right";
  layer.queries.forEach((t, i) => {
    if (i % L.step) return;
    const text = tokenGlyph(t), x = L.left - 5, y = L.top + (i + 0.5) * L.c;
    g.fillText(text, x, y);
    g.beginPath(); g.moveTo(L.left - 3, y); g.lineTo(L.left, y); g.stroke();
    boxes.q.push([i, text, x - labelWidth(text), y - LABEL_HALF, x, y + LABEL_HALF]);
  });
  g.textAlign = "left";
  layer.keys.forEach((t, j) => {
    if (j % L.step) return;
    const text = tokenGlyph(t), x = L.left + (j + 0.5) * L.c, y = L.top - 5;
    g.save(); g.translate(x, y); g.rotate(-Math.PI / 2); g.fillText(text, 0, 0); g.restore();
    g.beginPath(); g.moveTo(x, L.top - 3); g.lineTo(x, L.top); g.stroke();
    boxes.k.push([j, text, x - LABEL_HALF, y - labelWidth(text), x + LABEL_HALF, y]);
  });
  return boxes;
}

// The tip for cell (i, j) of a head: where it is and its weight, then the head's summary.
function cellTip(layer, head, w, i, j, summary) {
  return "layer " + layer.name + ", head " + head + "\nquery " + tokenGlyph(layer.queries[i]) + " (position " + i +
         ") \u2192 key " + tokenGlyph(layer.keys[j]) + " (position " + j + ")\nweight " +
         (w.q[i * w.cols + j] / w.scale).toFixed(4) + "\n" + summaryLine(summary, layer);
}

// A head's map on a canvas laid out by L, with its caption; data-w holds the 16-bit weights
// drawn (rows ";", keys ","; w = value / data-scale), data-labels the label boxes, data-summary
// the head's summary (headSummary), data-left/top/cell where the cells are, for the browser tests.
function drawMap(layer, w, head, L, cls, attrs) {
  const rows = [];
  for (let i = 0; i < w.rows; ++i) rows.push(w.q.subarray(i * w.cols, (i + 1) * w.cols).join(","));
  const summary = headSummary(w, layer.causal);
  const canvas = el("canvas", Object.assign({ width: L.w, height: L.h, class: cls, "data-layer": layer.name,
    "data-head": head, "data-scale": w.scale, "data-w": rows.join(";"), "data-left": L.left, "data-top": L.top,
    "data-cell": L.c, "data-summary": JSON.stringify(summary) }, attrs));
  const g = canvas.getContext("2d");
  drawCells(g, w, L);
  canvas.setAttribute("data-labels", JSON.stringify(drawLabels(g, layer, L)));
  g.textAlign = "left"; g.textBaseline = "alphabetic";
  g.fillText(headCaption(head, summary), L.left, L.top + L.c * w.rows + 13);
  canvas.addEventListener("mousemove", (e) => {
    const j = Math.floor((e.offsetX - L.left) / L.c), i = Math.floor((e.offsetY - L.top) / L.c);  // inside the border
    if (i >= 0 && i < w.rows && j >= 0 && j < w.cols) canvas.setAttribute("data-tip", cellTip(layer, head, w, i, j, summary));
    else canvas.setAttribute("data-tip", "layer " + layer.name + ", head " + head + "\n" + summaryLine(summary, layer));
  });
  return canvas;
}
