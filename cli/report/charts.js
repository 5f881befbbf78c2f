// The charts every section draws: line charts over steps (round ticks, a constant series
// said in words), and the viridis colour scale of the heat maps and attention maps.

// Round ticks (1, 2 or 5 times a power of ten) covering [lo, hi], about `count` of them:
// [first, ..., last] with first <= lo and last >= hi, so an axis drawn over them ends on a tick.
function niceTicks(lo, hi, count) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, count), power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw * 0.999);
  const first = Math.floor(lo / step + 1e-9) * step, ticks = [];
  for (let v = first; v < hi + step * 0.999; v += step) ticks.push(+(Math.round(v / step) * step).toPrecision(12));
  return ticks;
}

// Ticks of a log axis over [lo, hi] (both > 0): the powers of ten covering it, with 2 and 5
// times them when it spans under three decades; past eight decades every second (third...)
// power, the last at or above hi.
function logTicks(lo, hi) {
  const a = Math.floor(Math.log10(lo) + 1e-9), b = Math.ceil(Math.log10(hi) - 1e-9), ticks = [];
  const marks = b - a < 3 ? [1, 2, 5] : [1], every = Math.ceil((b - a) / 8) || 1;
  for (let e = a; ; e += every) {
    for (const m of marks) if (m === 1 || e < b) ticks.push(+(m * 10 ** e).toPrecision(12));
    if (e >= b) break;
  }
  return ticks;
}

// The ticks of a log axis cut to those just covering [lo, hi]: the last at or below lo to
// the first at or above hi.
function logAxis(lo, hi) {
  const t = logTicks(lo, hi);
  const a = t.filter((v) => v <= lo * (1 + 1e-9)).length - 1;
  const b = t.findIndex((v) => v >= hi * (1 - 1e-9));
  return t.slice(Math.max(0, a), b < 0 ? t.length : b + 1);
}

// A tick's label, for every chart (sweep axes too): a number as written by hand, to 6
// significant digits (0.002, 250), "1e-4" rather than 0.0001 for the very small or large.
function tickText(v) {
  v = Number(v);
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e-3 && a < 1e5) return String(+v.toPrecision(6));
  const [m, e] = v.toExponential().split("e");
  return String(+Number(m).toPrecision(6)) + "e" + Number(e);
}

// Whether values differ only by rounding noise: by at most a billionth of their size, or by
// under 1e-12 (an entropy of 0 written as 1e-24 at one step and 0 at the next).
function isConstant(values) {
  const lo = Math.min(...values), hi = Math.max(...values);
  return hi - lo <= 1e-9 * Math.max(Math.abs(lo), Math.abs(hi)) || hi - lo < 1e-12;
}
// A constant value in words: noise around zero is 0.
function valueText(v) { return Math.abs(v) < 1e-12 ? "0" : fmt(v); }

// A title that fits `chars` characters: shortened with an ellipsis, the full text in a tooltip.
function titleText(x, y, text, chars) {
  const t = svg("text", { x, y, class: "title" });
  t.textContent = text.length > chars ? text.slice(0, chars - 1) + "\u2026" : text;
  if (text.length > chars) t.setAttribute("data-tip", text);
  return t;
}

// TensorBoard's smoothing: an exponential moving average of weight `w`, debiased (divided by
// 1 - w^n after n values) so that the first values are not pulled towards zero.
function ema(ys, w) {
  let last = 0, n = 0;
  return ys.map((y) => {
    last = last * w + (1 - w) * y;
    n += 1;
    return last / (1 - w ** n);
  });
}

// A line chart's size and the margins around its plot.
const CHART = { W: 380, H: 236, L: 54, R: 24, T: 30, B: 34 };

// A line chart: series = [{label, name, color, dash, points: [{x, y, value}], run, col}], with
// optionally band: [{x, lo, hi}] (a shaded range, the points its median), group (its index)
// and faint (a member of a group: small dots, a faint line). opts: key, log, range ([0, 1]:
// a fixed axis), xLabel, xNames (names of the x places 0, 1, ...), smooth (an EMA weight: the
// raw line faint behind the smoothed one), marks ([{x, runs, label}]: labelled vertical lines), dense (no element per point: the
// point nearest the pointer, within 8 px, is put in the chart's data-tip). Each point of a
// chart not dense is a circle.pt whose data-tip gives its value. A chart (not of a fixed
// range) whose every series has two values or more and is constant is its value in words.
function lineChart(title, series, opts) {
  const log = !!opts.log && !opts.range, key = opts.key || title;
  const shown = series.map((s) => s.points.filter((p) => !log || p.y > 0));
  if (!opts.range && shown.flat().length &&
      series.every((s, i) => !shown[i].length || shown[i].length > 1 && isConstant(seriesValues(s, shown[i]))))
    return constantChart(title, series.filter((s, i) => shown[i].length), key);
  const box = svg("svg", { width: CHART.W, height: CHART.H, class: "chart", "data-chart": key,
                           "data-title": title, "data-y-scale": log ? "log" : "linear" });
  box.append(titleText(6, 14, title + (log ? " (log scale)" : ""), 54));
  if (opts.xNames) box.setAttribute("data-x-names", opts.xNames.join(" "));
  if (!shown.flat().length) return box;
  const ax = chartAxes(box, series, shown, opts, log);
  for (const m of opts.marks || []) drawMark(box, ax, m, opts.marks);
  series.forEach((s, si) => drawSeries(box, ax, s, si, shown[si], opts));
  if (opts.dense) denseHover(box, ax, series, shown, opts.xLabel || "step");
  return box;
}

