#include "framework/optim/sgd.h"

#include "framework/optim/chunks.h"

namespace attnlab {

Sgd::Sgd(const NamedParams& params, const OptimizerConfig& config)
    : Optimizer(params, config), momentum_(config.momentum), nesterov_(config.nesterov) {
  if (momentum_ > 0) momentum_buf_ = add_buffer("momentum");
}

void Sgd::update(size_t i, Real* value, const Real* grad, int64_t n, double weight_decay) {
  const Real lr = static_cast<Real>(this->lr());
  const Real wd = static_cast<Real>(weight_decay);
  Real* p = value;
  const Real* g = grad;
  if (momentum_ == 0) {
    for_each_chunk(n, [=](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) p[k] -= lr * (g[k] + wd * p[k]);
    });
    return;
  }
  const Real mu = static_cast<Real>(momentum_);
  Real* buf = buffer(momentum_buf_, i).data();
  if (nesterov_) {
    for_each_chunk(n, [=](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const Real d = g[k] + wd * p[k];
        buf[k] = mu * buf[k] + d;
        p[k] -= lr * (d + mu * buf[k]);
      }
    });
  } else {
    for_each_chunk(n, [=](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        buf[k] = mu * buf[k] + (g[k] + wd * p[k]);
        p[k] -= lr * buf[k];
      }
    });
  }
}

}  // namespace attnlab
