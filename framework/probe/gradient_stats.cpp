#include "framework/probe/gradient_stats.h"

#include <cmath>

namespace attnlab {

namespace {
// Sum over i of f(i) in double with 4 independent accumulators (vectorises;
// the order of additions is fixed).
template <class F>
double sum4(int64_t n, F f) {
  double acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) acc[j] += f(i + j);
  for (; i < n; ++i) acc[0] += f(i);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}
}  // namespace

double l2_norm(const Tensor& t) {
  const Real* x = t.data();
  return std::sqrt(sum4(t.numel(), [x](int64_t i) {
    const double v = x[i];
    return v * v;
  }));
}

double l2_distance(const Tensor& a, const Tensor& b) {
  check_shape(b.shape(), a.shape(), "l2_distance");
  const Real* x = a.data();
  const Real* y = b.data();
  return std::sqrt(sum4(a.numel(), [x, y](int64_t i) {
    const double v = static_cast<double>(x[i]) - static_cast<double>(y[i]);
    return v * v;
  }));
}

double rms(const Tensor& t) {
  if (t.numel() == 0) return 0;
  return l2_norm(t) / std::sqrt(static_cast<double>(t.numel()));
}

void UpdateProbe::before_step() {
  before_.clear();
  grad_norms_.clear();
  before_.reserve(params_.size());
  for (const auto& [name, v] : params_) {
    before_.push_back(v.value());  // a copy
    grad_norms_.push_back(v.has_grad() ? l2_norm(v.grad()) : 0.0);
  }
}

std::vector<ParameterStats> UpdateProbe::after_step() {
  if (before_.size() != params_.size()) throw ValueError("UpdateProbe::after_step called without before_step");
  std::vector<ParameterStats> out;
  out.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    ParameterStats s;
    s.name = params_[i].first;
    s.grad_norm = grad_norms_[i];
    s.weight_norm = l2_norm(before_[i]);
    s.update_norm = l2_distance(params_[i].second.value(), before_[i]);
    s.update_ratio = s.weight_norm > 0 ? s.update_norm / s.weight_norm : 0;
    out.push_back(std::move(s));
  }
  before_.clear();
  return out;
}

}  // namespace attnlab