// A series' values: its points' and its band's ends.
function seriesValues(s, pts) {
  return pts.map((p) => p.y).concat((s.band || []).flatMap((q) => [q.lo, q.hi]));
}

// A chart whose series are each constant: "title: value throughout" (each series' value, by its
// name or label, when they differ; a group's members left to its median), in a box marked
// data-constant with the value.
function constantChart(title, all, key) {
  const series = all.filter((s) => !s.faint), vals = series.map((s) => valueText(s.points[0].y));
  const same = vals.every((v) => v === vals[0]);
  const what = same ? vals[0] : series.map((s, i) => (s.name ?? s.label) + " " + vals[i]).join(", ");
  return el("div", { class: "chart constant", "data-chart": key, "data-constant": same ? vals[0] : "" },
            title + ": " + what + " throughout");
}

// The y ticks of a chart: the fixed range's, round powers (log) or round numbers covering ys.
function yTicks(ys, opts, log) {
  const lo = Math.min(...ys), hi = Math.max(...ys);
  const t = opts.range ? niceTicks(opts.range[0], opts.range[1], 5) : log ? logAxis(lo, hi) : niceTicks(lo, hi, 5);
  return t.length > 1 ? t : [t[0], log ? t[0] * 10 : t[0] + 1];
}

// Draws a chart's axes, grid and round ticks (each text.tick with data-axis and data-value,
// each grid line too); returns the scales {sx, sy} from data to the svg.
function chartAxes(box, series, shown, opts, log) {
  const { W, H, L, R, T, B } = CHART, all = shown.flat();
  const ys = all.map((p) => p.y).concat(series.flatMap((s) => (s.band || []).flatMap((b) => [b.lo, b.hi])));
  const xs = all.map((p) => p.x), x0 = Math.min(...xs), x1 = Math.max(...xs);
  const xt = opts.xNames ? namedTicks(opts.xNames) : x1 > x0 ? niceTicks(x0, x1, 5) : niceTicks(x0 - 1, x0 + 1, 2);
  const yt = yTicks(ys.filter((y) => !log || y > 0), opts, log);
  const f = (y) => (log ? Math.log10(y) : y), [ya, yb] = [f(yt[0]), f(yt[yt.length - 1])];
  const [xa, xb] = [xt[0], xt[xt.length - 1]];
  const ax = { sx: (x) => L + ((x - xa) / (xb - xa)) * (W - L - R),
               sy: (y) => T + (1 - (f(y) - ya) / (yb - ya)) * (H - T - B) };
  for (const v of yt) {
    const y = ax.sy(v);
    box.append(svg("line", { x1: L, x2: W - R, y1: y, y2: y, class: "grid", "data-axis": "y", "data-value": v }));
    box.append(tick(L - 4, y + 3, "end", "y", v));
  }
  for (const v of xt) {
    const x = ax.sx(v);
    box.append(svg("line", { x1: x, x2: x, y1: T, y2: H - B, class: "grid", "data-axis": "x", "data-value": v }));
    const t = box.appendChild(tick(x, H - B + 14, "middle", "x", v));
    if (opts.xNames) t.textContent = opts.xNames[v] ?? "";
    if (x + 2.9 * t.textContent.length > W - 2) t.setAttribute("text-anchor", "end");
  }
  const xl = svg("text", { x: W - R, y: H - 4, "text-anchor": "end" });
  xl.textContent = opts.xLabel || "step";
  box.append(xl, svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }),
             svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  return ax;
}
// The ticks of an axis of named places (0 .. n-1): every 1st, 2nd, 5th or 10th... place, so
// that the names (about 5.5 px a character) are 8 px apart or more.
function namedTicks(names) {
  const n = names.length, room = (CHART.W - CHART.L - CHART.R) / Math.max(1, n - 1);
  const need = 8 + 5.5 * Math.max(...names.map((s) => s.length));
  const every = [1, 2, 5, 10, 20, 50, 100].find((k) => k * room >= need) || 100;
  const ticks = [];
  for (let v = 0; v < n - 1 + every; v += every) ticks.push(v);
  return ticks.length > 1 ? ticks : [0, 1];
}
function tick(x, y, anchor, axis, v) {
  const t = svg("text", { x, y, "text-anchor": anchor, class: "tick", "data-axis": axis, "data-value": v });
  t.textContent = tickText(v);
  return t;
}

