// Draws the page; joined last (cmake/embed_report.cmake), after every file it calls.

function render() {
  const main = document.getElementById("report"), nav = document.getElementById("nav");
  main.textContent = "";
  const runs = DATA.runs;
  if (DATA.sweep) main.append(sweepSection(DATA.sweep, runs));
  runs.forEach((run, ri) => main.append(glance(run, ri)));
  main.append(curvesSection(runs));
  runs.forEach((run, ri) => {
    main.append(gradientSection(run, ri));
    main.append(attentionSection(run, ri), examplesSection(run, ri));
    CHECK.runs[ri] = Object.assign(CHECK.runs[ri] || {}, { name: run.name, metrics_rows: run.metrics.rows.length,
      expected_maps: run.attention.reduce((n, ex) => n + ex.layers.reduce((m, l) => m + l.heads, 0), 0) });
  });
  for (const [id, label] of [["curves", "curves"], ["run-0", "runs"], ["gradients-0", "gradients"],
                             ["attention-0", "attention"], ["examples-0", "examples"]])
    nav.append(el("a", { href: "#" + id }, label));
  document.title = "attnlab report: " + runs.map((r) => r.name).join(", ");
}

try { render(); } catch (e) { CHECK.errors.push(String(e && e.stack || e)); throw e; } finally {
  const pre = document.getElementById("self-check");
  pre.textContent = JSON.stringify(CHECK);
  document.body.setAttribute("data-rendered", CHECK.errors.length ? "error" : "ok");
  performance.mark("report-drawn");  // the browser test prints the time to here
}
