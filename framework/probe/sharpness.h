#pragma once
// SharpnessProbe: the largest eigenvalue of a loss's Hessian while training,
// and with Adam/AdamW of the preconditioned P⁻¹H (Cohen et al. 2022), one
// probe_sharpness.csv row per operator and probed step. It only reads the
// model and the optimizer: HessianVectorProduct leaves the gradient buffers
// as it found them, and the start vectors come from a generator of its own.
//
// Per probe: λ_max(H) by Lanczos (framework/curvature.h), warm-started from
// the previous probe's eigenvector (the first from a random one); with Adam or
// AdamW also λ_max(P⁻¹H), P = diag(√v̂ + ε), v̂ = v / (1 − β₂ᵗ) the
// optimizer's bias-corrected second moment as it stands (t: the updates the
// parameter has had). Each row names the threshold at which the optimizer's
// update of a quadratic with that curvature diverges (stability_threshold).
//
// probe_sharpness.csv
//   step,operator,lambda_max,ritz_min,residual,iterations,converged,loss,lr,threshold
// operator: "hessian" or "preconditioned"; ritz_min: the smallest Ritz value
// (the operator has an eigenvalue at or below it); residual: ||Ay − λy||;
// loss: the probe batch's loss; threshold: empty where none applies (H under Adam).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/curvature.h"
#include "framework/io/csv.h"
#include "framework/optim/optimizer.h"

namespace attnlab {

// The curvature above which a step of size lr diverges on a quadratic:
// sgd 2/lr, with momentum β (torch's heavy ball) (2 + 2β)/lr, Nesterov's
// (2 + 2β)/((1 + 2β) lr); adam/adamw, for P⁻¹H: (2 + 2β₁)/((1 − β₁) lr)
// (38/lr at β₁ = 0.9). NaN where none applies (H itself under Adam).
double stability_threshold(const OptimizerConfig& config, double lr, bool preconditioned);

// D = P^{-1/2} per parameter, P = √v̂ + ε from an Adam optimizer's state.
std::vector<Tensor> adam_inverse_sqrt_preconditioner(const Optimizer& adam, const OptimizerConfig& config);

class SharpnessProbe {
 public:
  // Writes dir/probe_sharpness.csv (resume_step >= 0: appends after cutting
  // later rows). `seed`: of the first probe's random start vector.
  SharpnessProbe(const std::string& dir, const Optimizer& optimizer, const OptimizerConfig& config,
                 const TopEigenOptions& options, uint64_t seed, int64_t resume_step = -1);

  // The rows of `step`: the curvature of loss() at the parameters as they
  // are; `lr`: the learning rate the thresholds are drawn at.
  void record(int64_t step, const std::function<Var()>& loss, double lr);

  static const std::vector<std::string>& columns();

 private:
  void write(int64_t step, const char* op, const TopEigen& e, double loss, double lr, double threshold);

  const Optimizer& optimizer_;
  OptimizerConfig config_;
  TopEigenOptions options_;
  uint64_t seed_;
  std::vector<double> hessian_start_, preconditioned_start_;  // the previous probe's vectors
  CsvWriter csv_;
};

}  // namespace attnlab
