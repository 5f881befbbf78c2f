// Draws the page; joined last (cmake/embed_report.cmake), after every file it calls.

// The sections drawn per run, in page order: [id prefix, nav label, draw(run, ri)].
const PER_RUN = [["run", "runs", glance], ["gradients", "gradients", gradientSection],
                 ["attention", "attention", attentionSection], ["mechanisms", "mechanisms", mechanismsSection],
                 ["matters", "what matters", whatMattersSection], ["examples", "examples", examplesSection]];

// The sections of this page's runs: "mechanisms" (mechanisms.js) only when one of them recorded one.
function perRunKinds(runs) { return PER_RUN.filter(([id]) => id !== "mechanisms" || runs.some(hasMechanisms)); }

// The sections of one kind, a run per column (as many side by side as fit, aligned at the
// top); on a page of several runs each run's table is collapsed (the settings that differ
// are compared above it).
function perRunRow(runs, [id, label, draw]) {
  const row = el("div", { class: "side-by-side", "data-kind": id });
  runs.forEach((run, ri) => row.append(el("div", { class: "side-cell" }, draw(run, ri))));
  if (id !== "run" || runs.length < 2) return row;
  return el("details", { class: "run-tables", id: "run-tables" },
            el("summary", {}, "Each run's table: its verdict, summary and settings (" + runs.length +
                              " runs side by side)"), row);
}

// The nav: one link per section, and per run for the sections drawn per run (numbered when
// there are many runs; the link's tip names the run).
function drawNav(nav, runs) {
  const many = runs.length > 4;
  if (runs.length === 1) {  // in page order: the run's table, the curves, the rest
    for (const [id, label] of [["run-0", "run"], ["curves", "curves"], ...perRunKinds(runs).slice(1).map(([i, l]) => [i + "-0", l])])
      nav.append(el("a", { href: "#" + id }, label));
    return;
  }
  const tops = DATA.sweep ? ["sweep"] : ["compare"];
  for (const id of [...tops, "curves"]) nav.append(el("a", { href: "#" + id }, id));
  for (const [id, label] of perRunKinds(runs)) {
    const links = runs.map((r, ri) => el("a", { href: "#" + id + "-" + ri, "data-tip": label + ": " + r.name },
                                         many ? String(ri + 1) : r.name));
    nav.append(el("span", { class: "nav-group" }, el("b", {}, label + ":"), ...links));
  }
}

// A link within the page opens the collapsed parts holding its target before the browser
// scrolls to it; the sections stop below the sticky header (--header-h, its height).
function followLinks() {
  const header = document.querySelector("header");
  const fit = () => document.documentElement.style.setProperty("--header-h", header.offsetHeight + "px");
  fit();
  window.addEventListener("resize", fit);
  document.addEventListener("click", (e) => {
    const a = e.target.closest && e.target.closest('a[href^="#"]');
    const target = a && document.getElementById(a.getAttribute("href").slice(1));
    for (let d = target && target.closest("details"); d; d = d.parentElement.closest("details")) d.open = true;
  });
}

function render() {
  const main = document.getElementById("report"), nav = document.getElementById("nav");
  main.textContent = "";
  const runs = DATA.runs;
  uniqueNames(runs).forEach((name, ri) => { runs[ri].dir_name = runs[ri].name; runs[ri].name = name; });
  if (DATA.sweep) main.append(sweepSection(DATA.sweep, runs));
  const compared = runs.length > 1 ? compareSection(runs, !!DATA.sweep) : null;
  if (compared) main.append(compared);
  // One run opens on its table (the verdict first); several on the settings that differ.
  const [table, ...rest] = perRunKinds(runs);
  const single = runs.length === 1;
  if (single) main.append(perRunRow(runs, table));
  main.append(curvesSection(runs));
  for (const kind of single ? rest : perRunKinds(runs)) main.append(perRunRow(runs, kind));
  runs.forEach((run, ri) => {
    CHECK.runs[ri] = Object.assign(CHECK.runs[ri] || {}, { name: run.name, metrics_rows: run.metrics.rows.length,
      expected_maps: run.attention.reduce((n, ex) => n + ex.layers.reduce((m, l) => m + l.heads, 0), 0) });
  });
  drawNav(nav, runs);
  followLinks();
  document.title = "attnlab report: " + runs.map((r) => r.name).join(", ");
}

try { render(); } catch (e) { CHECK.errors.push(String(e && e.stack || e)); throw e; } finally {
  const pre = document.getElementById("self-check");
  pre.textContent = JSON.stringify(CHECK);
  document.body.setAttribute("data-rendered", CHECK.errors.length ? "error" : "ok");
  performance.mark("report-drawn");  // the browser test prints the time to here
}
