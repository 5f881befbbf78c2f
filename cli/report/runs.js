// Each run at a glance: its verdict, summary and settings.

// The step at which the run solved its task (held-out exact match held at the target), or null.
function solvedAt(run) {
  const s = run.summary;
  return s && Number.isInteger(s.solved_at_step) && s.solved_at_step >= 0 ? s.solved_at_step : null;
}

function verdict(run) {
  const s = run.summary;
  if (!s) return el("span", { class: "verdict-no" }, "no summary.json: the run did not finish (interrupted or running)");
  if (s.solved_at_step !== undefined && s.solved_at_step >= 0)
    return el("span", { class: "verdict-yes" }, "solved: held-out exact match reached the target " + s.target + " at step " + s.solved_at_step);
  if (s.target_first_reached_at_step !== undefined && s.target_first_reached_at_step >= 0)
    return el("span", { class: "verdict-yes" }, "target " + s.target + " first reached at step " + s.target_first_reached_at_step);
  return el("span", { class: "verdict-no" }, "target " + (s.target ?? "") + " not reached");
}

// The run at a glance. Every summary.json figure is shown once, marked with
// data-summary (the browser test compares them with the file).
function glance(run, ri) {
  const cfg = run.model.config, sum = run.summary || {};
  const mark = (key, text) => el("span", key in sum ? { "data-summary": key, "data-run": ri } : {}, text ?? String(sum[key] ?? ""));
  const rows = [
    ["verdict", verdict(run)],
    ["task", "task" in sum ? el("span", {}, mark("task"), " \u2014 " + run.model.task) : run.model.task],
    ["model", el("span", {}, mark("model", cfg.arch), ", " + cfg.n_layers + " layers, " + cfg.n_heads + " heads, d_model " +
                 cfg.d_model + ", d_ff " + cfg.d_ff)],
    ["parameters", mark("parameters", String(run.model.parameters))],
  ];
  const sec = el("section", { id: "run-" + ri }, el("h2", {}, "Run " + run.name), el("p", { class: "note mono" }, run.path));
  const own = new Set(["task", "model", "parameters", "seconds", "cpu"]);
  for (const k of Object.keys(sum).filter((k) => !own.has(k))) rows.push([k, mark(k), { class: "num" }]);
  if ("seconds" in sum) rows.push(["time (s)", mark("seconds"), { class: "num" }]);
  rows.push(["CPU", "cpu" in sum ? mark("cpu") : "not recorded"]);
  rows.push(["trained by", "attnlab " + run.model.attnlab_version]);
  rows.push(["checkpoint shown", "step " + run.model.checkpoint_step]);
  const diff = Object.entries(run.settings.differing).map(([k, v]) => k + " = " + v).join("\n");
  rows.push(["settings differing from the defaults", el("span", { class: "mono" }, diff || "(none)")]);
  sec.append(kvTable(rows));
  return sec;
}
