#pragma once
// Per-parameter gradient-flow statistics: gradient L2 norm, weight norm, and
// the update-to-weight ratio ||Δw|| / ||w|| of one optimizer step (measured
// around it: snapshot before, compare after). Read-only: nothing here writes
// into a parameter or a gradient.
#include <string>
#include <utility>
#include <vector>

#include "framework/autograd.h"

namespace attnlab {

// Norms accumulated in double in a fixed order (the same value on every run).
double l2_norm(const Tensor& t);
double l2_distance(const Tensor& a, const Tensor& b);  // ||a − b||; shapes must match
double rms(const Tensor& t);                           // ||t|| / sqrt(numel); 0 for an empty tensor

struct ParameterStats {
  std::string name;
  double grad_norm = 0;     // ||g|| as backward left it (before clipping); 0 without a gradient
  double weight_norm = 0;   // ||w|| before the step
  double update_norm = 0;   // ||w_after − w_before||
  double update_ratio = 0;  // update_norm / weight_norm (0 when the weight is 0)
};

// Usage: before_step() after backward (and before clipping), then the
// optimizer step, then after_step(). Costs one copy of the weights.
class UpdateProbe {
 public:
  explicit UpdateProbe(std::vector<std::pair<std::string, Var>> params) : params_(std::move(params)) {}

  void before_step();                         // records gradient norms and snapshots the weights
  std::vector<ParameterStats> after_step();   // ValueError if before_step() was not called first
  bool armed() const { return !before_.empty(); }
  void disarm() { before_.clear(); }

 private:
  std::vector<std::pair<std::string, Var>> params_;
  std::vector<Tensor> before_;
  std::vector<double> grad_norms_;
};

}  // namespace attnlab
