// Gradient flow from the probes (train --probe-every N): probe_params.csv's heat maps with the
// layers that vanish or explode marked, the residual stream by depth, head entropy over training.

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
  const value = finite(f.value) ? fmt(Number(f.value)) : f.value;  // "nan" and "inf" as the CSV has them
  return p + " " + f.kind + " at step " + f.step + " (" + value + " against a median of " + fmt(f.median) + ")";
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
  const box = svg("svg", { width: L + cw * steps.length + 24, height: ch * names.length + 30 });
  names.forEach((p, r) => {
    const f = flags[p], t = svg("text", { x: L - 4, y: r * ch + ch - 2, "text-anchor": "end" });
    t.textContent = (f ? (f.kind === "vanishing" ? "\u25bc " : "\u25b2 ") : "") + p;
    if (f) { t.setAttribute("class", "flag"); t.setAttribute("data-flag", f.kind); t.setAttribute("data-tip", flagText(p, f)); }
    box.append(t);
  });
  heatStepAxis(box, steps.map(Number), L, cw, ch * names.length);
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
  return el("div", {}, el("h3", {}, title), wrap, colorbar(10 ** lo, 10 ** hi, key + " (log colour)", true));
}

// A heat map's step axis below its cells (top at y): round steps (text.tick, data-axis "x"),
// each at its place between the centres of the probed steps' columns (cw wide from x0).
function heatStepAxis(box, steps, x0, cw, y) {
  const n = steps.length, at = (v) => {
    const c = steps.findIndex((s, i) => i === n - 1 || steps[i + 1] > v);
    const f = c < n - 1 ? (v - steps[c]) / (steps[c + 1] - steps[c]) : 0;
    return x0 + cw * (c + f + 0.5);
  };
  const ticks = niceTicks(steps[0], steps[n - 1], Math.max(3, Math.floor((cw * n) / 70)));
  for (const v of ticks.filter((t) => t >= steps[0] && t <= steps[n - 1])) {
    box.append(svg("line", { x1: at(v), x2: at(v), y1: y, y2: y + 3, class: "axis", "data-value": v }),
               tick(at(v), y + 13, "middle", "x", v));
  }
  const t = svg("text", { x: x0 - 4, y: y + 13, "text-anchor": "end" });
  t.textContent = "step";
  box.append(t);
}

// The paragraph naming the parameter with the largest gradient norm at the last probe (its
// raw CSV value in data-value, rounded in the text).
function largestGradient(table, ri) {
  const S = column(table, "step"), P = column(table, "param"), G = column(table, "grad_norm");
  const last = S[S.length - 1];
  let best = null;
  S.forEach((s, i) => { if (s === last && (best === null || Number(G[i]) > Number(G[best]))) best = i; });
  if (best === null) return el("p");
  return el("p", { "data-run": ri, "data-largest": P[best], "data-value": G[best] }, "Largest gradient norm at the last probe (step " + last +
            "): " + P[best] + " (" + fmt(Number(G[best])) + ").");
}

// The activation and gradient RMS at each point of the residual stream (x: the points by depth,
// named) at the last probe.
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
            lineChart("RMS by depth", series, { log: true, xLabel: "depth", xNames: names, key: "stream" }),
            legend([["activation RMS", COLORS[0]], ["gradient RMS (dashed)", COLORS[1]]]));
}

// Each layer's heads' attention entropy over the probed steps: a chart per layer, a legend
// entry per head in the colour of its line.
function entropyCharts(table) {
  const L = column(table, "layer"), H = column(table, "head"), S = column(table, "step"), E = column(table, "entropy");
  const layers = [...new Set(L)], div = el("div", { class: "charts" });
  for (const layer of layers) {
    const heads = [...new Set(H.filter((h, i) => L[i] === layer))];
    const series = heads.map((h, hi) => ({ label: layer + " head " + h, color: COLORS[hi % 8], run: 0, col: "entropy",
      points: E.map((v, i) => ({ i, v })).filter((o) => L[o.i] === layer && H[o.i] === h && finite(o.v))
               .map((o) => ({ x: Number(S[o.i]), y: Number(o.v), value: o.v })) }));
    const chart = lineChart(layer + ": head entropy (nats)", series, { key: "entropy " + layer, dense: true });
    const key = legend(series.map((s, hi) => ["head " + heads[hi], s.color]));
    key.setAttribute("data-legend", "entropy " + layer);
    div.append(el("div", { class: "entropy" }, chart, ...(chart.tagName === "svg" ? [key] : [])));
  }
  return el("div", {}, el("h3", {}, "Attention entropy per head over training"), div);
}

function gradientSection(run, ri) {
  const sec = el("section", { id: "gradients-" + ri }, el("h2", {}, "Gradient flow: " + run.name));
  const p = run.probes;
  const sharpness = p.sharpness && p.sharpness.rows.length ? [sharpnessCharts(p.sharpness, ri)] : [];
  if (!p.params) {
    sec.append(el("p", { class: "note" }, "No gradient-flow probes recorded: train with --probe-every N to see them."), ...sharpness);
    return sec;
  }
  const flags = gradientFlags(p.params), flagged = Object.keys(flags);
  CHECK.runs[ri] = Object.assign(CHECK.runs[ri] || {}, { flagged: flags });
  sec.append(largestGradient(p.params, ri));
  sec.append(el("p", { class: flagged.length ? "verdict-no" : "", "data-flags": flagged.length },
                flagged.length ? "Marked \u25b2 exploding / \u25bc vanishing: " + flagged.map((q) => flagText(q, flags[q])).join("; ") + "."
                               : "No weight matrix's gradient norm was more than " + FLAG_FACTOR +
                                 "\u00d7 above or below the median of its probe, or not finite: no layer vanishing or exploding."));
  const maps = el("div", { class: "charts" }, paramHeatmap(p.params, "grad_norm", "gradient L2 norm", flags, ri),
                  paramHeatmap(p.params, "update_ratio", "update / weight ratio \u2016\u0394w\u2016/\u2016w\u2016", flags, ri));
  sec.append(maps);
  if (p.stream && p.stream.rows.length) sec.append(streamChart(p.stream));
  if (p.heads && p.heads.rows.length) sec.append(entropyCharts(p.heads));
  sec.append(...sharpness);
  return sec;
}
