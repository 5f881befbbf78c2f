// The charts every section draws: line charts over steps, and the viridis colour scale of the
// heat maps and attention maps.

// A line chart: series = [{label, color, dash, points: [{x, y, value}]}]. Each point is a circle
// whose data-tip gives its value, or with opts.dense (too many points for an element each) the
// chart has one mousemove handler that puts the point nearest the pointer, within 8 px, in the
// chart's data-tip.
function lineChart(title, series, opts) {
  const W = 380, H = 230, L = 54, R = 10, T = 22, B = 34;
  const log = !!opts.log;
  const all = series.flatMap((s) => s.points).filter((p) => !log || p.y > 0);
  const box = svg("svg", { width: W, height: H, class: "chart", "data-chart": opts.key || title });
  const head = svg("text", { x: L, y: 14 }); head.textContent = title + (log ? " (log scale)" : "");
  box.append(head);
  if (!all.length) return box;
  let [x0, x1] = [Math.min(...all.map((p) => p.x)), Math.max(...all.map((p) => p.x))];
  let ys = all.map((p) => (log ? Math.log10(p.y) : p.y));
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => T + (1 - ((log ? Math.log10(y) : y) - y0) / (y1 - y0)) * (H - T - B);
  for (let k = 0; k <= 4; ++k) {
    const yv = y0 + ((y1 - y0) * k) / 4, y = T + (1 - k / 4) * (H - T - B);
    box.append(svg("line", { x1: L, x2: W - R, y1: y, y2: y, class: "grid" }));
    const t = svg("text", { x: L - 4, y: y + 3, "text-anchor": "end" }); t.textContent = fmt(log ? 10 ** yv : yv);
    box.append(t);
    const xv = x0 + ((x1 - x0) * k) / 4, xt = svg("text", { x: sx(xv), y: H - B + 14, "text-anchor": "middle" });
    xt.textContent = Number.isInteger(xv) || x1 - x0 >= 8 ? Math.round(xv) : ""; box.append(xt);
  }
  const xl = svg("text", { x: W - R, y: H - 4, "text-anchor": "end" }); xl.textContent = opts.xLabel || "step";
  box.append(xl, svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }),
             svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  series.forEach((s, si) => {
    const pts = s.points.filter((p) => !log || p.y > 0);
    box.append(svg("polyline", { points: pts.map((p) => sx(p.x) + "," + sy(p.y)).join(" "), stroke: s.color,
                                 "stroke-dasharray": s.dash || "" }));
    if (!opts.dense) for (const p of pts)
      box.append(svg("circle", { cx: sx(p.x), cy: sy(p.y), r: 2.2, fill: s.color, class: "pt", "data-series": si,
                                 "data-run": s.run, "data-col": s.col, "data-value": p.value, "data-x": p.x,
                                 "data-tip": s.label + "\n" + (opts.xLabel || "step") + " " + p.x + ": " + p.value }));
  });
  if (opts.dense) {
    const pts = series.flatMap((s) => s.points.filter((p) => !log || p.y > 0).map((p) => [sx(p.x), sy(p.y), s.label, p]));
    box.addEventListener("mousemove", (e) => {
      const at = new DOMPoint(e.clientX, e.clientY).matrixTransform(box.getScreenCTM().inverse());
      let best = null, d2 = 64;
      for (const q of pts) { const d = (q[0] - at.x) ** 2 + (q[1] - at.y) ** 2; if (d < d2) { d2 = d; best = q; } }
      if (best) box.setAttribute("data-tip", best[2] + "\n" + (opts.xLabel || "step") + " " + best[3].x + ": " + best[3].value);
      else box.removeAttribute("data-tip");
    });
  }
  return box;
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

function colorbar(lo, hi, label) {
  const box = svg("svg", { width: 420, height: 20, class: "colorbar" });
  for (let k = 0; k < 50; ++k) box.append(svg("rect", { x: 64 + k * 3, y: 4, width: 3, height: 10, fill: viridis(k / 49) }));
  const a = svg("text", { x: 60, y: 13, "text-anchor": "end" }); a.textContent = fmt(lo);
  const b = svg("text", { x: 218, y: 13 }); b.textContent = fmt(hi) + "  " + label;
  box.append(a, b);
  return box;
}

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
// times them when it spans under three decades.
function logTicks(lo, hi) {
  const a = Math.floor(Math.log10(lo) + 1e-9), b = Math.ceil(Math.log10(hi) - 1e-9), ticks = [];
  const marks = b - a < 3 ? [1, 2, 5] : [1];
  for (let e = a; e <= b; ++e) for (const m of marks) if (m * 10 ** e <= 10 ** b) ticks.push(+(m * 10 ** e).toPrecision(12));
  return ticks;
}
