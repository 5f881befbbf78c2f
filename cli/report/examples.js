// Held-out examples with the model's answers, right and wrong.

function examplesSection(run, ri) {
  const ex = run.examples, t = el("table", {}, el("tr", {}, el("th", {}, "input"), el("th", {}, "model's answer"),
                                                 el("th", {}, "expected"), el("th", {}, "")));
  for (const e of ex.shown)
    t.append(el("tr", { class: e.correct ? "right" : "wrong" }, el("td", { class: "mono" }, e.input),
                el("td", { class: "mono" }, e.output), el("td", { class: "mono" }, e.expected),
                el("td", {}, e.correct ? "right" : "wrong")));
  return el("section", { id: "examples-" + ri }, el("h2", {}, "Held-out examples: " + run.name),
            el("p", { class: "note" }, "Up to 6 right and 6 wrong among the first " + ex.scored + " held-out examples."), t);
}
