// Attention maps: for each example, its answer beside the expected one, then one labelled row
// per layer of thumbnails, one per head (attention_map.js), built when scrolled near; a click
// enlarges one (attention_zoom.js); the last layer's heads described in sentences.

// A layer's weights, decoded from 16-bit base64 (head_weights in cli/report_model.cpp): per head
// {q: Uint16Array of round(w * scale), rows x cols, row by row; rows; cols; scale}.
function decodeHeads(w) {
  return w.heads.map((b64) => {
    const bin = atob(b64), q = new Uint16Array(w.rows * w.cols);
    for (let k = 0; k < q.length; ++k) q[k] = bin.charCodeAt(2 * k) | (bin.charCodeAt(2 * k + 1) << 8);
    return { q, rows: w.rows, cols: w.cols, scale: w.scale };
  });
}

const THUMB_MAX = 200;  // px: the most a thumbnail's cells take, across or down
const LAYER_LABEL = 120;  // px: the column of layer names left of the thumbnails (report.css), and a gap

// The layout of an example's thumbnails (sharedLayout): the largest cells, at most 12 px and
// THUMB_MAX px across, that put each layer's heads on one row of `width` (attentionWidth); else
// 2 px cells (the least a pointer can hover), and a row too wide scrolls sideways.
function thumbLayout(ex, width) {
  const n = Math.max(...ex.layers.flatMap((l) => [l.queries.length, l.keys.length]));
  const heads = Math.max(...ex.layers.map((l) => l.heads));
  for (let c = Math.min(12, Math.floor(THUMB_MAX / n)); c > 2; --c) {
    const layout = sharedLayout(ex.layers, c);
    if (LAYER_LABEL + heads * (layout(ex.layers[0]).w + 8) <= width) return layout;  // 8: a gap and borders
  }
  return sharedLayout(ex.layers, 2);
}

// The width of a run's attention section, from the window's (not the document's: that would lay
// the page out now): one of the columns that .side-by-side (report.css, main.js) makes of the
// runs, 440 px at the least and 24 px apart.
function attentionWidth() {
  const page = Math.max(400, window.innerWidth - 40);
  const columns = Math.max(1, Math.min(DATA.runs.length, Math.floor((page + 24) / 464)));
  return (page - 24 * (columns - 1)) / columns;
}

// The last layer of each stack (a seq2seq model's encoder and decoder): its layers'
// names with the block number highest among those alike but for it.
function lastLayers(layers) {
  const last = new Map();
  for (const l of layers) {
    const m = l.name.match(/^(.*?)(\d+)(\D*)$/), key = m ? m[1] + "#" + m[3] : l.name, k = m ? +m[2] : 0;
    if (!last.has(key) || last.get(key)[0] <= k) last.set(key, [k, l.name]);
  }
  return new Set([...last.values()].map((v) => v[1]));
}

// One layer's row: its name, then its heads' thumbnails, built when scrolled near; for a last
// layer, the heads' sentences in `words` (outside the row, whose text is its layer's name).
function layerRow(layer, layout, ri, ei, words) {
  const row = el("div", { class: "maps layer-row", "data-run": ri, "data-example": ei, "data-layer": layer.name },
                 el("div", { class: "layer-name" }, layer.name));
  const L = layout(layer);
  later(row, L.h, () => {
    const heads = decodeHeads(layer.weights);
    heads.forEach((w, h) => {
      const thumb = drawMap(layer, w, h, L, "attn-map", { "data-run": ri, "data-example": ei });
      thumb.addEventListener("click", () => openZoom(layer, w, h, thumb));
      row.append(thumb);
    });
    if (words) words.append(headSentences(layer, heads, { "data-run": ri, "data-example": ei }));
  });
  return row;
}

// An example's heading: its input and the model's answer, the expected answer with the wrong
// tokens marked, right or wrong, and the notes predict prints (an input unlike training's, an
// answer cut short).
function exampleHeading(ex, ri, ei) {
  const head = el("div", { class: "example-head", "data-run": ri, "data-example": ei });
  const input = ex.input.replace(/\n/g, "\u21b5").replace(/\t/g, "\u21e5");  // a text's lines on one line
  const source = ex.source === "held-out" ? "held-out input" : ex.source;  // "--input"
  head.append(el("h3", {}, source + ": ", el("span", { class: "mono" }, input), " \u2192 ",
                 answerTokens(ex.output, ex.output_tokens, ex.expected_tokens)));
  if (ex.expected !== null && ex.expected !== undefined)
    head.append(el("p", { class: "answer-check " + (ex.correct ? "right" : "wrong"), "data-correct": ex.correct },
                   ex.correct ? "right: the expected answer is " : "wrong: the expected answer is ",
                   el("span", { class: "mono expected" }, ex.expected)));
  for (const note of ex.notes || []) head.append(el("p", { class: "note predict-note" }, "note: " + note));
  return head;
}

// Every example's heading and layer rows (an L-sized model has 48 maps of 64 x 64 per example).
function attentionSection(run, ri) {
  const sec = el("section", { id: "attention-" + ri }, el("h2", {}, "Attention: " + run.name),
                 el("p", { class: "note" }, "Rows: queries; columns: keys; each row sums to 1. Each layer's heads on " +
                    "one row (scrolling sideways if wider than the window); under each, the share it gives its most favoured key (prev: the previous token, first: " +
                    "the first, anti: the mirrored position, self: its own). Hover a cell for its weight; click a " +
                    "map to enlarge it."),
                 colorbar(0, 1, "attention weight"));
  const width = attentionWidth();
  run.attention.forEach((ex, ei) => {
    sec.append(exampleHeading(ex, ri, ei));
    const layout = thumbLayout(ex, width), last = lastLayers(ex.layers);
    const grid = el("div", { class: "attn-grid" });
    for (const layer of ex.layers) {
      const words = last.has(layer.name) ? el("div", { class: "head-words" }) : null;
      grid.append(layerRow(layer, layout, ri, ei, words));
      if (words) grid.append(words);
    }
    sec.append(grid);
  });
  return sec;
}
