// The lens part of "What matters" (what_matters.js), from run.interventions.lens: for each example
// the attention section shows (and each --input), the logit lens as a point x position grid (the
// top token, shaded by the right answer's probability, bold where it is the right one) and the
// direct logit attribution at one answer position (a click on a column chooses it) as a
// layer x head grid with each attention's bias and each MLP, as `attnlab lens` computes them.

function lensView(run, ri) {
  const data = run.interventions && run.interventions.lens;
  if (!data) return null;
  const div = el("div", { class: "lens-view", "data-run": ri }, el("h3", {}, "Logit lens and direct logit attribution"),
    el("p", { class: "note" }, "Rows: the residual stream after each point, decoded as the model decodes its output " +
       "(pre-LN: its final norm, then the head); shade: the right answer's probability. Click a column for its attribution."));
  data.examples.forEach((e, ei) => div.append(lensExample(e, ei)));
  return div;
}

function lensTip(e, p, t) {
  const c = e.lens[p][t], right = c.rank === null ? "no right answer here" :
    "right " + tokenGlyph(e.answers[t]) + ": p " + c.p_answer.toFixed(4) + ", rank " + c.rank;
  return e.points[p] + ", position " + t + " (reads " + tokenGlyph(e.tokens[t]) + ")\ntop " + tokenGlyph(c.top) +
         ": p " + c.p_top.toFixed(4) + "\n" + right;
}

function lensExample(e, ei) {
  const box = el("div", { class: "lens-example", "data-example": ei }, el("h4", {}, e.source + ": " + e.input));
  if (e.note) {
    box.append(el("p", { class: "note" }, e.note));
    return box;
  }
  const grid = el("table", { class: "lens-grid" }), dla = el("div", { class: "lens-dla" });
  grid.append(el("tr", {}, el("th", {}, "reads"), ...e.tokens.map((t) => el("th", {}, tokenGlyph(t)))),
              el("tr", {}, el("th", {}, "right"), ...e.answers.map((a) => el("th", {}, a === null ? "\u2013" : tokenGlyph(a)))));
  e.points.forEach((name, p) => grid.append(el("tr", {}, el("th", {}, name), ...e.lens[p].map((c, t) => {
    const td = el("td", { class: "lens-cell" + (c.rank === 1 ? " lens-right" : ""), "data-point": p, "data-pos": t,
      "data-top": c.top, "data-p-top": c.p_top, "data-p-answer": c.p_answer, "data-rank": c.rank,
      "data-tip": lensTip(e, p, t) }, tokenGlyph(c.top));
    td.style.background = c.rank === null ? "#eee" : "hsl(140, 55%, " + (97 - 50 * c.p_answer).toFixed(1) + "%)";
    td.addEventListener("click", () => showAttribution(e, dla, t));
    return td;
  }))));
  box.append(el("div", { class: "lens-scroll" }, grid), dla);
  if (e.attribution === null) dla.append(el("p", { class: "note" }, e.attribution_note));
  else if (e.attribution.length) showAttribution(e, dla, e.attribution[0].position);
  return box;
}

// A part's place in the grid: its row (an attention, or the block's last one for its MLP) and column.
function dlaPlace(name, lastRow) {
  const head = /^(.*)\.h(\d+)$/.exec(name), bias = /^(.*)\.out_proj\.bias$/.exec(name);
  if (head) return [head[1], "h" + head[2]];
  if (bias) return [bias[1], "bias"];
  if (name.endsWith(".mlp")) return [lastRow[name.slice(0, -4)], "MLP"];
  return null;
}

// A part's cell: its logit, blue when it raises the answer, red when it lowers it, as deep as its
// share of the largest |part|.
function dlaCell(part, t, most) {
  const td = el("td", { class: "dla-cell", "data-component": part.component, "data-logit": part.logit,
    "data-tip": part.component + " at position " + t + ": " + part.logit.toFixed(4) }, part.logit.toFixed(2));
  const alpha = (Math.abs(part.logit) / most).toFixed(3);
  td.style.background = (part.logit >= 0 ? "rgba(31, 119, 180, " : "rgba(214, 39, 40, ") + alpha + ")";
  return td;
}

function showAttribution(e, dla, t) {
  const at = e.attribution && e.attribution.find((a) => a.position === t);
  if (!at) return;
  const rows = new Map(), lastRow = {}, cols = [], other = [];  // cols in forward order: h0.., bias, MLP
  for (const part of at.parts) {
    const row = /^(.*blocks\.\d+)\.(\w+)\.h\d+$/.exec(part.component);
    if (row) lastRow[row[1]] = row[1] + "." + row[2];
    const place = dlaPlace(part.component, lastRow);
    if (!place) { other.push(part); continue; }
    if (!rows.has(place[0])) rows.set(place[0], {});
    rows.get(place[0])[place[1]] = part;
    if (!cols.includes(place[1])) cols.push(place[1]);
  }
  const most = Math.max(...at.parts.map((p) => Math.abs(p.logit)), 1e-12);
  const table = el("table", { class: "dla-grid", "data-pos": t },
                   el("tr", {}, el("th", {}, ""), ...cols.map((c) => el("th", {}, c))));
  for (const [name, cells] of rows)
    table.append(el("tr", {}, el("th", {}, name), ...cols.map((c) => cells[c] ? dlaCell(cells[c], t, most) : el("td", {}))));
  dla.replaceChildren(el("p", { class: "note" }, "Position " + t + ": the right answer " + tokenGlyph(at.answer) +
    "'s logit " + at.logit.toFixed(3) + " = " + other.map((p) => p.component + " " + p.logit.toFixed(3)).join(" + ") +
    " + the parts below; " + e.attribution_note + " (1/\u03c3 = " + at.inverse_scale.toFixed(4) + ")."), table);
}
