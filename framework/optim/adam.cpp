#include "framework/optim/adam.h"

#include <algorithm>
#include <cmath>

#include "framework/optim/chunks.h"

namespace attnlab {

namespace {
using Arr = Eigen::Array<Real, Eigen::Dynamic, 1>;
using ArrMap = Eigen::Map<Arr>;
using ConstArrMap = Eigen::Map<const Arr>;
}  // namespace

Adam::Adam(const NamedParams& params, const OptimizerConfig& config)
    : Optimizer(params, config),
      beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(config.eps),
      decoupled_(config.kind == OptimizerKind::adamw) {
  if (config.kind == OptimizerKind::sgd) throw ValueError("Adam needs optimizer 'adam' or 'adamw', got 'sgd'");
  exp_avg_ = add_buffer("exp_avg");
  exp_avg_sq_ = add_buffer("exp_avg_sq");
  count_param_steps();
}

// GCC 12 warns about an intentionally undefined register inside Eigen's
// AVX-512 sqrt (_mm512_undefined_ps); the warning is spurious.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
void Adam::update(size_t i, Real* value, const Real* grad, int64_t n, double weight_decay) {
  const double t = static_cast<double>(param_steps(i));
  const double lr = this->lr();
  // Scalars in double as torch computes them, then rounded once to Real.
  const Real step_size = static_cast<Real>(lr / (1 - std::pow(beta1_, t)));
  // torch divides sqrt(v) by sqrt(1 - beta2^t); multiplying by the inverse
  // saves a division per element and differs only in rounding.
  const Real inv_bc2_sqrt = static_cast<Real>(1 / std::sqrt(1 - std::pow(beta2_, t)));
  const Real b1 = static_cast<Real>(beta1_), c1 = static_cast<Real>(1 - beta1_);
  const Real b2 = static_cast<Real>(beta2_), c2 = static_cast<Real>(1 - beta2_);
  const Real eps = static_cast<Real>(eps_);
  const Real l2 = decoupled_ ? Real(0) : static_cast<Real>(weight_decay);
  const Real shrink = decoupled_ ? static_cast<Real>(1 - lr * weight_decay) : Real(1);

  Real* pv = value;
  const Real* gv = grad;
  Real* mv = buffer(exp_avg_, i).data();
  Real* vv = buffer(exp_avg_sq_, i).data();
  for_each_chunk(n, [=](int64_t begin, int64_t end) {
    const int64_t len = end - begin;
    ArrMap p(pv + begin, len), m(mv + begin, len), v(vv + begin, len);
    ConstArrMap g(gv + begin, len);
    if (l2 != 0) {
      m = b1 * m + c1 * (g + l2 * p);
      v = b2 * v + c2 * (g + l2 * p).square();
    } else {
      m = b1 * m + c1 * g;
      v = b2 * v + c2 * g.square();
    }
    p = shrink * p - step_size * m / (v.sqrt() * inv_bc2_sqrt + eps);
  });
}
#pragma GCC diagnostic pop

}  // namespace attnlab
