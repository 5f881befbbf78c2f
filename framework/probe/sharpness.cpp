#include "framework/probe/sharpness.h"

#include <cmath>
#include <limits>
#include <map>

#include "framework/error.h"
#include "framework/random.h"

namespace attnlab {

namespace {

CsvWriter open_sharpness_csv(const std::string& path, int64_t resume_step) {
  if (resume_step < 0) return CsvWriter(path, SharpnessProbe::columns());
  keep_csv_rows_through(path, resume_step);  // a resumed run redoes the steps after its checkpoint
  return CsvWriter::append(path, SharpnessProbe::columns());
}

std::string cell(double v) { return std::isnan(v) ? "" : CsvWriter::format_number(v); }

bool adaptive(const OptimizerConfig& c) { return c.kind == OptimizerKind::adam || c.kind == OptimizerKind::adamw; }

std::vector<double> random_start(const std::vector<Var>& params, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> v;
  for (const Var& p : params)
    for (int64_t i = 0; i < p.numel(); ++i) v.push_back(rng.normal());
  return v;
}

}  // namespace

double stability_threshold(const OptimizerConfig& c, double lr, bool preconditioned) {
  if (adaptive(c)) {
    if (!preconditioned) return std::numeric_limits<double>::quiet_NaN();
    return (2 + 2 * c.beta1) / ((1 - c.beta1) * lr);
  }
  const double b = c.momentum;  // 0: plain gradient descent, 2/lr
  return c.nesterov ? (2 + 2 * b) / ((1 + 2 * b) * lr) : (2 + 2 * b) / lr;
}

std::vector<Tensor> adam_inverse_sqrt_preconditioner(const Optimizer& adam, const OptimizerConfig& c) {
  std::map<std::string, const Tensor*> entries;
  const NamedTensors state = adam.state();
  for (const auto& [name, t] : state) entries[name] = &t;
  std::vector<Tensor> out;
  for (const auto& [name, p] : adam.params()) {
    const auto v = entries.find("exp_avg_sq." + name), t = entries.find("step." + name);
    if (v == entries.end() || t == entries.end() || v->second->numel() != p.numel())
      throw ValueError("the preconditioned sharpness needs an unsharded Adam state of '" + name + "'");
    const double steps = t->second->item();
    const double correction = steps > 0 ? 1 - std::pow(c.beta2, steps) : 1;  // v = 0 before a first update
    Tensor d(p.shape());
    const Tensor& v_t = *v->second;
    for (int64_t i = 0; i < d.numel(); ++i)
      d[i] = static_cast<Real>(1 / std::sqrt(std::sqrt(static_cast<double>(v_t[i]) / correction) + c.eps));
    out.push_back(std::move(d));
  }
  return out;
}

const std::vector<std::string>& SharpnessProbe::columns() {
  static const std::vector<std::string> c = {"step", "operator",  "lambda_max", "ritz_min", "residual",
                                             "iterations", "converged", "loss", "lr", "threshold"};
  return c;
}

SharpnessProbe::SharpnessProbe(const std::string& dir, const Optimizer& optimizer, const OptimizerConfig& config,
                               const TopEigenOptions& options, uint64_t seed, int64_t resume_step)
    : optimizer_(optimizer),
      config_(config),
      options_(options),
      seed_(seed),
      csv_(open_sharpness_csv(dir + "/probe_sharpness.csv", resume_step)) {}

void SharpnessProbe::record(int64_t step, const std::function<Var()>& loss, double lr) {
  std::vector<Var> params;
  for (const auto& [name, p] : optimizer_.params()) params.push_back(p);
  HessianVectorProduct hvp(loss, params);
  if (hessian_start_.empty()) hessian_start_ = random_start(params, seed_);
  const TopEigen h = largest_curvature(hvp, {}, hessian_start_, options_);
  hessian_start_ = h.vector;
  write(step, "hessian", h, hvp.loss(), lr, stability_threshold(config_, lr, false));
  if (!adaptive(config_)) return;
  if (preconditioned_start_.empty()) preconditioned_start_ = random_start(params, seed_ + 1);
  const TopEigen p =
      largest_curvature(hvp, adam_inverse_sqrt_preconditioner(optimizer_, config_), preconditioned_start_, options_);
  preconditioned_start_ = p.vector;
  write(step, "preconditioned", p, hvp.loss(), lr, stability_threshold(config_, lr, true));
}

void SharpnessProbe::write(int64_t step, const char* op, const TopEigen& e, double loss, double lr,
                           double threshold) {
  csv_.row({std::to_string(step), op, cell(e.value), cell(e.smallest), cell(e.residual), std::to_string(e.iterations),
            e.converged ? "1" : "0", cell(loss), cell(lr), cell(threshold)});
}

}  // namespace attnlab
