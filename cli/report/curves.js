// The curves over steps: metrics.csv's columns, one chart per figure, every run overlaid (runs
// that differ only by their seed as one group: the median and the min-max band), each run's
// solved step marked, with a smoothing slider and a log/linear switch for every chart.

// Curves over steps: one chart per figure. range: a fixed axis (accuracies on 0-1); log: on a
// log axis unless switched to linear; exact: left out for language models (0 on text).
const CURVES = [
  { title: "loss", cols: ["loss"], log: true },
  { title: "token accuracy", cols: ["train_token_acc", "heldout_token_acc"], range: [0, 1] },
  { title: "sequence accuracy (exact match)", cols: ["train_exact", "heldout_exact"], range: [0, 1], exact: true },
  { title: "held-out loss", cols: ["heldout_loss"], log: true },
  { title: "learning rate", cols: ["lr"] },
  { title: "gradient norm", cols: ["grad_norm"], log: true },
  { title: "gradient noise scale B_simple (sequences)", cols: ["noise_scale"], log: true },
  { title: "weight norm (all parameters)", cols: ["weight_norm"] },
  { title: "in-context loss (late tokens less early ones, nats)", cols: ["in_context_loss"] },
];

// Settings that do not make two runs different experiments: the seed and where files are.
const SEED_BLIND = new Set(["seed", "run", "config", "resume"]);
function seedKey(run) {
  const all = run.settings.all || {};
  return JSON.stringify(Object.keys(all).sort().filter((k) => !SEED_BLIND.has(k)).map((k) => [k, all[k]]));
}

// The runs as groups: those whose settings differ only by their (distinct) seeds form one,
// named by the runs' names' common beginning; any other run is a group of its own.
// Returns [{members: [run index], name, seeds}].
function seedGroups(runs) {
  const byKey = new Map();
  runs.forEach((run, ri) => {
    const k = seedKey(run);
    if (!byKey.has(k)) byKey.set(k, []);
    byKey.get(k).push(ri);
  });
  const groups = [];
  for (const members of byKey.values()) {
    const seeds = members.map((ri) => runs[ri].settings.all.seed);
    if (members.length < 2 || new Set(seeds).size < seeds.length) {
      for (const ri of members) groups.push({ members: [ri], name: runs[ri].name, seeds: [] });
    } else groups.push({ members, name: commonName(members.map((ri) => runs[ri].name)), seeds });
  }
  return groups.sort((a, b) => a.members[0] - b.members[0]);
}
function commonName(names) {
  let n = 0;
  while (names.every((s) => s[n] !== undefined && s[n] === names[0][n])) n += 1;
  const stem = names[0].slice(0, n).replace(/[-_. ]+$/, "");
  return stem || names[0];
}
function groupLabel(g) {
  return g.seeds.length ? g.name + " (" + g.seeds.length + " seeds: " + g.seeds.join(",") + ")" : g.name;
}

// A run's values of one metrics.csv column, as chart points.
function runPoints(run, col) {
  const steps = column(run.metrics, "step"), values = column(run.metrics, col), points = [];
  if (values) values.forEach((v, i) => { if (finite(v)) points.push({ x: Number(steps[i]), y: Number(v), value: v }); });
  return points;
}

// The median of a group's curves at each step any of them has, and their min-max band.
function groupCurve(each) {
  const at = new Map();
  for (const m of each) for (const p of m.points) {
    if (!at.has(p.x)) at.set(p.x, []);
    at.get(p.x).push(p.y);
  }
  const points = [], band = [];
  for (const x of [...at.keys()].sort((a, b) => a - b)) {
    const ys = at.get(x).sort((a, b) => a - b), h = ys.length >> 1;
    const y = ys.length % 2 ? ys[h] : (ys[h - 1] + ys[h]) / 2;
    points.push({ x, y, value: String(y) });
    band.push({ x, lo: ys[0], hi: ys[ys.length - 1] });
  }
  return { points, band };
}

