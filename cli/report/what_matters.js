// "What matters": what the run's answers depend on, by intervention (docs/interventions.md):
// the ablation of every head, MLP and block (ablation_view.js), the logit lens on the
// examples and each --input (lens_view.js), and activation patching for each --clean and
// --corrupt pair (patching_view.js). Each view returns null when the run has no data for it.
const WHAT_MATTERS_VIEWS = [ablationView, lensView, patchingView];

function whatMattersSection(run, ri) {
  const views = WHAT_MATTERS_VIEWS.map((view) => view(run, ri)).filter((v) => v);
  const intro = el("p", { class: "note" }, "What the answers depend on, by changing the model and measuring: " +
    "knock a component out and score the held-out set again (ablation), read the answer off each layer " +
    "(logit lens), copy one activation of a clean input into a corrupted one (patching). docs/interventions.md " +
    "gives the formulas.");
  const body = views.length ? [intro, ...views]
    : [el("p", { class: "note" }, "No interventions were computed for this run (its checkpoint is missing).")];
  return el("section", { id: "matters-" + ri }, el("h2", {}, "What matters: " + run.name), ...body);
}
