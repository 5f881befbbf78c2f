// A sweep or tuning study (scripts/tools/sweep.py, tune.py): its table, each setting against an
// outcome, and all of them at once in parallel coordinates (sweep_parallel.js).

// A sweep's summary.csv: the columns that are outcomes of a point, not its settings.
const OUTCOMES = new Set(["run", "heldout_exact", "heldout_token_acc", "heldout_loss", "solved_at_step", "steps",
                          "seconds", "cpu_seconds", "exit", "objective", "state", "trial", "seeds", "spread"]);

// The run (index in runs) a summary.csv row names, or -1.
function sweepRunIndex(runs, name) { return runs.findIndex((run) => (run.dir_name ?? run.name) === name); }

// The colour of each value of the setting `by` (null: one colour), in the values' order.
function colourScale(table, by) {
  const col = by ? column(table, by) : [];
  const values = [...new Set(col)].sort((a, b) => (finite(a) && finite(b) ? a - b : a.localeCompare(b)));
  return { by, values, colour: (i) => (by ? COLORS[values.indexOf(col[i]) % 8] : COLORS[0]) };
}

// The scatter's points: x and y in px, points at the same setting value spread apart across
// (10 px apart at most, in the rows' order) so that none hides another; not-solved ones in the band.
function scatterPoints(table, param, outcome, frame) {
  const P = column(table, param), Y = column(table, outcome), R = column(table, "run") || [];
  const solved = Y.filter((v, i) => finite(v) && !notSolved(outcome, v));
  const xAxis = valueAxis(P, param), yAxis = valueAxis(solved, outcome);
  const sx = (v) => frame.L + frame.pad + xAxis.at(v) * (frame.W - frame.L - frame.R - 2 * frame.pad);
  const sy = (v) => frame.T + (1 - yAxis.at(v)) * (frame.H - frame.T - frame.B);
  const points = [], group = new Map();
  P.forEach((v, i) => {
    if (!finite(Y[i])) return;
    if (!group.has(v)) group.set(v, []);
    const out = notSolved(outcome, Y[i]);
    const p = { i, x: sx(v), y: out ? frame.band : sy(Y[i]), value: Y[i], label: v, run: R[i], out };
    group.get(v).push(p); points.push(p);
  });
  for (const g of group.values()) {
    const step = Math.min(10, 48 / g.length);
    g.forEach((p, k) => { p.x += (k - (g.length - 1) / 2) * step; });
  }
  return { points, xAxis, yAxis, sx, sy };
}

// The axes of a scatter: round ticks thinned to fit, the setting's name, the not-solved band.
function scatterAxes(box, f, s, param, anyOut) {
  box.append(svg("line", { x1: f.L, x2: f.L, y1: f.T, y2: f.H - f.B, class: "axis" }),
             svg("line", { x1: f.L, x2: f.W - f.R, y1: f.H - f.B, y2: f.H - f.B, class: "axis" }));
  for (const v of fittingTicks(s.yAxis, (t) => s.sy(t), true)) {
    const t = svg("text", { x: f.L - 4, y: s.sy(v) + 3, "text-anchor": "end", class: "ytick" });
    t.textContent = s.yAxis.text(v);
    box.append(t, svg("line", { x1: f.L, x2: f.W - f.R, y1: s.sy(v), y2: s.sy(v), class: "grid" }));
  }
  for (const v of fittingTicks(s.xAxis, (t) => s.sx(t), false)) {
    const t = svg("text", { x: s.sx(v), y: f.H - f.B + 14, "text-anchor": "middle", class: "xtick",
                            "data-tick": v });
    t.textContent = s.xAxis.text(v); box.append(t);
  }
  const xl = svg("text", { x: f.W - f.R, y: f.H - 4, "text-anchor": "end" });
  xl.textContent = param + (s.xAxis.kind === "log" ? " (log axis)" : ""); box.append(xl);
  if (!anyOut) return;
  const band = { x: f.L, y: f.band - 8, width: f.W - f.L - f.R, height: 16, class: "not-solved-band" };
  box.append(svg("rect", band));
  const t = svg("text", { x: f.L - 4, y: f.band + 3, "text-anchor": "end", class: "not-solved" });
  t.textContent = "not solved";
  box.append(t);
}

// One setting against one outcome, a point per sweep point coloured by a second setting; each
// point links to its run's section.
function sweepScatter(table, param, outcome, runs, colours) {
  const anyOut = column(table, outcome).some((v) => notSolved(outcome, v));
  const f = { W: 330, H: 230, L: 62, R: 14, T: anyOut ? 48 : 24, B: 34, pad: 12, band: 34 };
  const box = svg("svg", { width: f.W, height: f.H, class: "chart", "data-scatter": param });
  const head = svg("text", { x: f.L, y: 14 }); head.textContent = outcome + " against " + param;
  box.append(head);
  const s = scatterPoints(table, param, outcome, f);
  if (!s.points.length) return box;
  scatterAxes(box, f, s, param, anyOut);
  for (const p of s.points) {
    const ri = sweepRunIndex(runs, p.run), shown = p.out ? "not solved" : p.value;
    const dot = svg("circle", {
      cx: p.x, cy: p.y, r: 4.5, fill: colours.colour(p.i), "fill-opacity": 0.75, class: "pt",
      "data-param": param, "data-x": p.label, "data-value": p.value, "data-point": p.run ?? "",
      "data-not-solved": p.out ? "yes" : "no",
      "data-tip": (p.run ? p.run + "\n" : "") + param + " " + p.label + ": " + outcome + " " + shown,
    });
    if (ri < 0) { box.append(dot); continue; }
    const a = svg("a", { href: "#run-" + ri });
    a.append(dot);
    box.append(a);
  }
  return box;
}