// One chart's series: a run of its own as a line; a group's runs faint, their median and band.
function curveSeries(runs, groups, c) {
  const series = [];
  groups.forEach((g, gi) => c.cols.forEach((col, ci) => {
    const each = g.members.filter((ri) => !(c.exact && runs[ri].model.language_model))
      .map((ri) => ({ ri, points: runPoints(runs[ri], col) })).filter((m) => m.points.length);
    if (!each.length) return;
    const base = { color: COLORS[gi % 8], dash: ci ? "5 3" : "", col };
    const one = (m, faint) => Object.assign({}, base, { label: runs[m.ri].name + " " + col, name: runs[m.ri].name,
                                                        points: m.points, run: m.ri, faint });
    if (g.members.length === 1) { series.push(one(each[0], false)); return; }
    for (const m of each) series.push(one(m, true));
    series.push(Object.assign({}, base, groupCurve(each), { label: g.name + " " + col + " (median)", name: g.name, group: gi }));
  }));
  return series;
}

// The solved steps of the runs drawn in a chart: one labelled line per step.
function solvedMarks(runs, series) {
  const drawn = new Set(series.map((s) => s.run)), byStep = new Map();
  runs.forEach((run, ri) => {
    const at = solvedAt(run);
    if (at === null || !drawn.has(ri)) return;
    if (!byStep.has(at)) byStep.set(at, []);
    byStep.get(at).push(ri);
  });
  return [...byStep].map(([x, rs]) => ({ x, runs: rs, label: (runs.length > 1 ? rs.map((ri) => runs[ri].name)
    .join(", ") + " " : "") + "solved at step " + x }));
}

// The smoothing slider (#smoothing, an EMA weight 0-0.99) and the y-axis switch
// (#curve-scale: log for losses and norms, all linear, all log); each redraws the charts.
function curveControls(state, redraw) {
  const slider = el("input", { type: "range", id: "smoothing", min: 0, max: 0.99, step: 0.01, value: state.smooth });
  const shown = el("output", { id: "smoothing-value" }, String(state.smooth));
  slider.addEventListener("input", () => {
    state.smooth = Number(slider.value);
    shown.textContent = slider.value;
    redraw();
  });
  const scale = el("select", { id: "curve-scale" }, el("option", { value: "auto" }, "log for losses and norms"),
                   el("option", { value: "linear" }, "all linear"), el("option", { value: "log" }, "all log"));
  scale.addEventListener("change", () => { state.scale = scale.value; redraw(); });
  return el("div", { class: "curve-controls" }, el("label", {}, "smoothing ", slider, " ", shown),
            el("label", {}, "y axes ", scale), el("span", { class: "note" }, "(accuracies stay on 0\u20131)"));
}

// The curves section: the controls, a legend entry per run or seed group, a note on how to
// read the lines, and the charts (redrawn by the controls).
function curvesSection(runs) {
  const sec = el("section", { id: "curves" }, el("h2", {}, "Curves over steps"));
  const charts = el("div", { class: "charts" }), groups = seedGroups(runs);
  const longest = Math.max(...runs.map((r) => r.metrics.rows.length));
  const state = { smooth: longest > 100 ? 0.6 : 0, scale: "auto" };
  const draw = () => {
    charts.textContent = "";
    for (const c of CURVES) {
      const series = curveSeries(runs, groups, c);
      if (!series.length) continue;
      const log = state.scale === "log" || (state.scale === "auto" && !!c.log);
      charts.append(lineChart(c.title, series, { log, range: c.range, key: c.cols[0], smooth: state.smooth,
                                                 marks: solvedMarks(runs, series) }));
    }
  };
  draw();
  const key = legend(groups.map((g, gi) => [groupLabel(g), COLORS[gi % 8]]));
  [...key.children].forEach((span, gi) => span.setAttribute("data-group", gi));
  const notes = ["solid: training batches; dashed: held-out set. Hover a point for its value.",
                 "The slider smooths the lines (TensorBoard's exponential moving average), the raw line faint behind."];
  if (groups.some((g) => g.seeds.length))
    notes.push("Seeds of one setting: their median, shaded from their lowest to their highest value, each seed faint.");
  if (runs.some((r) => r.model.language_model))
    notes.push("Exact match is left out for language models: on text it is always 0.");
  sec.append(curveControls(state, draw), key, el("p", { class: "note" }, notes.join(" ")), charts);
  return sec;
}
