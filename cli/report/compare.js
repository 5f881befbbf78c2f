// Comparing runs: names that tell them apart, the settings that differ between them, and a
// warning when they are not of the same task.

// A name per run that no other run has: a directory name shared by several runs becomes the
// shortest end of their paths that differs ("a/rev", "b/rev"); runs the paths cannot tell apart
// (the same directory twice) are numbered ("rev (1)", "rev (2)").
function uniqueNames(runs) {
  const parts = runs.map((r) => String(r.path).split("/").filter((p) => p && p !== "."));
  const names = runs.map((r) => r.name);
  for (const name of new Set(names)) {
    const same = names.flatMap((n, i) => (n === name ? [i] : []));
    if (same.length < 2) continue;
    const longest = Math.max(...same.map((i) => parts[i].length));
    for (let k = 2; k <= longest; ++k) {
      const ends = same.map((i) => parts[i].slice(-k).join("/"));
      if (new Set(ends).size === same.length) { same.forEach((i, j) => { names[i] = ends[j]; }); break; }
    }
  }
  const seen = new Map();
  for (const n of names) seen.set(n, (seen.get(n) || 0) + 1);
  const counted = new Map();
  return names.map((n) => {
    if (seen.get(n) < 2) return n;
    counted.set(n, (counted.get(n) || 0) + 1);
    return n + " (" + counted.get(n) + ")";
  });
}

// What a run learns, in words: its task, and with `kinds` whether it is a language model.
function runKind(run, kinds) {
  const task = run.settings.all.task ?? (run.summary || {}).task ?? "?";
  return task + (!kinds ? "" : run.model.language_model ? " (language model)" : " (sequence task)");
}

// A warning when the runs compared are of different tasks or kinds, or null.
function taskWarning(runs) {
  const lm = new Set(runs.map((r) => !!r.model.language_model)).size > 1;
  const kinds = runs.map((r) => runKind(r, lm));
  if (new Set(kinds).size < 2) return null;
  const named = (k) => runs.filter((r, i) => kinds[i] === k).map((r) => r.name).join(", ");
  const which = [...new Set(kinds)].map((k) => k + ": " + named(k));
  return el("p", { class: "warning", id: "task-warning" },
            "\u26a0 These runs are of different tasks \u2014 " + which.join("; ") +
            ". Their curves are overlaid on the same axes, but the figures measure different things.");
}

// The header of a table with a column per run: the run's name in its curves' colour, linked
// to its section.
function runColumns(first, runs) {
  return el("tr", {}, el("th", {}, first), ...runs.map((r, ri) => {
    const mark = el("i", { class: "swatch" }); mark.style.background = COLORS[ri % 8];
    return el("th", { "data-run": ri }, mark, el("a", { href: "#run-" + ri }, r.name));
  }));
}

// One table of the settings that differ between the runs (config.ini's, a row each, a column
// per run), below each run's verdict; the settings all runs share are counted, listed when opened.
function settingsDiff(runs) {
  const keys = [...new Set(runs.flatMap((r) => Object.keys(r.settings.all)))];
  const value = (r, k) => (k in r.settings.all ? r.settings.all[k] : "(not set)");
  const differ = keys.filter((k) => new Set(runs.map((r) => value(r, k))).size > 1);
  const same = keys.filter((k) => !differ.includes(k));
  const t = el("table", { id: "settings-diff" }, el("thead", {}, runColumns("setting", runs)));
  const body = el("tbody");
  const verdicts = runs.map((r) => el("td", {}, verdict(r)));
  body.append(el("tr", { class: "outcome" }, el("th", {}, "verdict"), ...verdicts));
  for (const k of differ)
    body.append(el("tr", { "data-setting": k }, el("th", {}, k),
                   ...runs.map((r, ri) => el("td", { class: "mono", "data-run": ri }, value(r, k)))));
  const shared = el("details", { id: "settings-same" }, el("summary", {}, same.length + " settings identical"),
                    el("span", { class: "mono" }, same.map((k) => k + " = " + value(runs[0], k)).join("\n")));
  body.append(el("tr", {}, el("td", { colspan: runs.length + 1 }, shared)));
  t.append(body);
  return t;
}

// The top of a page of several runs: the warning when their tasks differ, and the table of the
// settings that differ (left out for a sweep, whose own table lists its settings: null when
// nothing is left).
function compareSection(runs, isSweep) {
  const warning = taskWarning(runs);
  if (isSweep && !warning) return null;
  const sec = el("section", { id: "compare" }, el("h2", {}, "Comparing " + runs.length + " runs"));
  if (warning) sec.append(warning);
  if (!isSweep)
    sec.append(el("p", { class: "note" }, "The settings (config.ini) that differ between the runs; each run's own " +
                  "table is under \u201cEach run's table\u201d below."), settingsDiff(runs));
  return sec;
}
