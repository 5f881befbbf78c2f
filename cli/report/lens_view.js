// The lens part of "What matters" (what_matters.js), from run.interventions.lens.

function lensView(run, ri) {
  const data = run.interventions && run.interventions.lens;
  if (!data) return null;
  return el("div", { class: "lens-view", "data-run": ri });
}
