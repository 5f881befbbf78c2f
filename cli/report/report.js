// attnlab report: draws the page from the JSON that `attnlab report` put in
// #report-data (cli/report_data.h says what it holds). Vanilla JS and SVG, so
// the page needs nothing but itself. What it drew is summarised in
// #self-check, which the browser test (tests/test_report_browser.py) reads.
"use strict";
const DATA = JSON.parse(document.getElementById("report-data").textContent);
const NS = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];
const CHECK = { errors: [], runs: [] };
window.addEventListener("error", (e) => CHECK.errors.push(String(e.message)));

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}
function svg(tag, attrs) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}
function column(table, name) {
  const i = table.columns.indexOf(name);
  return i < 0 ? null : table.rows.map((r) => r[i]);
}
function finite(text) { return text !== "" && text !== undefined && Number.isFinite(Number(text)); }
function fmt(v) { return Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(1) : String(+v.toPrecision(3)); }

// Hover: any element with data-tip shows it beside the pointer.
const tip = document.getElementById("tip");
document.addEventListener("mousemove", (e) => {
  const t = e.target.closest && e.target.closest("[data-tip]");
  if (!t) { tip.hidden = true; return; }
  tip.textContent = t.getAttribute("data-tip");
  tip.style.left = e.clientX + 12 + "px";
  tip.style.top = e.clientY + 12 + "px";
  tip.hidden = false;
});

// A line chart: series = [{label, color, dash, points: [{x, y, value}]}]. Each point is a circle
// whose data-tip gives its value, or with opts.dense (too many points for an element each) the
// chart has one mousemove handler that puts the point nearest the pointer, within 8 px, in the
// chart's data-tip.
function lineChart(title, series, opts) {
  const W = 380, H = 230, L = 54, R = 10, T = 22, B = 34;
  const log = !!opts.log;
  const all = series.flatMap((s) => s.points).filter((p) => !log || p.y > 0);
  const box = svg("svg", { width: W, height: H, class: "chart", "data-chart": opts.key || title });
  const head = svg("text", { x: L, y: 14 }); head.textContent = title + (log ? " (log scale)" : "");
  box.append(head);
  if (!all.length) return box;
  let [x0, x1] = [Math.min(...all.map((p) => p.x)), Math.max(...all.map((p) => p.x))];
  let ys = all.map((p) => (log ? Math.log10(p.y) : p.y));
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => T + (1 - ((log ? Math.log10(y) : y) - y0) / (y1 - y0)) * (H - T - B);
  for (let k = 0; k <= 4; ++k) {
    const yv = y0 + ((y1 - y0) * k) / 4, y = T + (1 - k / 4) * (H - T - B);
    box.append(svg("line", { x1: L, x2: W - R, y1: y, y2: y, class: "grid" }));
    const t = svg("text", { x: L - 4, y: y + 3, "text-anchor": "end" }); t.textContent = fmt(log ? 10 ** yv : yv);
    box.append(t);
    const xv = x0 + ((x1 - x0) * k) / 4, xt = svg("text", { x: sx(xv), y: H - B + 14, "text-anchor": "middle" });
    xt.textContent = Number.isInteger(xv) || x1 - x0 >= 8 ? Math.round(xv) : ""; box.append(xt);
  }
  const xl = svg("text", { x: W - R, y: H - 4, "text-anchor": "end" }); xl.textContent = opts.xLabel || "step";
  box.append(xl, svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }),
             svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  series.forEach((s, si) => {
    const pts = s.points.filter((p) => !log || p.y > 0);
    box.append(svg("polyline", { points: pts.map((p) => sx(p.x) + "," + sy(p.y)).join(" "), stroke: s.color,
                                 "stroke-dasharray": s.dash || "" }));
    if (!opts.dense) for (const p of pts)
      box.append(svg("circle", { cx: sx(p.x), cy: sy(p.y), r: 2.2, fill: s.color, class: "pt", "data-series": si,
                                 "data-run": s.run, "data-col": s.col, "data-value": p.value, "data-x": p.x,
                                 "data-tip": s.label + "\n" + (opts.xLabel || "step") + " " + p.x + ": " + p.value }));
  });
  if (opts.dense) {
    const pts = series.flatMap((s) => s.points.filter((p) => !log || p.y > 0).map((p) => [sx(p.x), sy(p.y), s.label, p]));
    box.addEventListener("mousemove", (e) => {
      const at = new DOMPoint(e.clientX, e.clientY).matrixTransform(box.getScreenCTM().inverse());
      let best = null, d2 = 64;
      for (const q of pts) { const d = (q[0] - at.x) ** 2 + (q[1] - at.y) ** 2; if (d < d2) { d2 = d; best = q; } }
      if (best) box.setAttribute("data-tip", best[2] + "\n" + (opts.xLabel || "step") + " " + best[3].x + ": " + best[3].value);
      else box.removeAttribute("data-tip");
    });
  }
  return box;
}

