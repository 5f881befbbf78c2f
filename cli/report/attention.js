// Attention maps: every layer x head for each example, built when scrolled near.

// A layer's weights, decoded from 16-bit base64 (head_weights in cli/report_model.cpp): per head
// {q: Uint16Array of round(w * scale), rows x cols, row by row; rows; cols; scale}.
function decodeHeads(w) {
  return w.heads.map((b64) => {
    const bin = atob(b64), q = new Uint16Array(w.rows * w.cols);
    for (let k = 0; k < q.length; ++k) q[k] = bin.charCodeAt(2 * k) | (bin.charCodeAt(2 * k + 1) << 8);
    return { q, rows: w.rows, cols: w.cols, scale: w.scale };
  });
}

// A map's cell side c and canvas size (w x h) for tq queries and tk keys: the labels take MAP_MARGIN.
const MAP_MARGIN = 44;
function mapSide(tq, tk) {
  const c = Math.max(7, Math.min(16, Math.floor(200 / Math.max(tq, tk))));
  return { c, w: MAP_MARGIN + c * tk + 4, h: MAP_MARGIN + c * tq + 16 };
}

// One head's weights (queries x keys) with token labels on both axes, on a canvas (an L-sized
// model has 48 heads of 64 x 64 per example: too many cells for SVG elements). Hover shows the
// cell's weight; data-w holds the 16-bit weights drawn (rows ";", keys ","; w = value / data-scale)
// for the browser test.
function attentionMap(layer, w, head, ri, ei) {
  const tq = w.rows, tk = w.cols, at = (i, j) => w.q[i * tk + j] / w.scale;
  const { c, w: width, h: height } = mapSide(tq, tk), M = MAP_MARGIN;
  const rows = [];
  for (let i = 0; i < tq; ++i) rows.push(w.q.subarray(i * tk, (i + 1) * tk).join(","));
  const canvas = el("canvas", { width, height, class: "attn-map", "data-run": ri,
                                "data-example": ei, "data-layer": layer.name, "data-head": head,
                                "data-scale": w.scale, "data-w": rows.join(";") });
  const g = canvas.getContext("2d");
  // One pixel per cell, then scaled up c times without smoothing.
  const cells = document.createElement("canvas");
  cells.width = tk; cells.height = tq;
  const cg = cells.getContext("2d"), img = cg.createImageData(tk, tq);
  for (let k = 0; k < tq * tk; ++k) {
    const rgb = VIRIDIS_BYTES[Math.round((w.q[k] / w.scale) * 255)];
    img.data.set(rgb, 4 * k);
    img.data[4 * k + 3] = 255;
  }
  cg.putImageData(img, 0, 0);
  g.imageSmoothingEnabled = false;
  g.drawImage(cells, M, M, c * tk, c * tq);
  g.font = "10px system-ui, sans-serif";
  g.fillStyle = "#333";
  g.fillText("head " + head, M, M + c * tq + 12);
  layer.keys.slice(0, tk).forEach((k, j) => {
    g.save(); g.translate(M + j * c + c * 0.7, M - 3); g.rotate(-Math.PI / 2); g.fillText(k, 0, 0); g.restore();
  });
  g.textAlign = "right";
  layer.queries.slice(0, tq).forEach((q, i) => g.fillText(q, M - 3, M + i * c + c * 0.8));
  canvas.addEventListener("mousemove", (e) => {
    const box = canvas.getBoundingClientRect();
    const j = Math.floor((e.clientX - box.left - M) / c), i = Math.floor((e.clientY - box.top - M) / c);
    if (i >= 0 && i < tq && j >= 0 && j < tk)
      canvas.setAttribute("data-tip", "query " + layer.queries[i] + " \u2192 key " + layer.keys[j] + ": " + at(i, j).toFixed(4));
    else canvas.removeAttribute("data-tip");
  });
  return canvas;
}

// Every example's layers, each layer's row of head maps built when it nears the viewport (an
// L-sized model has 48 maps of 64 x 64 per example).
function attentionSection(run, ri) {
  const sec = el("section", { id: "attention-" + ri }, el("h2", {}, "Attention: " + run.name),
                 el("p", { class: "note" }, "Rows: queries; columns: keys; each row sums to 1. Hover a cell for its weight."),
                 colorbar(0, 1, "attention weight"));
  const width = Math.max(300, window.innerWidth - 32);  // not the document's width: that would lay it out now
  run.attention.forEach((ex, ei) => {
    sec.append(el("h3", {}, ex.source + " input: ", el("span", { class: "mono" }, ex.input), " \u2192 ",
                  el("span", { class: "mono" }, ex.output)));
    for (const layer of ex.layers) {
      const row = el("div", { class: "maps layer-row", "data-run": ri, "data-example": ei, "data-layer": layer.name });
      const side = mapSide(layer.weights.rows, layer.weights.cols), perLine = Math.max(1, Math.floor((width + 8) / (side.w + 10)));
      row.append(el("div", { class: "layer-name" }, layer.name));
      later(row, Math.ceil(layer.heads / perLine) * (side.h + 10) - 8, () => {  // lines of maps (2 px border, 8 px gap)
        const heads = decodeHeads(layer.weights);
        for (let h = 0; h < heads.length; ++h) row.append(attentionMap(layer, heads[h], h, ri, ei));
      });
      sec.append(row);
    }
  });
  return sec;
}
