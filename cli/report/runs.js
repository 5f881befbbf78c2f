// Each run at a glance: its verdict, what is uncertain about it, its summary in words and its settings.

// The step at which the run solved its task (held-out exact match held at the target), or null.
function solvedAt(run) {
  const s = run.summary;
  return s && Number.isInteger(s.solved_at_step) && s.solved_at_step >= 0 ? s.solved_at_step : null;
}

// A number rounded for reading: 3 significant digits, thousands separated.
function rounded(v) {
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  return Math.abs(v) >= 1000 ? Math.round(v).toLocaleString("en-US") : String(+v.toPrecision(3));
}
function plural(n, one, many) { return rounded(n) + " " + (n === 1 ? one : many); }
function seconds(v) {
  if (v < 100) return (v < 10 ? v.toFixed(2) : v.toFixed(1)) + " s";
  return v < 3600 ? Math.floor(v / 60) + " min " + Math.round(v % 60) + " s" : (v / 3600).toFixed(1) + " h";
}
function bytes(v) {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let k = 0;
  while (Math.abs(v) >= 1000 && k < units.length - 1) { v /= 1000; ++k; }
  return (k ? String(+v.toPrecision(3)) : String(v)) + " " + units[k];
}
const step = (v) => (v >= 0 ? "step " + rounded(v) : "not solved");
const bits = (v) => v.toFixed(2);

// summary.json's keys in words, with how each value reads; keys not here are shown as they are.
const SUMMARY_WORDS = {
  task: ["task"], model: ["model"], parameters: ["parameters"],
  steps: ["steps trained"],
  heldout_examples: ["held-out examples"],
  heldout_token_acc: ["held-out token accuracy"],
  heldout_exact: ["held-out exact match"],
  heldout_loss: ["held-out loss", (v) => rounded(v) + " nats per target token"],
  heldout_bits_per_char: ["held-out bits per character", bits],
  heldout_chars: ["held-out characters"],
  heldout_bits_per_token: ["held-out bits per token", bits],
  heldout_tokens: ["held-out tokens"],
  heldout_in_context_loss: ["held-out in-context loss", (v) => rounded(v) + " nats (late tokens less early ones)"],
  heldout_late_token_acc: ["held-out late-token accuracy"],
  target: ["target (held-out exact match)", (v) => (v === 0 ? "none set" : rounded(v))],
  target_patience: ["target patience", (v) => plural(v, "evaluation", "evaluations")],
  solved_at_step: ["solved", step],
  target_first_reached_at_step: ["target first reached", (v) => (v >= 0 ? "step " + rounded(v) : "never")],
  seconds: ["time", seconds],
  threads: ["threads"],
  precision: ["precision"],
  optimizer_state_bytes: ["optimizer state", bytes],
  cpu: ["CPU"],
  processes: ["processes"],
  comm_bytes_per_step: ["communication per step", bytes],
  comm_bytes_received_per_step: ["received per step", bytes],
  comm_bytes_sent_per_step: ["sent per step", bytes],
  comm_seconds_per_step: ["communication time per step", seconds],
};
function summaryLabel(key) { return (SUMMARY_WORDS[key] || [key])[0]; }
function summaryText(key, v) {
  const read = (SUMMARY_WORDS[key] || [])[1];
  if (typeof v !== "number") return String(v);
  return read ? read(v) : rounded(v);
}

// The best held-out exact match in metrics.csv and its step, or null.
function bestHeldout(run) {
  const steps = column(run.metrics, "step"), values = column(run.metrics, "heldout_exact") || [];
  let best = null;
  values.forEach((v, i) => { if (finite(v) && (!best || Number(v) > best.value)) best = { value: Number(v), step: Number(steps[i]) }; });
  return best;
}

// A baseline's bits per character, its full value in data-value.
function baseline(kind, value) { return el("span", { "data-baseline": kind, "data-value": String(value) }, bits(value)); }

// A language model's verdict: held-out bits per character against the unigram and bigram baselines.
function textVerdict(run, bitsPerChar) {
  const b = run.baselines;
  const own = bitsPerChar === null ? "no held-out bits per character recorded" : bits(bitsPerChar) + " bits/char on held-out text";
  if (!b) return el("span", { class: "verdict-none" }, own + " (no baselines: the run's text file cannot be read)");
  const beats = bitsPerChar !== null && bitsPerChar < b.bigram_bits_per_char;
  return el("span", { class: beats ? "verdict-yes" : "verdict-no", "data-verdict": "text" }, own + "; a unigram model: ",
            baseline("unigram", b.unigram_bits_per_char), ", a bigram model: ", baseline("bigram", b.bigram_bits_per_char),
            beats ? " \u2014 better than both" : " \u2014 not better than the bigram model");
}

// The verdict with no target set: the best held-out exact match and its step.
function noTargetVerdict(run) {
  const best = bestHeldout(run);
  return el("span", { class: "verdict-none", "data-verdict": "no-target" }, "no target set" + (best
    ? "; best held-out exact match " + rounded(best.value) + " at step " + rounded(best.step) : ""));
}

// A run without summary.json (still training, or interrupted): a character language model's bits
// per character at its last held-out evaluation in metrics.csv (heldout_loss / ln 2); no verdict for others.
function unfinishedVerdict(run) {
  const steps = column(run.metrics, "step"), loss = column(run.metrics, "heldout_loss") || [];
  const at = loss.map(finite).lastIndexOf(true), state = run.state === "running" ? "still training" : "interrupted";
  if (!run.model.language_model || at < 0 || (run.settings.all || {}).task !== "text")
    return el("span", { class: "verdict-none", "data-verdict": run.state }, run.state === "running"
      ? "still training: no verdict until it ends" : "no verdict: the run was interrupted before its end");
  const judged = textVerdict(run, Number(loss[at]) / Math.LN2);
  judged.prepend(state + ", at its last evaluation (step " + rounded(Number(steps[at])) + "): ");
  return judged;
}