function legend(items) {
  const div = el("div", { class: "legend" });
  for (const [label, color, dash] of items) {
    const mark = el("i"); mark.style.background = color; if (dash) mark.style.opacity = "0.6";
    div.append(el("span", {}, mark, label));
  }
  return div;
}

// Curves over steps: one chart per figure, every run overlaid.
const CURVES = [
  { title: "loss", cols: ["loss"], log: true },
  { title: "token accuracy", cols: ["train_token_acc", "heldout_token_acc"] },
  { title: "sequence accuracy (exact match)", cols: ["train_exact", "heldout_exact"] },
  { title: "held-out loss", cols: ["heldout_loss"], log: true },
  { title: "learning rate", cols: ["lr"] },
  { title: "gradient norm", cols: ["grad_norm"], log: true },
];
function curvesSection(runs) {
  const sec = el("section", { id: "curves" }, el("h2", {}, "Curves over steps"));
  const charts = el("div", { class: "charts" }), keys = [];
  for (const c of CURVES) {
    const series = [];
    runs.forEach((run, ri) => c.cols.forEach((col, ci) => {
      const steps = column(run.metrics, "step"), values = column(run.metrics, col);
      if (!values) return;
      const points = [];
      values.forEach((v, i) => { if (finite(v)) points.push({ x: Number(steps[i]), y: Number(v), value: v }); });
      if (points.length) series.push({ label: run.name + " " + col, color: COLORS[ri % 8], dash: ci ? "5 3" : "",
                                       points, run: ri, col });
    }));
    if (series.length) { charts.append(lineChart(c.title, series, { log: c.log, key: c.cols[0] })); keys.push(c.cols[0]); }
  }
  const items = runs.map((r, i) => [r.name, COLORS[i % 8]]);
  sec.append(legend(items), el("p", { class: "note" }, "solid: training batches; dashed: held-out set. Hover a point for its value."), charts);
  return sec;
}

function kvTable(rows) {
  const t = el("table");
  for (const [k, v, attrs] of rows) t.append(el("tr", {}, el("th", {}, k), el("td", attrs || {}, v)));
  return t;
}

function verdict(run) {
  const s = run.summary;
  if (!s) return el("span", { class: "verdict-no" }, "no summary.json: the run did not finish (interrupted or running)");
  if (s.solved_at_step !== undefined && s.solved_at_step >= 0)
    return el("span", { class: "verdict-yes" }, "solved: held-out exact match reached the target " + s.target + " at step " + s.solved_at_step);
  if (s.target_first_reached_at_step !== undefined && s.target_first_reached_at_step >= 0)
    return el("span", { class: "verdict-yes" }, "target " + s.target + " first reached at step " + s.target_first_reached_at_step);
  return el("span", { class: "verdict-no" }, "target " + (s.target ?? "") + " not reached");
}

