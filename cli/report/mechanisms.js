// The mechanisms a run's instruments looked for, when it recorded them: per-head induction
// scores (train --probe-induction N, probe_induction.csv) and a modular run's embedding
// spectrum (embedding_fourier.csv, written at each evaluation).

function hasMechanisms(run) { return !!(run.probes.induction || run.probes.fourier); }

// The induction scores' two columns, as the page names them.
const INDUCTION_SCORES = [["prefix_matching", "prefix matching"], ["previous_token", "previous token"]];

// A grid of layers (rows) by heads (columns) at one step: each cell coloured by its score in
// [0, 1] (viridis) and written in it; data-value holds the CSV's text.
function inductionGrid(table, col, label, step, ri) {
  const S = column(table, "step"), L = column(table, "layer"), H = column(table, "head"), V = column(table, col);
  const rows = S.map((s, i) => i).filter((i) => S[i] === step);
  const layers = [...new Set(rows.map((i) => L[i]))], heads = [...new Set(rows.map((i) => H[i]))];
  const cw = 46, ch = 22, x0 = 110, y0 = 30;
  const box = svg("svg", { width: x0 + cw * heads.length + 10, height: y0 + ch * layers.length + 6,
                           class: "chart induction-grid", "data-run": ri, "data-col": col, "data-step": step });
  box.append(titleText(6, 14, label + " at step " + step, 60));
  heads.forEach((h, c) => {
    const t = svg("text", { x: x0 + c * cw + cw / 2, y: y0 - 4, "text-anchor": "middle" });
    t.textContent = "head " + h;
    box.append(t);
  });
  layers.forEach((l, r) => {
    const t = svg("text", { x: x0 - 4, y: y0 + r * ch + ch / 2 + 3, "text-anchor": "end" });
    t.textContent = l;
    box.append(t);
  });
  for (const i of rows) {
    const x = x0 + heads.indexOf(H[i]) * cw, y = y0 + layers.indexOf(L[i]) * ch, v = Number(V[i]);
    box.append(svg("rect", { x, y, width: cw - 2, height: ch - 2, fill: viridis(v), class: "score-cell",
                             "data-layer": L[i], "data-head": H[i], "data-value": V[i],
                             "data-tip": L[i] + " head " + H[i] + "\nstep " + step + ": " + label + " " + V[i] }));
    const t = svg("text", { x: x + cw / 2 - 1, y: y + ch / 2 + 3, "text-anchor": "middle", class: "cell-text",
                            style: "fill: " + (v > 0.6 ? "#222" : "#fff") });  // over .chart text's colour
    t.textContent = fmt(v);
    box.append(t);
  }
  return box;
}

// One layer's heads' score over the probed steps, a line per head, on [0, 1].
function inductionCurves(table, col, label, layer, ri) {
  const S = column(table, "step"), L = column(table, "layer"), H = column(table, "head"), V = column(table, col);
  const heads = [...new Set(H.filter((h, i) => L[i] === layer))];
  const series = heads.map((h, hi) => ({ label: layer + " head " + h, color: COLORS[hi % 8], run: ri, col,
    points: V.map((v, i) => i).filter((i) => L[i] === layer && H[i] === h && finite(V[i]))
             .map((i) => ({ x: Number(S[i]), y: Number(V[i]), value: V[i] })) }));
  const chart = lineChart(layer + ": " + label, series, { key: "induction " + col + " " + layer, range: [0, 1] });
  return el("div", { class: "induction-curve" }, chart, legend(heads.map((h, hi) => ["head " + h, COLORS[hi % 8]])));
}

// The head with the highest prefix-matching score at the last probe, in words.
function strongestInductionHead(table, step, ri) {
  const S = column(table, "step"), P = column(table, "prefix_matching");
  let best = -1;
  S.forEach((s, i) => { if (s === step && finite(P[i]) && (best < 0 || Number(P[i]) > Number(P[best]))) best = i; });
  if (best < 0) return el("p");
  const layer = column(table, "layer")[best], head = column(table, "head")[best];
  return el("p", { class: "induction-best", "data-run": ri, "data-layer": layer, "data-head": head, "data-value": P[best] },
            "Strongest induction head at step " + step + ": " + layer + " head " + head + " (prefix matching " +
            fmt(Number(P[best])) + ", previous token " + fmt(Number(column(table, "previous_token")[best])) + ").");
}

function inductionBlock(table, ri) {
  const S = column(table, "step"), last = S[S.length - 1];
  const div = el("div", { id: "induction-" + ri, "data-run": ri },
                 el("h3", {}, "Induction scores per head"),
                 el("p", { class: "note" }, "On a fixed batch of random sequences repeated once: prefix matching is " +
                    "the attention a token of the repeat gives the token after its earlier occurrence, previous " +
                    "token the attention on the position before (1: all of it; docs/watching.md)."),
                 strongestInductionHead(table, last, ri));
  const grids = el("div", { class: "charts" });
  for (const [col, label] of INDUCTION_SCORES) grids.append(inductionGrid(table, col, label, last, ri));
  div.append(grids, colorbar(0, 1, "score"));
  const curves = el("div", { class: "charts" });
  for (const layer of [...new Set(column(table, "layer"))])
    for (const [col, label] of INDUCTION_SCORES) curves.append(inductionCurves(table, col, label, layer, ri));
  div.append(curves);
  return div;
}