// A labelled vertical line at m.x (line.mark, data-run: the runs it marks, data-step); the
// label is drawn once per x, the labels of different x on rows of their own.
function drawMark(box, ax, m, marks) {
  const x = ax.sx(m.x), xs = [...new Set(marks.map((k) => k.x))], row = xs.indexOf(m.x);
  box.append(svg("line", { x1: x, x2: x, y1: CHART.T, y2: CHART.H - CHART.B, class: "mark",
                           "data-run": m.runs.join(" "), "data-step": m.x }));
  if (marks.find((k) => k.x === m.x) !== m) return;
  const right = x > (CHART.L + CHART.W - CHART.R) / 2, room = right ? x - CHART.L : CHART.W - CHART.R - x;
  const t = titleText(right ? x - 3 : x + 3, CHART.T + 10 + 11 * row, m.label, Math.floor(room / 5.5));
  t.setAttribute("class", "mark-label");
  t.setAttribute("text-anchor", right ? "end" : "start");
  box.append(t);
}

// One series: its band, its line (smoothed over a faint raw line when opts.smooth > 0) and,
// unless the chart is dense, its points.
function drawSeries(box, ax, s, si, pts, opts) {
  const at = (p, y) => ax.sx(p.x) + "," + ax.sy(y ?? p.y), ids = {};
  for (const [k, v] of [["data-run", s.run], ["data-col", s.col], ["data-group", s.group]])
    if (v !== undefined) ids[k] = v;
  if (s.band) {
    const b = s.band.filter((q) => !opts.log || q.lo > 0);
    const ring = b.map((q) => at(q, q.hi)).concat(b.slice().reverse().map((q) => at(q, q.lo)));
    box.append(svg("polygon", Object.assign({ points: ring.join(" "), fill: s.color, class: "band" }, ids)));
  }
  const kind = s.faint ? "member" : s.band ? "median" : "line", smooth = opts.smooth > 0 && !s.faint;
  const line = (cls, ys) => svg("polyline", Object.assign({ points: pts.map((p, i) => at(p, ys && ys[i])).join(" "),
    stroke: s.color, "stroke-dasharray": s.dash || "", class: cls }, ids));
  box.append(line(smooth ? kind + " raw" : kind));
  if (smooth) box.append(line(kind + " smooth", ema(pts.map((p) => p.y), opts.smooth)));
  if (opts.dense || s.band) return;
  for (const p of pts)
    box.append(svg("circle", { cx: ax.sx(p.x), cy: ax.sy(p.y), r: s.faint ? 1.6 : 2.2, fill: s.color,
                               class: s.faint ? "pt faint" : "pt", "data-series": si, "data-run": s.run,
                               "data-col": s.col, "data-value": p.value, "data-x": p.x,
                               "data-tip": s.label + "\n" + (opts.xLabel || "step") + " " + p.x + ": " + p.value }));
}

// A dense chart's hover: the point nearest the pointer, within 8 px, in the chart's data-tip.
function denseHover(box, ax, series, shown, xLabel) {
  const pts = series.flatMap((s, si) => shown[si].map((p) => [ax.sx(p.x), ax.sy(p.y), s.label, p]));
  box.addEventListener("mousemove", (e) => {
    const at = new DOMPoint(e.clientX, e.clientY).matrixTransform(box.getScreenCTM().inverse());
    let best = null, d2 = 64;
    for (const q of pts) {
      const d = (q[0] - at.x) ** 2 + (q[1] - at.y) ** 2;
      if (d < d2) { d2 = d; best = q; }
    }
    if (best) box.setAttribute("data-tip", best[2] + "\n" + xLabel + " " + best[3].x + ": " + best[3].value);
    else box.removeAttribute("data-tip");
  });
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

// A colour bar from lo to hi (viridis), its ends labelled left and right and round ticks
// between them below it (text.tick, data-axis "colour"): with log, the colours are spread over
// log10 of the values and the ticks are round powers of ten.
function colorbar(lo, hi, label, log) {
  const box = svg("svg", { width: 420, height: 34, class: "colorbar", "data-scale": log ? "log" : "linear" });
  const x0 = 64, w = 150, f = (v) => (log ? Math.log10(v) : v);
  for (let k = 0; k < 50; ++k)
    box.append(svg("rect", { x: x0 + k * 3, y: 4, width: 3, height: 10, fill: viridis(k / 49) }));
  const a = svg("text", { x: x0 - 4, y: 13, "text-anchor": "end" });
  a.textContent = fmt(lo);
  const b = svg("text", { x: x0 + w + 4, y: 13 });
  b.textContent = fmt(hi) + "  " + label;
  box.append(a, b);
  if (!(hi > lo)) return box;
  const within = (t) => t.filter((v) => v > lo && v < hi);
  const powers = within(log ? logTicks(lo, hi).filter((v) => Number.isInteger(Math.log10(v))) : []);
  const inner = !log ? within(niceTicks(lo, hi, 4)) : powers.length > 1 ? powers : within(logTicks(lo, hi));
  const every = Math.ceil(inner.length / 5);
  inner.filter((v, i) => i % every === 0).forEach((v) => {
    const x = x0 + ((f(v) - f(lo)) / (f(hi) - f(lo))) * w;
    box.append(svg("line", { x1: x, x2: x, y1: 14, y2: 18, class: "axis", "data-value": v }),
               tick(x, 28, "middle", "colour", v));
  });
  return box;
}
