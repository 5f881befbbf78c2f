#pragma once
// Adam (L2 weight decay, as torch.optim.Adam) and AdamW (decoupled weight
// decay, as torch.optim.AdamW), with torch's bias correction. With t the
// number of updates this parameter has received (including this one):
//   AdamW only:  p *= 1 - lr * wd
//   Adam only:   g += wd * p
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Each parameter is updated in one pass over its elements, in cache-sized
// blocks of Eigen array expressions.
#include "framework/optim/optimizer.h"

namespace attnlab {

class Adam : public Optimizer {
 public:
  // config.name "adam" -> L2, "adamw" -> decoupled.
  Adam(const NamedParams& params, const OptimizerConfig& config);
  bool decoupled() const { return decoupled_; }

 protected:
  void update(size_t i, Real* value, const Real* grad, int64_t n, double weight_decay) override;

 private:
  double beta1_, beta2_, eps_;
  bool decoupled_;
  size_t exp_avg_, exp_avg_sq_;
};

}  // namespace attnlab
