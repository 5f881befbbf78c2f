// The ablation part of "What matters" (what_matters.js), from run.interventions.ablation
// (cli/report_ablation.cpp: every component zero-ablated on the first held-out examples).
// Heads as the attention section lays them out, one row per attention named as there, each
// cell the change in exact match (a language model: in loss); then the MLPs' and layers' bars.

// A row's change, and its effect (>= 0 where it hurts: exact match drops, loss rises).
function ablationChange(d, r) { return d.language_model ? r.delta_loss : r.delta_exact_match; }
function ablationEffect(d, r) { return d.language_model ? r.delta_loss : -r.delta_exact_match; }

// The figures of a row (or of the intact model) in words.
function ablationFigures(d, r) {
  const pct = (v) => (100 * v).toFixed(2) + "%";
  const exact = d.language_model ? "" : "exact match " + pct(r.exact_match) + ", ";
  return exact + "token accuracy " + pct(r.token_accuracy) + ", loss " + r.loss.toFixed(4);
}

// The change as a cell's text: points of exact match, or nats of loss.
function ablationText(d, v) { return (v > 0 ? "+" : "") + (d.language_model ? v.toFixed(3) : (100 * v).toFixed(1)); }

function ablationMark(d, r, cls, attrs) {
  const v = ablationChange(d, r);
  const tip = r.component + " zeroed: " + ablationFigures(d, r) + " (intact: " + ablationFigures(d, d.intact) + ")";
  return el("span", Object.assign({ class: cls, "data-component": r.component, "data-value": v, "data-tip": tip },
                                  attrs), ablationText(d, v));
}

// Forward order: encoder before decoder, by block; in a block self-attention, cross, the MLP, the layer.
function ablationOrder(a, b) {
  const key = (s) => [s.startsWith("decoder") ? 1 : 0, +s.match(/blocks\.(\d+)/)[1],
    s.endsWith("cross_attn") ? 1 : s.endsWith(".mlp") ? 2 : /blocks\.\d+$/.test(s) ? 3 : 0];
  const x = key(a), y = key(b);
  return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
}

function ablationHeadCell(d, r, m, t) {
  const style = "background:" + viridis(t) + (t > 0.6 ? ";color:#000" : "");
  return ablationMark(d, r, "ablation-cell", { "data-head": m[2], style });
}

function ablationBar(d, r, t) {
  return el("div", { class: "ablation-bar-row", "data-component": r.component },
            el("span", { class: "layer-name" }, r.component),
            el("span", { class: "ablation-bar", style: "width:" + Math.round(200 * Math.max(0, t)) + "px" }),
            ablationMark(d, r, "ablation-bar-value", {}));
}

function ablationView(run, ri) {
  const d = run.interventions && run.interventions.ablation;
  if (!d) return null;
  // The largest effect is the colour scale's top (nothing hurts: 1 point, or 1 nat).
  const top = Math.max(0, ...d.rows.map((r) => ablationEffect(d, r))) || (d.language_model ? 1 : 0.01);
  const rows = new Map(), bars = [];
  for (const r of d.rows) {
    const m = r.component.match(/^(.*)\.h(\d+)$/), t = ablationEffect(d, r) / top;
    if (!m) { bars.push([r.component, ablationBar(d, r, t)]); continue; }
    if (!rows.has(m[1])) rows.set(m[1], []);
    rows.get(m[1])[+m[2]] = ablationHeadCell(d, r, m, t);
  }
  const row = (k) => el("div", { class: "ablation-row", "data-layer": k }, el("div", { class: "layer-name" }, k),
                        ...rows.get(k));
  const what = d.language_model ? "rise in loss (nats)" : "drop in exact match (points)";
  return el("div", { class: "ablation-view", "data-run": ri },
    el("h3", {}, "Ablation: each component zeroed, on " + d.examples + " held-out " +
       (d.language_model ? "windows" : "examples")),
    el("p", { class: "note" }, "Intact: " + ablationFigures(d, d.intact) + ". Each cell: the change when " +
       "that head is zeroed (" + (d.language_model ? "loss, nats" : "exact match, points") + "); below, each " +
       "MLP and layer. Hover for the figures."),
    colorbar(0, d.language_model ? top : 100 * top, what),
    el("div", { class: "ablation-grid" }, ...[...rows.keys()].sort(ablationOrder).map(row)),
    el("div", { class: "ablation-bars" }, ...bars.sort((a, b) => ablationOrder(a[0], b[0])).map((b) => b[1])));
}