// A language model of tokens (repeat): how much the context helps, the in-context loss, and the
// late tokens' accuracy.
function inContextVerdict(s) {
  if (!finite(s.heldout_in_context_loss))
    return el("span", { class: "verdict-none", "data-verdict": "in-context" }, "no in-context loss recorded");
  return el("span", { class: "verdict-none", "data-verdict": "in-context" }, "in-context loss " +
            rounded(s.heldout_in_context_loss) + " nats (the late tokens' loss less the early ones'); late-token accuracy " +
            rounded(s.heldout_late_token_acc));
}

// What the run achieved, in the terms of its task.
function verdict(run) {
  const s = run.summary;
  if (!s) return unfinishedVerdict(run);
  if (run.model.language_model && s.task !== "text") return inContextVerdict(s);
  if (run.model.language_model)
    return textVerdict(run, finite(s.heldout_bits_per_char) ? s.heldout_bits_per_char
      : finite(s.heldout_loss) ? s.heldout_loss / Math.LN2 : null);
  if (s.target === 0) return noTargetVerdict(run);
  if (s.solved_at_step >= 0)
    return el("span", { class: "verdict-yes", "data-verdict": "solved" }, "solved at step " + rounded(s.solved_at_step) +
              ": held-out exact match reached the target " + rounded(s.target));
  const first = s.target_first_reached_at_step >= 0
    ? "; it reached the target at step " + rounded(s.target_first_reached_at_step) + " but did not hold it for " +
      plural(s.target_patience, "evaluation", "evaluations") : "";
  return el("span", { class: "verdict-no", "data-verdict": "not-solved" }, "not solved: held-out exact match " +
            rounded(s.heldout_exact) + ", target " + rounded(s.target) + first);
}

// What the page cannot vouch for: a run still writing, a run cut short, a metrics.csv line left out.
function uncertainties(run) {
  const notes = [];
  if (run.state === "running")
    notes.push(["running", "still training: a process holds this run's lock; the page shows it as of its last logged step"]);
  if (run.state === "interrupted")
    notes.push(["interrupted", "interrupted: no summary.json and no process training it; the figures are those of its " +
                "last logged step and checkpoint"]);
  if (run.metrics.dropped_last_line)
    notes.push(["truncated", "metrics.csv's last line was incomplete (a run writing or cut off) and is left out"]);
  return notes.map(([kind, text]) => el("p", { class: "uncertain", "data-note": kind }, text));
}

// The settings the user gave, those attnlab resolved, or (an older run) those differing from the defaults.
function settingsRows(run) {
  const list = (o) => el("span", { class: "mono" }, Object.entries(o).map(([k, v]) => k + " = " + v).join("\n") || "(none)");
  const st = run.settings;
  if (!st.given)
    return [["settings differing from the defaults", el("span", {}, list(st.differing), el("br"),
      el("span", { class: "note" }, "(this run did not record which of them you gave: trained before attnlab kept given_options.ini)"))]];
  return [["you set", el("span", { "data-settings": "given" }, list(st.given))],
          ["attnlab resolved", el("span", { "data-settings": "resolved" }, list(st.resolved))]];
}

// The run at a glance. Every summary.json figure is shown once in words and rounded units, marked
// with data-summary and its raw value in data-value (the browser tests compare them with the file).
function glance(run, ri) {
  const cfg = run.model.config, sum = run.summary || {};
  const untargeted = sum.target === 0 && ["solved_at_step", "target_first_reached_at_step"];  // no target: nothing to reach
  const mark = (key, text) => el("span", key in sum ? { "data-summary": key, "data-run": ri, "data-value": String(sum[key]) } : {},
                                 text ?? (untargeted && untargeted.includes(key) ? "no target set" : summaryText(key, sum[key])));
  const rows = [
    ["verdict", verdict(run)],
    ["task", "task" in sum ? el("span", {}, mark("task"), " \u2014 " + run.model.task) : run.model.task],
    ["model", el("span", {}, mark("model", cfg.arch), ", " + cfg.n_layers + " layers, " + cfg.n_heads + " heads, d_model " +
                 cfg.d_model + ", d_ff " + cfg.d_ff)],
    ["parameters", mark("parameters", rounded(run.model.parameters))],
  ];
  const sec = el("section", { id: "run-" + ri }, el("h2", {}, "Run " + run.name), el("p", { class: "note mono" }, run.path),
                 ...uncertainties(run));
  const own = new Set(["task", "model", "parameters", "cpu"]), known = Object.keys(SUMMARY_WORDS);
  const keys = [...known.filter((k) => k in sum), ...Object.keys(sum).filter((k) => !known.includes(k))];
  for (const k of keys.filter((k) => !own.has(k))) rows.push([summaryLabel(k), mark(k), { class: "num" }]);
  rows.push(["CPU", "cpu" in sum ? mark("cpu") : "not recorded"]);
  rows.push(["trained by", "attnlab " + run.model.attnlab_version]);
  rows.push(["checkpoint shown", "step " + rounded(run.model.checkpoint_step)]);
  rows.push(...settingsRows(run));
  sec.append(kvTable(rows));
  return sec;
}
