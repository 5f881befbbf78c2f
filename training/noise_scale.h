#pragma once
// The gradient noise scale B_simple = tr(Σ)/|G|² (McCandlish et al. 2018, "An
// Empirical Model of Large-Batch Training", Appendix A.1), from the squared
// norms a step already has: each micro-batch's gradient (batch B_small) and
// the whole batch's (B_big), both gradients of a mean loss. With E|G_B|² =
// |G|² + tr(Σ)/B, the unbiased estimators are
//   |G|²  ≈ (B_big·|G_big|² − B_small·|G_small|²) / (B_big − B_small)
//   tr(Σ) ≈ (|G_small|² − |G_big|²) / (1/B_small − 1/B_big)
// with |G_small|² the mean over the step's micro-batches. Both are smoothed by
// exponential moving averages (not their ratio), as McCandlish et al. do.
// An example is a sequence (the unit of --batch-size); docs/watching.md.
#include <cstdint>
#include <string>
#include <vector>

#include "framework/autograd.h"

namespace attnlab {

// One step's unbiased estimates of |G|² and tr(Σ).
struct NoiseEstimates {
  double grad_sq = 0;  // |G|², the squared norm of the true gradient
  double trace = 0;    // tr(Σ), Σ the covariance of one example's gradient
};

// From small_sq = |G_small|² (the mean over micro-batches of b_small examples
// each) and big_sq = |G_big|² (the batch of b_big > b_small examples).
NoiseEstimates noise_estimates(double small_sq, double big_sq, double b_small, double b_big);

// The sum of squares of every parameter's gradient (none: 0), added in
// parameter and element order in double: a micro-batch's |g|², the same bits
// on whichever thread computes it.
double squared_gradient_norm(const std::vector<Var>& params);

// The exponential moving averages of the two estimators, debiased as Adam's
// moments are (divided by 1 − β^n after n steps), and their ratio B_simple.
class NoiseScaleEma {
 public:
  static constexpr double kDecay = 0.99;  // β: an average over about 100 steps

  // A step's figures: micro_sq each micro-batch's |g_k|² (M of them; fewer
  // than 2: the step is left out), grad_norm the batch's |G_big|, batch_size
  // B_big (B_small = B_big / M).
  void add(const std::vector<double>& micro_sq, double grad_norm, int64_t batch_size);
  int64_t steps() const { return steps_; }
  double grad_sq() const;  // EMA(|G|²), debiased; NaN before the first step
  double trace() const;    // EMA(tr Σ), debiased; NaN before the first step
  double scale() const { return trace() / grad_sq(); }  // B_simple (the debiasing cancels)

  // The averages as exact text, for a checkpoint (a resumed run goes on with
  // the bits); set_state: IoError naming `source` when the text is malformed.
  std::string state() const;
  void set_state(const std::string& text, const std::string& source);

 private:
  double debiased(double ema) const;
  double grad_sq_ = 0, trace_ = 0;  // the raw averages, from 0
  int64_t steps_ = 0;
};

}  // namespace attnlab
