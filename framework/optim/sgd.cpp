#include "framework/optim/sgd.h"

namespace attnlab {

namespace {
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;
}  // namespace

Sgd::Sgd(const NamedParams& params, const OptimizerConfig& config)
    : Optimizer(params, config), momentum_(config.momentum), nesterov_(config.nesterov) {
  if (momentum_ > 0) momentum_buf_ = add_buffer("momentum");
}

void Sgd::update(size_t i, Tensor& value, const Tensor& grad, double weight_decay) {
  const int64_t n = value.numel();
  const Real lr = static_cast<Real>(this->lr());
  const Real wd = static_cast<Real>(weight_decay);
  Real* p = value.data();
  const Real* g = grad.data();
  if (momentum_ == 0) {
#pragma omp parallel for if (n >= kParallelMin) schedule(static)
    for (int64_t k = 0; k < n; ++k) p[k] -= lr * (g[k] + wd * p[k]);
    return;
  }
  const Real mu = static_cast<Real>(momentum_);
  Real* buf = buffer(momentum_buf_, i).data();
  if (nesterov_) {
#pragma omp parallel for if (n >= kParallelMin) schedule(static)
    for (int64_t k = 0; k < n; ++k) {
      const Real d = g[k] + wd * p[k];
      buf[k] = mu * buf[k] + d;
      p[k] -= lr * (d + mu * buf[k]);
    }
  } else {
#pragma omp parallel for if (n >= kParallelMin) schedule(static)
    for (int64_t k = 0; k < n; ++k) {
      buf[k] = mu * buf[k] + (g[k] + wd * p[k]);
      p[k] -= lr * buf[k];
    }
  }
}

}  // namespace attnlab