// The run at a glance. Every summary.json figure is shown once, marked with
// data-summary (the browser test compares them with the file).
function glance(run, ri) {
  const cfg = run.model.config, sum = run.summary || {};
  const mark = (key, text) => el("span", key in sum ? { "data-summary": key, "data-run": ri } : {}, text ?? String(sum[key] ?? ""));
  const rows = [
    ["verdict", verdict(run)],
    ["task", "task" in sum ? el("span", {}, mark("task"), " \u2014 " + run.model.task) : run.model.task],
    ["model", el("span", {}, mark("model", cfg.arch), ", " + cfg.n_layers + " layers, " + cfg.n_heads + " heads, d_model " +
                 cfg.d_model + ", d_ff " + cfg.d_ff)],
    ["parameters", mark("parameters", String(run.model.parameters))],
  ];
  const sec = el("section", { id: "run-" + ri }, el("h2", {}, "Run " + run.name), el("p", { class: "note mono" }, run.path));
  const own = new Set(["task", "model", "parameters", "seconds", "cpu"]);
  for (const k of Object.keys(sum).filter((k) => !own.has(k))) rows.push([k, mark(k), { class: "num" }]);
  if ("seconds" in sum) rows.push(["time (s)", mark("seconds"), { class: "num" }]);
  rows.push(["CPU", "cpu" in sum ? mark("cpu") : "not recorded"]);
  rows.push(["trained by", "attnlab " + run.model.attnlab_version]);
  rows.push(["checkpoint shown", "step " + run.model.checkpoint_step]);
  const diff = Object.entries(run.settings.differing).map(([k, v]) => k + " = " + v).join("\n");
  rows.push(["settings differing from the defaults", el("span", { class: "mono" }, diff || "(none)")]);
  sec.append(kvTable(rows));
  return sec;
}

// Colours for heat maps: viridis, approximated by five stops.
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
function viridis(t) {
  t = Math.max(0, Math.min(1, t)) * 4;
  const i = Math.min(3, Math.floor(t)), f = t - i, a = VIRIDIS[i], b = VIRIDIS[i + 1];
  return "rgb(" + a.map((v, k) => Math.round(v + (b[k] - v) * f)).join(",") + ")";
}
// viridis as bytes, 256 steps: the maps' cells are written as pixels, not one fill each.
const VIRIDIS_BYTES = Array.from({ length: 256 }, (_, k) => viridis(k / 255).slice(4, -1).split(",").map(Number));

function colorbar(lo, hi, label) {
  const box = svg("svg", { width: 420, height: 20, class: "colorbar" });
  for (let k = 0; k < 50; ++k) box.append(svg("rect", { x: 64 + k * 3, y: 4, width: 3, height: 10, fill: viridis(k / 49) }));
  const a = svg("text", { x: 60, y: 13, "text-anchor": "end" }); a.textContent = fmt(lo);
  const b = svg("text", { x: 218, y: 13 }); b.textContent = fmt(hi) + "  " + label;
  box.append(a, b);
  return box;
}

// The weight matrices among probe_params.csv's parameters (not biases, not LayerNorm gains).
function isWeightMatrix(name) { return /weight$/.test(name) && !/(^|\.)ln/.test(name); }

// Weight matrices whose gradient norm is far from the rest's: at some probe more than
// FLAG_FACTOR times above the median of that probe's weight gradient norms (exploding),
// as far below it (vanishing), or not finite. Returns {param: {kind, step, value, median}},
// the first probe at which each was flagged.
const FLAG_FACTOR = 100;
function gradientFlags(table) {
  const S = column(table, "step"), P = column(table, "param"), G = column(table, "grad_norm"), byStep = new Map();
  P.forEach((p, i) => {
    if (!isWeightMatrix(p)) return;
    if (!byStep.has(S[i])) byStep.set(S[i], []);
    byStep.get(S[i]).push(i);
  });
  const flags = {};
  for (const [step, rows] of byStep) {
    const norms = rows.map((i) => Number(G[i])).filter(Number.isFinite).sort((a, b) => a - b);
    const median = norms.length ? norms[Math.floor((norms.length - 1) / 2)] : NaN;
    for (const i of rows) {
      const g = Number(G[i]);
      const kind = !Number.isFinite(g) ? "not finite" : g > FLAG_FACTOR * median ? "exploding"
                   : g < median / FLAG_FACTOR ? "vanishing" : "";
      if (kind && !flags[P[i]]) flags[P[i]] = { kind, step, value: G[i], median };
    }
  }
  return flags;
}
function flagText(p, f) {
  return p + " " + f.kind + " at step " + f.step + " (" + f.value + " against a median of " + fmt(f.median) + ")";
}

