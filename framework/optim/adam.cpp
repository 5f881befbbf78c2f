#include "framework/optim/adam.h"

#include <algorithm>
#include <cmath>

namespace attnlab {

namespace {
// Elements per block: the block's p, g, m, v stay in L1/L2 between the three
// array statements, so the update reads and writes memory once.
constexpr int64_t kBlock = 2048;
// Blocks below which a parallel region costs more than it saves.
constexpr int64_t kParallelMinBlocks = 16;
using Arr = Eigen::Array<Real, Eigen::Dynamic, 1>;
using ArrMap = Eigen::Map<Arr>;
using ConstArrMap = Eigen::Map<const Arr>;
}  // namespace

Adam::Adam(const NamedParams& params, const OptimizerConfig& config)
    : Optimizer(params, config),
      beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(config.eps),
      decoupled_(config.name == "adamw") {
  if (config.name != "adam" && config.name != "adamw")
    throw ValueError("Adam needs optimizer name 'adam' or 'adamw', got '" + config.name + "'");
  exp_avg_ = add_buffer("exp_avg");
  exp_avg_sq_ = add_buffer("exp_avg_sq");
  count_param_steps();
}

// GCC 12 warns about an intentionally undefined register inside Eigen's
// AVX-512 sqrt (_mm512_undefined_ps); the warning is spurious.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
void Adam::update(size_t i, Tensor& value, const Tensor& grad, double weight_decay) {
  const double t = static_cast<double>(param_steps(i));
  const double lr = this->lr();
  // Scalars in double as torch computes them, then rounded once to Real.
  const Real step_size = static_cast<Real>(lr / (1 - std::pow(beta1_, t)));
  const Real bc2_sqrt = static_cast<Real>(std::sqrt(1 - std::pow(beta2_, t)));
  const Real b1 = static_cast<Real>(beta1_), c1 = static_cast<Real>(1 - beta1_);
  const Real b2 = static_cast<Real>(beta2_), c2 = static_cast<Real>(1 - beta2_);
  const Real eps = static_cast<Real>(eps_);
  const Real l2 = decoupled_ ? Real(0) : static_cast<Real>(weight_decay);
  const Real shrink = decoupled_ ? static_cast<Real>(1 - lr * weight_decay) : Real(1);

  const int64_t n = value.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  Real* pv = value.data();
  const Real* gv = grad.data();
  Real* mv = buffer(exp_avg_, i).data();
  Real* vv = buffer(exp_avg_sq_, i).data();
#pragma omp parallel for if (blocks >= kParallelMinBlocks) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t start = b * kBlock, len = std::min(kBlock, n - start);
    ArrMap p(pv + start, len), m(mv + start, len), v(vv + start, len);
    ConstArrMap g0(gv + start, len);
    if (l2 != 0) {
      m = b1 * m + c1 * (g0 + l2 * p);
      v = b2 * v + c2 * (g0 + l2 * p).square();
    } else {
      m = b1 * m + c1 * g0;
      v = b2 * v + c2 * g0.square();
    }
    p = shrink * p - step_size * m / (v.sqrt() / bc2_sqrt + eps);
  }
}

#pragma GCC diagnostic pop

}  // namespace attnlab