// How two cells of `col` sort: numbers by value, text alphabetically; not-solved always last.
function sweepOrder(col, dir) {
  return (x, y) => {
    const ox = notSolved(col, x), oy = notSolved(col, y);
    if (ox || oy) return ox - oy;
    return (finite(x) && finite(y) ? Number(x) - Number(y) : x.localeCompare(y)) * dir;
  };
}

// summary.csv as a table sortable by any column; names link to their runs; solved_at_step -1
// reads "not solved".
function sweepTable(table, runs) {
  const t = el("table", { id: "sweep-table" }), order = { col: -1, dir: 1 };
  const head = el("tr"), body = el("tbody"), runAt = table.columns.indexOf("run");
  const draw = () => {
    body.textContent = "";
    const rows = [...table.rows];
    if (order.col >= 0) {
      const by = sweepOrder(table.columns[order.col], order.dir);
      rows.sort((a, b) => by(a[order.col], b[order.col]));
    }
    for (const r of rows) body.append(el("tr", { "data-point": r[runAt] ?? "" }, ...r.map((v, c) => {
      const ri = table.columns[c] === "run" ? sweepRunIndex(runs, v) : -1, out = notSolved(table.columns[c], v);
      return el("td", { class: out ? "not-solved" : finite(v) ? "num" : "", "data-col": table.columns[c] },
                ri >= 0 ? el("a", { href: "#run-" + ri }, v) : out ? "not solved" : v);
    })));
  };
  table.columns.forEach((c, i) => {
    const th = el("th", { class: "sortable", title: "sort", "data-col": c }, c);
    th.addEventListener("click", () => {
      order.dir = order.col === i ? -order.dir : 1;
      order.col = i;
      draw();
    });
    head.append(th);
  });
  t.append(el("thead", {}, head), body);
  draw();
  return t;
}

// A select of `options` (the first chosen unless `chosen` is one of them).
function picker(id, options, chosen) {
  const pick = el("select", { id }, ...options.map((o) => el("option", { value: o }, o)));
  pick.value = options.includes(chosen) ? chosen : options[0];
  return pick;
}

// The sweep's table, each setting against a chosen outcome (points coloured by a chosen second
// setting), and the parallel coordinates of every setting and outcome.
function sweepSection(sweep, runs) {
  const table = sweep.table;
  const sec = el("section", { id: "sweep" }, el("h2", {}, "Sweep " + sweep.path),
                 el("p", { class: "note" }, "Click a column to sort (\u201cnot solved\u201d stays last)."),
                 sweepTable(table, runs));
  const params = table.columns.filter((c) => !OUTCOMES.has(c));
  const outcomes = table.columns.filter((c) => OUTCOMES.has(c) && c !== "run" && column(table, c).some(finite));
  if (!params.length || !outcomes.length) return sec;
  const first = outcomes.includes("objective") ? "objective" : "heldout_exact";
  const pick = picker("sweep-outcome", outcomes, first);
  const varied = params.filter((p) => new Set(column(table, p)).size > 1);
  const by = picker("sweep-colour", ["(one colour)", ...params], varied[1] ?? varied[0] ?? "(one colour)");
  const charts = el("div", { class: "charts" });
  const key = el("div", { class: "legend", id: "sweep-colour-legend" });
  const parallel = el("div", { id: "sweep-parallel-chart" });
  const plot = () => {
    const colours = colourScale(table, by.value === "(one colour)" ? null : by.value);
    charts.textContent = ""; key.textContent = ""; parallel.textContent = "";
    for (const p of params) charts.append(sweepScatter(table, p, pick.value, runs, colours));
    if (colours.by) key.append(legend(colours.values.map((v, k) => [colours.by + " " + v, COLORS[k % 8]])));
    parallel.append(parallelView(table, pick.value, runs));
  };
  pick.addEventListener("change", plot); by.addEventListener("change", plot);
  plot();
  sec.append(el("h3", {}, "Each setting against ", pick, " coloured by ", by), key,
             el("p", { class: "note" }, "One point per sweep point (points at the same value set side by side); " +
                "click a point for its run."), charts,
             el("h3", { id: "sweep-parallel" }, "All settings and outcomes (parallel coordinates)"),
             el("p", { class: "note" }, "A line per sweep point through its value on each axis, coloured by " +
                "the outcome chosen above; hover a line for its run, click it for the run's section."), parallel);
  return sec;
}
