// A sweep's or study's parallel coordinates: an axis per setting and outcome, a line per point.

// summary.csv columns that are bookkeeping, not outcomes: no axis of their own.
const PARALLEL_SKIP = new Set(["run", "exit", "trial", "state", "cpu_seconds"]);

// The columns drawn as axes: every setting, and each outcome with numbers that are not all the same.
function parallelColumns(table) {
  return table.columns.filter((c) => !OUTCOMES.has(c) ||
    (!PARALLEL_SKIP.has(c) && column(table, c).some(finite) && new Set(column(table, c).filter(finite)).size > 1));
}

// One axis at x: its name below, its round ticks (a tick mark each, data-tick its value) and, for
// solved_at_step with points never solved, a "not solved" place above it.
function parallelAxis(box, name, values, x, f) {
  const kept = values.filter((v) => v !== "" && !notSolved(name, v));
  const axis = valueAxis(kept, name), y = (v) => f.T + (1 - axis.at(v)) * (f.H - f.T - f.B);
  const g = svg("g", { class: "pc-axis", "data-axis": name, "data-scale": axis.kind });
  g.append(svg("line", { x1: x, x2: x, y1: f.T, y2: f.H - f.B, class: "axis" }));
  for (const v of fittingTicks(axis, y, true)) {
    const t = svg("text", { x: x - 5, y: y(v) + 3, "text-anchor": "end" }); t.textContent = axis.text(v);
    g.append(svg("line", { x1: x - 3, x2: x, y1: y(v), y2: y(v), class: "axis pc-tick", "data-tick": v }), t);
  }
  const label = svg("text", { x, y: f.H - f.B + 16, "text-anchor": "middle", class: "pc-name" });
  label.textContent = name; g.append(label);
  const out = values.some((v) => notSolved(name, v));
  if (out) {
    const t = svg("text", { x, y: f.band - 7, "text-anchor": "middle", class: "not-solved", "data-y": f.band });
    t.textContent = "not solved";
    g.append(svg("line", { x1: x, x2: x, y1: f.band, y2: f.T, class: "axis", "stroke-dasharray": "2 2" }),
             svg("line", { x1: x - 4, x2: x + 4, y1: f.band, y2: f.band, class: "axis" }), t);
  }
  box.append(g);
  return (v) => (v === "" || v === undefined ? null : notSolved(name, v) ? f.band : y(v));
}

// Every setting and outcome as an axis and each sweep point as a line through its values,
// coloured by `outcome` (viridis, low to high; grey: not solved or missing). Hover names the run.
function parallelView(table, outcome, runs) {
  const cols = parallelColumns(table), gap = 120, L = 80;
  const f = { T: 52, B: 44, H: 306, band: 34 };
  const W = L + gap * (cols.length - 1) + 40, R = column(table, "run") || [];
  const box = svg("svg", { width: W, height: f.H, class: "chart parallel", id: "sweep-parallel-svg" });
  const ys = cols.map((c, k) => parallelAxis(box, c, column(table, c), L + k * gap, f));
  const O = column(table, outcome), scored = O.filter((v) => finite(v) && !notSolved(outcome, v)).map(Number);
  const lo = Math.min(...scored), hi = Math.max(...scored);
  table.rows.forEach((row, i) => {
    const pts = cols.map((c, k) => [L + k * gap, ys[k](row[table.columns.indexOf(c)])]).filter((p) => p[1] !== null);
    const score = finite(O[i]) && !notSolved(outcome, O[i]) ? (Number(O[i]) - lo) / (hi - lo || 1) : null;
    const tip = (R[i] ? R[i] + "\n" : "") + cols.map((c) => c + " " + row[table.columns.indexOf(c)]).join("\n");
    const line = svg("polyline", { points: pts.map((p) => p.join(",")).join(" "), class: "pc-line", "data-row": i,
                                   "data-point": R[i] ?? "", stroke: score === null ? "#aaa" : viridis(score), "data-tip": tip });
    const ri = sweepRunIndex(runs, R[i]);
    if (ri >= 0) { const a = svg("a", { href: "#run-" + ri }); a.append(line); box.append(a); } else box.append(line);
  });
  const head = svg("text", { x: 8, y: 14 });
  const range = lo === hi ? " (all " + fmt(lo) + ")" : " (" + fmt(lo) + " dark \u2192 " + fmt(hi) + " yellow)";
  head.textContent = "colour: " + outcome + (scored.length ? range : " (no values)");
  box.append(head);
  return box;
}
