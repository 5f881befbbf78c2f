#pragma once
// SGD with optional momentum, Nesterov momentum and L2 weight decay, as
// torch.optim.SGD (dampening 0):
//   d = g + wd * p
//   buf = momentum * buf + d              (buf starts at 0, so the first buf is d)
//   p -= lr * (nesterov ? d + momentum * buf : buf)      (momentum > 0)
//   p -= lr * d                                         (momentum = 0)
#include "framework/optim/optimizer.h"

namespace attnlab {

class Sgd : public Optimizer {
 public:
  Sgd(const NamedParams& params, const OptimizerConfig& config);

 protected:
  void update(size_t i, Real* value, const Real* grad, int64_t n, double weight_decay) override;

 private:
  double momentum_;
  bool nesterov_;
  size_t momentum_buf_ = 0;  // buffer index "momentum", only when momentum > 0
};

}  // namespace attnlab
