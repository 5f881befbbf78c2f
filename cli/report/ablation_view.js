// The ablation part of "What matters" (what_matters.js), from run.interventions.ablation.

function ablationView(run, ri) {
  const data = run.interventions && run.interventions.ablation;
  if (!data) return null;
  return el("div", { class: "ablation-view", "data-run": ri });
}
