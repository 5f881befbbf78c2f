// The curves over steps: metrics.csv's columns, one chart per figure, every run overlaid.

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