// probe_params.csv as a heat map: weight matrices (rows) x probed steps (columns), log colour
// over the cells drawn; a flagged matrix's name carries its mark. The names and axis are SVG; the
// cells one canvas pixel each, scaled up without smoothing (crisp at any devicePixelRatio: each
// cell is a solid block), with one mousemove handler that puts the cell under the pointer in
// data-tip (the matrix, the step and the CSV's text of the value).
function paramHeatmap(table, key, title, flags, ri) {
  const steps = [...new Set(column(table, "step"))], names = [], cells = new Map();
  const P = column(table, "param"), S = column(table, "step"), V = column(table, key), logs = [];
  P.forEach((p, i) => {
    if (!isWeightMatrix(p)) return;
    if (!cells.has(p)) { cells.set(p, new Map()); names.push(p); }
    cells.get(p).set(S[i], V[i]);
    if (Number(V[i]) > 0) logs.push(Math.log10(Number(V[i])));
  });
  const lo = Math.min(...logs), hi = Math.max(...logs);
  const cw = Math.max(2, Math.min(14, 600 / steps.length)), ch = 12, L = 230;
  const wrap = el("div", { class: "chart heat" });
  const box = svg("svg", { width: L + cw * steps.length + 10, height: ch * names.length + 30 });
  names.forEach((p, r) => {
    const f = flags[p], t = svg("text", { x: L - 4, y: r * ch + ch - 2, "text-anchor": "end" });
    t.textContent = (f ? (f.kind === "vanishing" ? "\u25bc " : "\u25b2 ") : "") + p;
    if (f) { t.setAttribute("class", "flag"); t.setAttribute("data-flag", f.kind); t.setAttribute("data-tip", flagText(p, f)); }
    box.append(t);
  });
  const xl = svg("text", { x: L, y: ch * names.length + 14 }); xl.textContent = "step " + steps[0] + " \u2192 " + steps[steps.length - 1];
  box.append(xl);
  const canvas = el("canvas", { width: steps.length, height: names.length, class: "heat-cells", "data-run": ri, "data-key": key });
  Object.assign(canvas.style, { left: L + "px", width: cw * steps.length + "px", height: ch * names.length + "px" });
  const g = canvas.getContext("2d"), img = g.createImageData(steps.length, names.length);
  names.forEach((p, r) => steps.forEach((s, c) => {
    const v = cells.get(p).get(s);
    if (v === undefined) return;
    const f = Number(v) > 0 ? (Math.log10(Number(v)) - lo) / (hi - lo || 1) : 0, k = 4 * (r * steps.length + c);
    img.data.set(VIRIDIS_BYTES[Math.round(Math.max(0, Math.min(1, f)) * 255)], k);
    img.data[k + 3] = 255;
  }));
  g.putImageData(img, 0, 0);
  canvas.addEventListener("mousemove", (e) => {
    const at = canvas.getBoundingClientRect();
    const c = Math.floor(((e.clientX - at.left) / at.width) * steps.length), r = Math.floor(((e.clientY - at.top) / at.height) * names.length);
    const v = r >= 0 && r < names.length && c >= 0 && c < steps.length ? cells.get(names[r]).get(steps[c]) : undefined;
    if (v === undefined) canvas.removeAttribute("data-tip");
    else canvas.setAttribute("data-tip", names[r] + "\nstep " + steps[c] + ": " + key + " " + v);
  });
  wrap.append(box, canvas);
  return el("div", {}, el("h3", {}, title), wrap, colorbar(10 ** lo, 10 ** hi, key + " (log colour)"));
}

function largestGradient(table) {
  const S = column(table, "step"), P = column(table, "param"), G = column(table, "grad_norm");
  const last = S[S.length - 1];
  let best = null;
  S.forEach((s, i) => { if (s === last && (!best || Number(G[i]) > Number(G[best]))) best = i; });
  return best === null ? "" : "Largest gradient norm at the last probe (step " + last + "): " + P[best] + " (" + G[best] + ").";
}

