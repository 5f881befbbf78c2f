// The axes of a sweep's charts (sweep.js, sweep_parallel.js): a setting's or outcome's values on
// a log, linear or category scale with round ticks, and tick labels thinned so none overprints.

// Settings searched over decades: on a log axis whenever their values are all positive.
const LOG_SETTINGS = new Set(["lr", "min-lr", "weight-decay", "eps"]);
// Outcomes that are shares (0 to 1): their axes span 0 to 1.
const SHARE_OUTCOMES = new Set(["heldout_exact", "heldout_token_acc"]);

// A tick's label: 3 significant digits, "1e-4" rather than 0.0001 for the very small or large.
function tickText(v) {
  const r = Number(Number(v).toPrecision(3));
  return r !== 0 && (Math.abs(r) < 1e-3 || Math.abs(r) >= 1e5) ? r.toExponential() : String(r);
}

// An axis over `values` (texts; "" left out): {kind, ticks, at(v): 0..1 along the axis, text(v)}.
// Numbers go on a log axis (ends on ticks of logTicks) for a LOG_SETTINGS name or values spanning
// 20x or more, else on a linear one (niceTicks; whole numbers only for whole-number values);
// anything else is evenly spaced categories.
function valueAxis(values, name) {
  const vals = values.filter((v) => v !== "" && v !== undefined);
  const nums = vals.map(Number);
  if (!vals.length || !vals.every(finite)) {
    const order = (a, b) => String(a).localeCompare(String(b), undefined, { numeric: true });
    const cats = [...new Set(vals)].sort(order);
    return { kind: "category", ticks: cats, at: (v) => (cats.indexOf(v) + 0.5) / cats.length, text: String };
  }
  const lo = Math.min(...nums), hi = Math.max(...nums);
  const log = lo > 0 && hi > lo && (LOG_SETTINGS.has(name) || hi >= 20 * lo);
  if (log) {
    const all = logTicks(lo, hi), a = Math.max(...all.filter((t) => t <= lo * (1 + 1e-9)));
    const b = Math.min(...all.filter((t) => t >= hi * (1 - 1e-9)));
    const ticks = all.filter((t) => t >= a && t <= b), la = Math.log10(a), lb = Math.log10(b);
    return { kind: "log", ticks, at: (v) => (Math.log10(Number(v)) - la) / (lb - la), text: tickText };
  }
  let ticks = SHARE_OUTCOMES.has(name) ? [0, 0.25, 0.5, 0.75, 1] : niceTicks(lo, hi, 4);
  if (SHARE_OUTCOMES.has(name) && (lo < 0 || hi > 1)) ticks = niceTicks(Math.min(0, lo), Math.max(1, hi), 4);
  if (nums.every(Number.isInteger)) ticks = ticks.filter(Number.isInteger);  // no "1.5 layers"
  if (ticks.length < 2) ticks = lo === hi ? [lo - 1, lo, lo + 1] : [Math.floor(lo), Math.ceil(hi)];
  const a = ticks[0], b = ticks[ticks.length - 1];
  return { kind: "linear", ticks, at: (v) => (Number(v) - a) / (b - a), text: tickText };
}

// The ticks whose labels fit: along a horizontal axis (pos: x in px) a label is kept when it
// clears the last one kept by its estimated width (10 px text: about 6.2 px a character); along a
// vertical one (vertical: true) when it is 13 px from it. The first and last are preferred.
function fittingTicks(axis, pos, vertical) {
  const width = (t) => (vertical ? 13 : axis.text(t).length * 6.2 + 6);
  const clears = (p, q) => Math.abs(pos(p) - pos(q)) >= (vertical ? 13 : (width(p) + width(q)) / 2);
  const ticks = axis.ticks, kept = [];
  for (const t of ticks) if (!kept.length || clears(kept[kept.length - 1], t)) kept.push(t);
  const last = ticks[ticks.length - 1];
  if (ticks.length > 1 && kept[kept.length - 1] !== last) {
    while (kept.length > 1 && !clears(kept[kept.length - 1], last)) kept.pop();
    if (kept.length && clears(kept[kept.length - 1], last)) kept.push(last);
  }
  return kept;
}

// summary.csv's solved_at_step: -1 (the target never reached) is "not solved", apart from the steps.
function notSolved(column, v) { return column === "solved_at_step" && Number(v) < 0 && v !== ""; }