// A step's spectrum: {k: norm} from the CSV's rows, and each frequency's share of the energy
// of frequencies 1 and up (the norms squared; k = 0 is the mean row, not a wave).
function spectrumAt(table, step) {
  const S = column(table, "step"), K = column(table, "frequency"), N = column(table, "norm"), rows = [];
  S.forEach((s, i) => { if (s === step) rows.push({ k: Number(K[i]), norm: Number(N[i]), value: N[i] }); });
  const energy = rows.filter((r) => r.k > 0).reduce((a, r) => a + r.norm * r.norm, 0);
  for (const r of rows) r.share = r.k > 0 && energy > 0 ? (r.norm * r.norm) / energy : NaN;
  return rows;
}

// The latest spectrum as bars, one per frequency (rect.bar, data-frequency and the CSV's norm).
function spectrumBars(rows, step, top, ri) {
  const { W, H, L, R, T, B } = CHART, hi = Math.max(...rows.map((r) => r.norm), 0);
  const box = svg("svg", { width: W, height: H, class: "chart spectrum", "data-run": ri, "data-step": step });
  box.append(titleText(6, 14, "embedding's Fourier norms at step " + step, 54));
  const yt = niceTicks(0, hi > 0 ? hi : 1, 5), ymax = yt[yt.length - 1], bw = (W - L - R) / rows.length;
  const sy = (v) => T + (1 - v / ymax) * (H - T - B);
  for (const v of yt) {
    box.append(svg("line", { x1: L, x2: W - R, y1: sy(v), y2: sy(v), class: "grid", "data-axis": "y", "data-value": v }),
               tick(L - 4, sy(v) + 3, "end", "y", v));
  }
  const named = new Set(top.map((r) => r.k));
  rows.forEach((r, i) => {
    box.append(svg("rect", { x: L + i * bw + bw * 0.1, y: sy(r.norm), width: bw * 0.8, height: sy(0) - sy(r.norm),
                             fill: named.has(r.k) ? COLORS[1] : COLORS[0], class: "bar", "data-frequency": r.k,
                             "data-value": r.value, "data-tip": "frequency " + r.k + ": norm " + r.value }));
    if (named.has(r.k) || i % Math.ceil(rows.length / 10) === 0) box.append(tick(L + (i + 0.5) * bw, H - B + 14, "middle", "x", r.k));
  });
  const xl = svg("text", { x: W - R, y: H - 4, "text-anchor": "end" });
  xl.textContent = "frequency k";
  box.append(xl, svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }),
             svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  return box;
}

const KEY_FREQUENCIES = 5;  // how many of the largest frequencies the section names and follows

function fourierBlock(table, ri) {
  const S = column(table, "step"), steps = [...new Set(S)], last = steps[steps.length - 1];
  const rows = spectrumAt(table, last);
  const top = rows.filter((r) => r.k > 0 && r.norm > 0).sort((a, b) => b.norm - a.norm || a.k - b.k).slice(0, KEY_FREQUENCIES);
  const share = top.reduce((a, r) => a + r.share, 0);
  const words = el("p", { class: "key-frequencies", "data-run": ri, "data-step": last,
                          "data-frequencies": top.map((r) => r.k).join(" "), "data-share": share },
                   "Key frequencies at step " + last + ": " + top.map((r) => "k = " + r.k + " (" + fmt(100 * r.share) + "%)").join(", ") +
                   "; together " + fmt(100 * share) + "% of the embedding's energy at frequencies 1 and up.");
  const spectra = steps.map((s) => spectrumAt(table, s));
  const series = top.map((r, i) => ({ label: "k = " + r.k, color: COLORS[(i + 1) % 8], run: ri, col: "share",
    points: spectra.map((rs, si) => ({ s: steps[si], r: rs.find((q) => q.k === r.k) }))
                   .filter((o) => o.r && finite(o.r.share)).map((o) => ({ x: Number(o.s), y: o.r.share, value: String(o.r.share) })) }));
  const chart = lineChart("share of the energy, key frequencies", series, { key: "fourier share", range: [0, 1] });
  return el("div", { id: "fourier-" + ri, "data-run": ri },
            el("h3", {}, "The embedding's Fourier spectrum"),
            el("p", { class: "note" }, "The norm of each frequency k of the residues' embedding rows, " +
               "\u221a(\u2016\u03a3\u2090 E\u2090 cos(2\u03c0ka/p)\u2016\u00b2 + \u2016\u03a3\u2090 E\u2090 sin(2\u03c0ka/p)\u2016\u00b2) " +
               "(k = 0: the rows' sum); a share is a norm squared over the sum for k \u2265 1 (docs/watching.md)."),
            words,
            el("div", { class: "charts" }, spectrumBars(rows, last, top, ri),
               el("div", {}, chart, legend(series.map((s) => [s.label, s.color])))));
}

function mechanismsSection(run, ri) {
  const sec = el("section", { id: "mechanisms-" + ri }, el("h2", {}, "Mechanisms: " + run.name));
  const p = run.probes;
  if (p.induction && p.induction.rows.length) sec.append(inductionBlock(p.induction, ri));
  if (p.fourier && p.fourier.rows.length) sec.append(fourierBlock(p.fourier, ri));
  if (!hasMechanisms(run))
    sec.append(el("p", { class: "note" }, "No induction scores or embedding spectrum recorded: train a decoder with " +
                   "--probe-induction N, or --task modular."));
  return sec;
}