function streamChart(table) {
  const S = column(table, "step"), last = S[S.length - 1], pts = { act_rms: [], grad_rms: [] }, names = [];
  table.rows.forEach((r, i) => {
    if (S[i] !== last) return;
    const idx = Number(column(table, "index")[i]); names.push(column(table, "point")[i]);
    for (const k of ["act_rms", "grad_rms"]) {
      const v = column(table, k)[i];
      if (finite(v)) pts[k].push({ x: idx, y: Number(v), value: v });
    }
  });
  const series = [{ label: "activation RMS", color: COLORS[0], points: pts.act_rms, run: 0, col: "act_rms" },
                  { label: "gradient RMS", color: COLORS[1], dash: "5 3", points: pts.grad_rms, run: 0, col: "grad_rms" }];
  return el("div", {}, el("h3", {}, "Residual stream by depth (step " + last + ")"),
            lineChart("RMS by depth: " + names.join(", "), series, { log: true, xLabel: "depth index", key: "stream" }),
            legend([["activation RMS", COLORS[0]], ["gradient RMS (dashed)", COLORS[1]]]));
}

function entropyCharts(table) {
  const L = column(table, "layer"), H = column(table, "head"), S = column(table, "step"), E = column(table, "entropy");
  const layers = [...new Set(L)], div = el("div", { class: "charts" });
  for (const layer of layers) {
    const heads = [...new Set(H.filter((h, i) => L[i] === layer))];
    const series = heads.map((h, hi) => ({ label: layer + " head " + h, color: COLORS[hi % 8], run: 0, col: "entropy",
      points: E.map((v, i) => ({ i, v })).filter((o) => L[o.i] === layer && H[o.i] === h && finite(o.v))
               .map((o) => ({ x: Number(S[o.i]), y: Number(o.v), value: o.v })) }));
    div.append(lineChart(layer + ": head entropy (nats)", series, { key: "entropy " + layer, dense: true }));
  }
  return el("div", {}, el("h3", {}, "Attention entropy per head over training"), div);
}

function gradientSection(run, ri) {
  const sec = el("section", { id: "gradients-" + ri }, el("h2", {}, "Gradient flow: " + run.name));
  const p = run.probes;
  if (!p.params) { sec.append(el("p", { class: "note" }, "No probes recorded: train with --probe-every N to see gradient flow.")); return sec; }
  const flags = gradientFlags(p.params), flagged = Object.keys(flags);
  CHECK.runs[ri] = Object.assign(CHECK.runs[ri] || {}, { flagged: flags });
  sec.append(el("p", {}, largestGradient(p.params)));
  sec.append(el("p", { class: flagged.length ? "verdict-no" : "", "data-flags": flagged.length },
                flagged.length ? "Marked \u25b2 exploding / \u25bc vanishing: " + flagged.map((q) => flagText(q, flags[q])).join("; ") + "."
                               : "No weight matrix's gradient norm was more than " + FLAG_FACTOR +
                                 "\u00d7 above or below the median of its probe, or not finite: no layer vanishing or exploding."));
  const maps = el("div", { class: "charts" }, paramHeatmap(p.params, "grad_norm", "gradient L2 norm", flags, ri),
                  paramHeatmap(p.params, "update_ratio", "update / weight ratio \u2016\u0394w\u2016/\u2016w\u2016", flags, ri));
  sec.append(maps);
  if (p.stream && p.stream.rows.length) sec.append(streamChart(p.stream));
  if (p.heads && p.heads.rows.length) sec.append(entropyCharts(p.heads));
  return sec;
}

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

// Built when first needed: a node registered with later() is filled by its build function when
// it comes within half a screen of the viewport, or before the page is printed. Until then it keeps
// the height given (so that links and the scroll bar point where they will).
const LATER = new Map();
const NEAR = new IntersectionObserver((entries) => { for (const e of entries) if (e.isIntersecting) buildNow(e.target); },
                                      { rootMargin: "50% 0px" });
