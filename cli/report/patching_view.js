// The patching part of "What matters" (what_matters.js), from run.interventions.patching: per
// --clean/--corrupt pair, what `attnlab patch --json` prints (cli/report_patching.cpp), drawn as
// a layer x position map of the residual stream per stack and a layer x head map of the heads.
// A cell's colour is the fraction of the logit difference restored (blue < 0 < red, white 0).

const PATCH_CELL = 26;

function patchColor(v) {
  if (v === null) return "#ccc";
  const c = Math.round(255 * (1 - Math.min(1, Math.abs(v))));
  return v >= 0 ? "rgb(255," + c + "," + c + ")" : "rgb(" + c + "," + c + ",255)";
}

// The colour bar: -1 (blue) through 0 (white) to 1 (red), clipped beyond.
function patchColorbar() {
  const box = svg("svg", { width: 330, height: 30, class: "colorbar patch-bar" });
  for (let k = 0; k < 40; ++k)
    box.append(svg("rect", { x: 20 + k * 4, y: 4, width: 4, height: 10, fill: patchColor(-1 + (2 * k + 1) / 40) }));
  [[-1, 20], [0, 100], [1, 180]].forEach(([v, x]) => box.append(tick(x, 26, "middle", "colour", v)));
  const t = svg("text", { x: 190, y: 13 });
  t.textContent = "fraction restored";
  box.append(t);
  return box;
}

// rows [[name, values]], cols [[clean, corrupt]] (the label shows both where they differ),
// marked: the corrupted columns; tipOf(name, j, v) the hover text of a cell.
function patchGrid(kind, rows, cols, marked, tipOf) {
  const left = Math.max(...rows.map((r) => labelWidth(r[0]))) + 8, top = 30, c = PATCH_CELL;
  const g = svg("svg", { width: left + cols.length * c + 4, height: top + rows.length * c + 4,
                         class: "patch-map", "data-kind": kind });
  cols.forEach(([a, b], j) => [[a, 12], [b, 25]].forEach(([text, y], line) => {
    if (line && text === a) return;
    const label = svg("text", { x: left + (j + 0.5) * c, y, "text-anchor": "middle",
                                class: marked.includes(j) ? "corrupted" : "" });
    label.textContent = tokenGlyph(text) + (line || !marked.includes(j) ? "" : "*");
    g.append(label);
  }));
  rows.forEach(([name, values], i) => {
    const label = svg("text", { x: left - 6, y: top + (i + 0.6) * c, "text-anchor": "end" });
    label.textContent = name;
    g.append(label);
    values.forEach((v, j) => g.append(svg("rect", {
      x: left + j * c, y: top + i * c, width: c - 1, height: c - 1, fill: patchColor(v),
      "data-row": name, "data-col": j, "data-value": v === null ? "" : v, "data-tip": tipOf(name, j, v) })));
  });
  return g;
}

function patchTip(what, v, total) {
  return what + "\nrestores " + (v === null ? "n/a" : v.toFixed(3)) + " of the logit difference\n(LD_clean " +
         total.ld_clean.toFixed(3) + ", LD_corrupt " + total.ld_corrupt.toFixed(3) + ")";
}

// The heads as rows of blocks (an attention of a block each) and columns of heads.
function headRows(heads) {
  const rows = new Map();
  for (const h of heads) {
    const [, block, head] = h.name.match(/^(.*)\.h(\d+)$/);
    if (!rows.has(block)) rows.set(block, []);
    rows.get(block)[+head] = h.value;
  }
  return [...rows];
}

function patchPair(r, k) {
  const e = r.examples[0], t = r.total;
  const box = el("div", { class: "patch-pair", "data-pair": k },
                 el("p", {}, "clean " + e.clean + " \u2192 " + e.clean_answer + ";  corrupt " + e.corrupt + " \u2192 " +
                             e.corrupt_answer));
  for (const s of r.stacks) {
    const rows = t.residual.filter((x) => x.stack === s.stack).map((x) => [x.point, x.values]);
    const cols = s.clean_tokens.map((a, j) => [a, s.corrupt_tokens[j]]);
    const tipOf = (name, j, v) => patchTip(name + " at position " + j + " (clean " + cols[j][0] + ", corrupt " +
                                           cols[j][1] + ")", v, t);
    box.append(patchGrid("residual", rows, cols, s.corrupted, tipOf));
  }
  const heads = headRows(t.heads), most = Math.max(...heads.map((h) => h[1].length));
  const cols = Array.from({ length: most }, (_, j) => ["h" + j, "h" + j]);
  box.append(patchGrid("heads", heads, cols, [], (block, j, v) => patchTip(block + ".h" + j + " (all positions)", v, t)));
  return box;
}

function patchingView(run, ri) {
  const data = run.interventions && run.interventions.patching;
  if (!data) return null;
  return el("div", { class: "patching-view", "data-run": ri }, el("h3", {}, "Activation patching"),
            el("p", { class: "note" }, "Each cell: the fraction of the logit difference restored when that " +
               "activation of the clean run is copied into the corrupted run, (LD_patched \u2212 LD_corrupt) / " +
               "(LD_clean \u2212 LD_corrupt), LD = logit(clean answer token) \u2212 logit(corrupt answer token), " +
               "summed over the answer positions where they differ (attnlab patch). * marks a corrupted position."),
            patchColorbar(), ...data.map(patchPair));
}
