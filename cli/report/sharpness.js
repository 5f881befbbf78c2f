// The sharpness probe (train --probe-sharpness N): probe_sharpness.csv's largest Hessian
// eigenvalue over the probed steps, a chart per operator (H; with Adam/AdamW also P⁻¹H), each
// beside the threshold above which its optimizer's step diverges on a quadratic, at each
// step's learning rate (2/η for gradient descent, 38/η for Adam's P⁻¹H at β₁ = 0.9:
// docs/curvature.md).

const SHARPNESS_TITLES = { hessian: "sharpness \u03bb_max(H)",
                           preconditioned: "preconditioned sharpness \u03bb_max(P\u207b\u00b9H)" };

// One operator's rows as a chart: λ_max (points) and the threshold (dashed), on a log scale
// when every value drawn is positive.
function sharpnessChart(table, op, ri) {
  const S = column(table, "step"), O = column(table, "operator");
  const rows = O.map((o, i) => i).filter((i) => O[i] === op);
  const points = (col) => rows.filter((i) => finite(column(table, col)[i]))
    .map((i) => ({ x: Number(S[i]), y: Number(column(table, col)[i]), value: column(table, col)[i] }));
  const series = [{ label: "\u03bb_max", color: COLORS[0], points: points("lambda_max"), run: ri, col: "lambda_max" }];
  const limit = points("threshold");
  if (limit.length)
    series.push({ label: "threshold", color: COLORS[1], dash: "5 3", points: limit, run: ri, col: "threshold" });
  const log = series.every((s) => s.points.every((p) => p.y > 0));
  const chart = lineChart(SHARPNESS_TITLES[op] || op, series, { key: "sharpness " + op, log });
  const key = legend([["\u03bb_max", COLORS[0]], ...(limit.length ? [["divergence threshold (dashed)", COLORS[1]]] : [])]);
  return el("div", { class: "sharpness" }, chart, key, sharpnessLast(table, rows));
}

// The last probe in words: λ_max, and its share of the threshold (1: at the edge of stability).
function sharpnessLast(table, rows) {
  const i = rows[rows.length - 1], at = (col) => column(table, col)[i];
  const share = finite(at("threshold")) && finite(at("lambda_max")) ? Number(at("lambda_max")) / Number(at("threshold")) : NaN;
  const converged = at("converged") === "1" ? "" : " (not converged in " + at("iterations") + " products)";
  return el("p", { "data-step": at("step"), "data-value": at("lambda_max"), "data-share": finite(share) ? share : "" },
            "Step " + at("step") + ": \u03bb_max " + (finite(at("lambda_max")) ? fmt(Number(at("lambda_max"))) : at("lambda_max")) +
            converged + (finite(share) ? ", " + fmt(share) + " of the threshold " + fmt(Number(at("threshold"))) : "") + ".");
}

function sharpnessCharts(table, ri) {
  const div = el("div", { class: "charts" });
  for (const op of [...new Set(column(table, "operator"))]) div.append(sharpnessChart(table, op, ri));
  return el("div", { id: "sharpness-" + ri, "data-run": ri }, el("h3", {}, "Sharpness over training"), div);
}