function later(node, height, build) {
  node.style.minHeight = height + "px";
  node.setAttribute("data-built", "no");
  LATER.set(node, build);
  NEAR.observe(node);
}
function buildNow(node) {
  const build = LATER.get(node);
  if (!build) return;
  LATER.delete(node);
  NEAR.unobserve(node);
  build();
  node.style.minHeight = "";
  node.setAttribute("data-built", "yes");
}
window.addEventListener("beforeprint", () => { for (const node of [...LATER.keys()]) buildNow(node); });

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

function examplesSection(run, ri) {
  const ex = run.examples, t = el("table", {}, el("tr", {}, el("th", {}, "input"), el("th", {}, "model's answer"),
                                                 el("th", {}, "expected"), el("th", {}, "")));
  for (const e of ex.shown)
    t.append(el("tr", { class: e.correct ? "right" : "wrong" }, el("td", { class: "mono" }, e.input),
                el("td", { class: "mono" }, e.output), el("td", { class: "mono" }, e.expected),
                el("td", {}, e.correct ? "right" : "wrong")));
  return el("section", { id: "examples-" + ri }, el("h2", {}, "Held-out examples: " + run.name),
            el("p", { class: "note" }, "Up to 6 right and 6 wrong among the first " + ex.scored + " held-out examples."), t);
}

// A sweep's summary.csv: the columns that are outcomes of a point, not its settings.
const OUTCOMES = new Set(["run", "heldout_exact", "heldout_token_acc", "heldout_loss", "solved_at_step", "steps",
                          "seconds", "cpu_seconds", "exit", "objective", "state", "trial", "seeds", "spread"]);

// One hyperparameter against one outcome: numbers on a (log, when they span 20x) axis,
// other values as evenly spaced categories. Each point links to its run's section.
function sweepScatter(table, param, outcome, runs) {
  const P = column(table, param), Y = column(table, outcome), R = column(table, "run") || [];
  const numeric = P.every(finite), log = numeric && P.every((v) => Number(v) > 0) &&
                  Math.max(...P.map(Number)) >= 20 * Math.min(...P.map(Number));
  const cats = numeric ? [] : [...new Set(P)].sort();
  const xOf = (v) => (numeric ? (log ? Math.log10(Number(v)) : Number(v)) : cats.indexOf(v));
  const points = [];
  P.forEach((v, i) => { if (finite(Y[i])) points.push({ x: xOf(v), y: Number(Y[i]), value: Y[i], label: v, run: R[i] }); });
  const W = 300, H = 200, L = 54, Rm = 14, T = 22, B = 34;
  const box = svg("svg", { width: W, height: H, class: "chart", "data-scatter": param });
  const head = svg("text", { x: L, y: 14 }); head.textContent = outcome + " against " + param + (log ? " (log axis)" : "");
  box.append(head);
  if (!points.length) return box;
  let [x0, x1] = [Math.min(...points.map((p) => p.x)), Math.max(...points.map((p) => p.x))];
  let [y0, y1] = [Math.min(...points.map((p) => p.y)), Math.max(...points.map((p) => p.y))];
  if (x1 === x0) { x0 -= 0.5; x1 += 0.5; } else { const m = (x1 - x0) * 0.06; x0 -= m; x1 += m; }
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - Rm), sy = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  box.append(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }),
             svg("line", { x1: L, x2: W - Rm, y1: H - B, y2: H - B, class: "axis" }));
  for (const [v, y] of [[y0, H - B], [y1, T]]) {
    const t = svg("text", { x: L - 4, y: y + 3, "text-anchor": "end" }); t.textContent = fmt(v); box.append(t);
  }
  const ticks = numeric ? [...new Set(P)] : cats;
  for (const v of ticks) {
    const t = svg("text", { x: sx(xOf(v)), y: H - B + 14, "text-anchor": "middle" }); t.textContent = v; box.append(t);
  }
  const xl = svg("text", { x: W - Rm, y: H - 4, "text-anchor": "end" }); xl.textContent = param; box.append(xl);
  for (const p of points) {
    const ri = runs.findIndex((run) => run.name === p.run);
    const dot = svg("circle", { cx: sx(p.x), cy: sy(p.y), r: 4, fill: COLORS[0], "fill-opacity": 0.6, class: "pt",
                                "data-param": param, "data-x": p.label, "data-value": p.value,
                                "data-tip": (p.run ? p.run + "\n" : "") + param + " " + p.label + ": " + outcome + " " + p.value });
    if (ri >= 0) { const a = svg("a", { href: "#run-" + ri }); a.append(dot); box.append(a); } else box.append(dot);
  }
  return box;
}

