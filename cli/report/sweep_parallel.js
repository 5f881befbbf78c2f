// A sweep's or study's parallel coordinates: an axis per setting and outcome, a line per point.

// summary.csv columns that are bookkeeping, not outcomes: no axis of their own.
const PARALLEL_SKIP = new Set(["run", "exit", "trial", "state", "cpu_seconds"]);

// The columns drawn as axes: every setting, and each outcome with numbers that are not all the same.
function parallelColumns(table) {
  const varies = (c) => new Set(column(table, c).filter(finite)).size > 1;
  return table.columns.filter((c) => !OUTCOMES.has(c) || (!PARALLEL_SKIP.has(c) && varies(c)));
}

// One axis at x: its name below, its round ticks (a tick mark each, data-tick its value) and, for
// solved_at_step with points never solved, a "not solved" place above it.
function parallelAxis(box, name, values, x, f) {
  const kept = values.filter((v) => v !== "" && !notSolved(name, v));
  const axis = valueAxis(kept, name);
  const y = (v) => f.T + (1 - axis.at(v)) * (f.H - f.T - f.B);
  const g = svg("g", { class: "pc-axis", "data-axis": name, "data-scale": axis.kind });
  g.append(svg("line", { x1: x, x2: x, y1: f.T, y2: f.H - f.B, class: "axis" }));
  for (const v of fittingTicks(axis, y, true)) {
    const t = svg("text", { x: x - 5, y: y(v) + 3, "text-anchor": "end" });
    t.textContent = axis.text(v);
    const mark = { x1: x - 3, x2: x, y1: y(v), y2: y(v), class: "axis pc-tick", "data-tick": v };
    g.append(svg("line", mark), t);
  }
  const label = svg("text", { x, y: f.H - f.B + 16, "text-anchor": "middle", class: "pc-name" });
  label.textContent = name; g.append(label);
  const out = values.some((v) => notSolved(name, v));
  if (out) {
    const t = svg("text", { x, y: f.band - 7, "text-anchor": "middle", class: "not-solved",
                            "data-y": f.band });
    t.textContent = "not solved";
    const up = { x1: x, x2: x, y1: f.band, y2: f.T, class: "axis", "stroke-dasharray": "2 2" };
    g.append(svg("line", up),
             svg("line", { x1: x - 4, x2: x + 4, y1: f.band, y2: f.band, class: "axis" }), t);
  }
  box.append(g);
  return (v) => (v === "" || v === undefined ? null : notSolved(name, v) ? f.band : y(v));
}

// One sweep point's line through its place on each axis (xs, ys), coloured by its score (0 to 1,
// null: grey); its tip names the run and its values; it links to the run's section.
function parallelLine(table, i, cols, xs, ys, score, runs) {
  const row = table.rows[i], run = (column(table, "run") || [])[i];
  const cell = (c) => row[table.columns.indexOf(c)];
  const said = (c) => (notSolved(c, cell(c)) ? "not solved" : cell(c));
  const pts = cols.map((c, k) => [xs[k], ys[k](cell(c))]).filter((p) => p[1] !== null);
  const line = svg("polyline", {
    points: pts.map((p) => p.join(",")).join(" "), class: "pc-line", "data-row": i,
    "data-point": run ?? "", stroke: score === null ? "#aaa" : viridis(score),
    "data-tip": (run ? run + "\n" : "") + cols.map((c) => c + " " + said(c)).join("\n"),
  });
  const ri = sweepRunIndex(runs, run);
  if (ri < 0) return line;
  const a = svg("a", { href: "#run-" + ri });
  a.append(line);
  return a;
}

// Every setting and outcome as an axis and each sweep point as a line through its values,
// coloured by `outcome` (viridis, low to high; grey: not solved or missing). Hover names the run.
function parallelView(table, outcome, runs) {
  const cols = parallelColumns(table), gap = 120, L = 80;
  const f = { T: 52, B: 44, H: 306, band: 34 };
  const W = L + gap * (cols.length - 1) + 40;
  const box = svg("svg", { width: W, height: f.H, class: "chart parallel", id: "sweep-parallel-svg" });
  const xs = cols.map((c, k) => L + k * gap);
  const ys = cols.map((c, k) => parallelAxis(box, c, column(table, c), xs[k], f));
  const O = column(table, outcome), scores = (v) => finite(v) && !notSolved(outcome, v);
  const scored = O.filter(scores).map(Number), lo = Math.min(...scored), hi = Math.max(...scored);
  table.rows.forEach((row, i) => {
    const score = scores(O[i]) ? (Number(O[i]) - lo) / (hi - lo || 1) : null;
    box.append(parallelLine(table, i, cols, xs, ys, score, runs));
  });
  const head = svg("text", { x: 8, y: 14 });
  const range = lo === hi ? " (all " + fmt(lo) + ")"
                          : " (" + fmt(lo) + " dark \u2192 " + fmt(hi) + " yellow)";
  head.textContent = "colour: " + outcome + (scored.length ? range : " (no values)");
  box.append(head);
  return box;
}
