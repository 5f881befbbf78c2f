// Held-out examples with the model's answers, right and wrong, the wrong tokens marked.

// An answer token by token (tokens as glyphs, joined as the task writes them: with spaces when
// its text is so written), each token that differs from the expected one at its position marked
// "tok-wrong", and a "_" marked so for each expected token the answer lacks. expected null:
// nothing to compare with.
function answerTokens(text, tokens, expected) {
  const out = el("span", { class: "mono answer" });
  if (!tokens) { out.append(text); return out; }
  const gap = tokens.length > 1 && tokens.join(" ") === text ? " " : "";
  const n = Math.max(tokens.length, expected ? expected.length : 0);
  for (let k = 0; k < n; ++k) {
    const has = k < tokens.length, wrong = expected && (!has || k >= expected.length || tokens[k] !== expected[k]);
    if (k) out.append(gap);
    const tip = wrong ? (k < expected.length ? "expected " + tokenGlyph(expected[k]) : "not expected") +
                        " at position " + k : "";
    out.append(el("span", Object.assign({ class: "tok" + (wrong ? " tok-wrong" : ""), "data-pos": k },
                                        tip ? { "data-tip": tip } : {}), has ? tokenGlyph(tokens[k]) : "_"));
  }
  return out;
}

function examplesSection(run, ri) {
  const ex = run.examples, t = el("table", {}, el("tr", {}, el("th", {}, "input"), el("th", {}, "model's answer"),
                                                 el("th", {}, "expected"), el("th", {}, "")));
  for (const e of ex.shown)
    t.append(el("tr", { class: e.correct ? "right" : "wrong" }, el("td", { class: "mono" }, e.input),
                el("td", { class: "mono" }, answerTokens(e.output, e.output_tokens, e.expected_tokens)),
                el("td", { class: "mono" }, e.expected), el("td", {}, e.correct ? "right" : "wrong")));
  return el("section", { id: "examples-" + ri }, el("h2", {}, "Held-out examples: " + run.name),
            el("p", { class: "note" }, "Up to 6 right and 6 wrong among the first " + ex.scored +
               " held-out examples; in a wrong answer, the tokens that differ from the expected ones are marked."), t);
}