// scripts/tools/sweep.py's summary.csv, sortable by any column; names link to their runs; each
// hyperparameter against a chosen outcome.
function sweepSection(sweep, runs) {
  const table = sweep.table, t = el("table", { id: "sweep-table" }), order = { col: -1, dir: 1 };
  const head = el("tr"), body = el("tbody");
  const draw = () => {
    body.textContent = "";
    const rows = [...table.rows];
    if (order.col >= 0) rows.sort((a, b) => {
      const x = a[order.col], y = b[order.col];
      return (finite(x) && finite(y) ? Number(x) - Number(y) : x.localeCompare(y)) * order.dir;
    });
    for (const r of rows) body.append(el("tr", {}, ...r.map((v) => {
      const ri = runs.findIndex((run) => run.name === v);
      return el("td", { class: finite(v) ? "num" : "" }, ri >= 0 ? el("a", { href: "#run-" + ri }, v) : v);
    })));
  };
  table.columns.forEach((c, i) => {
    const th = el("th", { class: "sortable", title: "sort" }, c);
    th.addEventListener("click", () => { order.dir = order.col === i ? -order.dir : 1; order.col = i; draw(); });
    head.append(th);
  });
  t.append(el("thead", {}, head), body);
  draw();
  const sec = el("section", { id: "sweep" }, el("h2", {}, "Sweep " + sweep.path),
                 el("p", { class: "note" }, "Click a column to sort."), t);
  const params = table.columns.filter((c) => !OUTCOMES.has(c));
  const outcomes = table.columns.filter((c) => OUTCOMES.has(c) && c !== "run" && column(table, c).some(finite));
  if (params.length && outcomes.length) {
    const pick = el("select", { id: "sweep-outcome" }, ...outcomes.map((o) => el("option", { value: o }, o)));
    pick.value = outcomes.includes("objective") ? "objective" : outcomes.includes("heldout_exact") ? "heldout_exact" : outcomes[0];
    const charts = el("div", { class: "charts" });
    const plot = () => { charts.textContent = ""; for (const p of params) charts.append(sweepScatter(table, p, pick.value, runs)); };
    pick.addEventListener("change", plot);
    plot();
    sec.append(el("h3", {}, "Each setting against ", pick),
               el("p", { class: "note" }, "One point per sweep point; click a point for its run."), charts);
  }
  return sec;
}

function render() {
  const main = document.getElementById("report"), nav = document.getElementById("nav");
  main.textContent = "";
  const runs = DATA.runs;
  if (DATA.sweep) main.append(sweepSection(DATA.sweep, runs));
  runs.forEach((run, ri) => main.append(glance(run, ri)));
  main.append(curvesSection(runs));
  runs.forEach((run, ri) => {
    main.append(gradientSection(run, ri));
    main.append(attentionSection(run, ri), examplesSection(run, ri));
    CHECK.runs[ri] = Object.assign(CHECK.runs[ri] || {}, { name: run.name, metrics_rows: run.metrics.rows.length,
      expected_maps: run.attention.reduce((n, ex) => n + ex.layers.reduce((m, l) => m + l.heads, 0), 0) });
  });
  for (const [id, label] of [["curves", "curves"], ["run-0", "runs"], ["gradients-0", "gradients"],
                             ["attention-0", "attention"], ["examples-0", "examples"]])
    nav.append(el("a", { href: "#" + id }, label));
  document.title = "attnlab report: " + runs.map((r) => r.name).join(", ");
}

try { render(); } catch (e) { CHECK.errors.push(String(e && e.stack || e)); throw e; } finally {
  const pre = document.getElementById("self-check");
  pre.textContent = JSON.stringify(CHECK);
  document.body.setAttribute("data-rendered", CHECK.errors.length ? "error" : "ok");
  performance.mark("report-drawn");  // the browser test prints the time to here
}
