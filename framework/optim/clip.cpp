#include "framework/optim/clip.h"

#include <cmath>
#include <sstream>
#include <string>

namespace attnlab {

double grad_norm(const std::vector<Var>& params) {
  double sum_sq = 0;
  for (const Var& p : params) {
    if (!p.defined() || !p.has_grad()) continue;
    sum_sq += p.grad().flat().template cast<double>().squaredNorm();
  }
  return std::sqrt(sum_sq);
}

double clip_grad_norm(const std::vector<Var>& params, double max_norm) {
  if (!(max_norm > 0) || !std::isfinite(max_norm))
  {
    std::ostringstream msg;
    msg << "clip_grad_norm: max_norm must be > 0 and finite, got " << max_norm;
    throw ValueError(msg.str());
  }
  const double norm = grad_norm(params);
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1) {
    const Real c = static_cast<Real>(coef);
    for (const Var& p : params) {
      if (!p.defined() || !p.has_grad()) continue;
      Var handle = p;  // Var is a handle; the gradient is shared
      handle.grad().flat() *= c;
    }
  }
  return norm;
}

}  // namespace attnlab
