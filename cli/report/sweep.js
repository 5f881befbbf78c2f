// A sweep or tuning study (scripts/tools/sweep.py, tune.py): its table and each setting
// against an outcome.

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
