// The patching part of "What matters" (what_matters.js), from run.interventions.patching.

function patchingView(run, ri) {
  const data = run.interventions && run.interventions.patching;
  if (!data) return null;
  return el("div", { class: "patching-view", "data-run": ri });
}
